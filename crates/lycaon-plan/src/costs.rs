//! Per-operation costs calibrated on this machine (cached on disk, one short measurement per
//! parameter shape) and the network link: the prices the planner multiplies counts by.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use lycaon_bfv::rlwe::Parameters;
use lycaon_nn::calibrate::OpCosts;
use serde::{Deserialize, Serialize};

use crate::PlanError;

/// A network link: bandwidth and one-way delay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub name: String,
    pub bandwidth_bits_per_s: f64,
    pub one_way_delay_s: f64,
}

impl Link {
    /// 2 Gbps, 0.25 ms one way (a data-centre LAN, the setting of Cheetah's LAN figures).
    pub fn lan() -> Self {
        Self { name: "lan".into(), bandwidth_bits_per_s: 2e9, one_way_delay_s: 0.25e-3 }
    }

    /// 400 Mbps, 40 ms round trip (Cheetah's WAN).
    pub fn wan() -> Self {
        Self { name: "wan".into(), bandwidth_bits_per_s: 400e6, one_way_delay_s: 20e-3 }
    }

    /// `2gbps` or `lan`, `wan`, or `BW,DELAY` with units (`100mbps,10ms`, `1gbps,0.5ms`).
    pub fn parse(text: &str) -> Result<Self, PlanError> {
        let t = text.trim().to_ascii_lowercase();
        match t.as_str() {
            "lan" | "2gbps" => return Ok(Self::lan()),
            "wan" => return Ok(Self::wan()),
            _ => {}
        }
        let bad = || PlanError::Invalid(format!("link '{text}': use lan, wan, 2gbps, or BANDWIDTH,DELAY such as 100mbps,10ms"));
        let (bw, delay) = t.split_once(',').ok_or_else(bad)?;
        let number = |s: &str, units: &[(&str, f64)]| -> Option<f64> {
            units.iter().find_map(|(u, f)| s.trim().strip_suffix(u).and_then(|v| v.trim().parse::<f64>().ok()).map(|v| v * f))
        };
        let bandwidth = number(bw, &[("gbps", 1e9), ("mbps", 1e6), ("kbps", 1e3), ("bps", 1.0)]).ok_or_else(bad)?;
        let delay = number(delay, &[("ms", 1e-3), ("us", 1e-6), ("s", 1.0)]).ok_or_else(bad)?;
        if !(bandwidth > 0.0 && bandwidth.is_finite() && delay >= 0.0 && delay.is_finite()) {
            return Err(bad());
        }
        Ok(Self { name: text.trim().to_string(), bandwidth_bits_per_s: bandwidth, one_way_delay_s: delay })
    }

    /// Seconds to move `bytes` in `round_trips` request-response exchanges.
    pub fn seconds(&self, bytes: usize, round_trips: usize) -> f64 {
        bytes as f64 * 8.0 / self.bandwidth_bits_per_s + round_trips as f64 * 2.0 * self.one_way_delay_s
    }
}

/// Costs by parameter shape: the word size is 64 bits whatever the prime sizes, so a cost
/// depends on n, the number of ciphertext and special primes, and the digits only.
#[derive(Debug, Default)]
pub struct CostTable {
    entries: BTreeMap<String, OpCosts>,
    path: Option<PathBuf>,
    dirty: bool,
}

/// The cache key of a parameter set on this machine (thread count included).
pub fn shape_key(params: &Parameters) -> String {
    let lit = params.literal();
    format!(
        "n{}-q{}-p{}-d{}-threads{}",
        lit.n,
        lit.ciphertext_moduli.len(),
        lit.special_moduli.len(),
        lit.key_switch_digits,
        rayon_threads()
    )
}

/// The threads the layers will run on (RAYON_NUM_THREADS when set, else the cores).
fn rayon_threads() -> usize {
    rayon::current_num_threads().max(1)
}

impl CostTable {
    /// A table cached in `path` (read now if it exists; written by [`CostTable::save`]).
    pub fn cached(path: PathBuf) -> Result<Self, PlanError> {
        let entries = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| PlanError::Invalid(format!("cost cache {} is corrupt ({e}); delete it to recalibrate", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(PlanError::Io(format!("reading {}: {e}", path.display()))),
        };
        Ok(Self { entries, path: Some(path), dirty: false })
    }

    /// The default cache file: $LYCAON_CACHE or ~/.cache/lycaon, file op-costs-v2.json (v2: costs
    /// measured over 10 ms samples, with the fan-out of lazy accumulations).
    pub fn default_path() -> PathBuf {
        let dir = std::env::var_os("LYCAON_CACHE").map(PathBuf::from).unwrap_or_else(|| {
            let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
            home.join(".cache").join("lycaon")
        });
        dir.join("op-costs-v2.json")
    }

    /// A table that is never saved (tests).
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// Measures the costs of `params`'s shape unless they are cached.
    pub fn calibrate(&mut self, params: &Arc<Parameters>) -> Result<(), PlanError> {
        let key = shape_key(params);
        if !self.entries.contains_key(&key) {
            let measured = OpCosts::measure(params)?;
            self.entries.insert(key, measured);
            self.dirty = true;
        }
        Ok(())
    }

    /// The costs of `params`'s shape, which [`CostTable::calibrate`] must have measured.
    pub fn lookup(&self, params: &Parameters) -> Result<OpCosts, PlanError> {
        let key = shape_key(params);
        self.entries.get(&key).copied().ok_or_else(|| PlanError::Invalid(format!("no calibrated costs for parameter shape {key}")))
    }

    /// The costs of `params`, measured now if not cached.
    pub fn get(&mut self, params: &Arc<Parameters>) -> Result<OpCosts, PlanError> {
        self.calibrate(params)?;
        self.lookup(params)
    }

    /// Number of calibrated shapes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes new measurements to the cache file (if any).
    pub fn save(&mut self) -> Result<(), PlanError> {
        let (Some(path), true) = (&self.path, self.dirty) else { return Ok(()) };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| PlanError::Io(format!("creating {}: {e}", dir.display())))?;
        }
        let text = serde_json::to_string_pretty(&self.entries).map_err(|e| PlanError::Io(e.to_string()))?;
        std::fs::write(path, text).map_err(|e| PlanError::Io(format!("writing {}: {e}", path.display())))?;
        self.dirty = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_parse() {
        assert_eq!(Link::parse("LAN").unwrap(), Link::lan());
        assert_eq!(Link::parse("2gbps").unwrap(), Link::lan());
        let l = Link::parse("100mbps,10ms").unwrap();
        assert_eq!(l.bandwidth_bits_per_s, 100e6);
        assert!((l.one_way_delay_s - 0.01).abs() < 1e-12);
        assert!((l.seconds(1_000_000, 1) - (0.08 + 0.02)).abs() < 1e-9);
        for bad in ["", "fast", "100,10", "0mbps,1ms", "1gbps,-1ms", "1gbps"] {
            assert!(Link::parse(bad).unwrap_err().to_string().contains("link"), "{bad}");
        }
    }
}
