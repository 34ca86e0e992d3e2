//! Whole-network simulation, the reproduction table against 000, and the JSON entry points.

use serde::{Deserialize, Serialize};

use super::accelerator::{cost, ArchConfig, Components};
use super::models::{self, LayerSpec, Model};
use super::packing::{count_layer, CountingOptions, Packing, PackingFactors, Traffic};
use crate::PlanError;

/// One layer's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerResult {
    pub name: String,
    pub factors: PackingFactors,
    pub latency_s: f64,
    pub energy_j: f64,
    pub mults: u64,
    pub rotations: u64,
    pub shifts: u64,
    pub permutations: u64,
    pub plaintext_rotations: u64,
    pub ntts: u64,
    pub keyswitches: u64,
    /// Bytes between HBM and the chip per data structure.
    pub bytes: Traffic,
    pub component_latency_s: Components,
    pub component_energy_j: Components,
    pub memory_bound: bool,
}

/// A network under one packing on one architecture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    pub model: String,
    pub packing: String,
    pub arch: String,
    pub batch: usize,
    /// Server latency of the linear layers for the whole batch, and energy.
    pub latency_s: f64,
    pub energy_j: f64,
    pub mults: u64,
    pub rotations: u64,
    pub shifts: u64,
    pub permutations: u64,
    pub plaintext_rotations: u64,
    pub ntts: u64,
    pub keyswitches: u64,
    pub bytes: Traffic,
    pub component_latency_s: Components,
    pub component_energy_j: Components,
    pub layers: Vec<LayerResult>,
}

/// Simulates `model` under `packing` on `arch` for `batch` images (000 Sec. 7; sequential
/// packings run the images one after another, Sec. 7.3).
///
/// Errors: an invalid model, architecture or batch, or a layer the packing cannot hold.
pub fn simulate(model: &Model, packing: Packing, arch: &ArchConfig, batch: usize) -> Result<SimResult, PlanError> {
    simulate_with(model, packing, arch, batch, &CountingOptions::default())
}

/// [`simulate`] with explicit counting options.
pub fn simulate_with(model: &Model, packing: Packing, arch: &ArchConfig, batch: usize, opts: &CountingOptions) -> Result<SimResult, PlanError> {
    model.validate()?;
    arch.validate()?;
    let caps = arch.capacities();
    let mut out = SimResult {
        model: model.name.clone(),
        packing: packing.name().into(),
        arch: arch.name.clone(),
        batch,
        latency_s: 0.0,
        energy_j: 0.0,
        mults: 0,
        rotations: 0,
        shifts: 0,
        permutations: 0,
        plaintext_rotations: 0,
        ntts: 0,
        keyswitches: 0,
        bytes: Traffic::default(),
        component_latency_s: Components::default(),
        component_energy_j: Components::default(),
        layers: Vec::with_capacity(model.layers.len()),
    };
    for layer in &model.layers {
        let c = count_layer(layer, packing, &arch.he, &caps, batch, opts)?;
        let t = cost(&c, arch);
        out.latency_s += t.latency_s;
        out.energy_j += t.energy_j;
        out.mults += c.mults;
        out.rotations += c.rotations;
        out.shifts += c.shifts;
        out.permutations += c.permutations;
        out.plaintext_rotations += c.plaintext_rotations;
        out.ntts += c.ntts;
        out.keyswitches += c.keyswitches;
        out.bytes = out.bytes + c.offchip;
        out.component_latency_s = out.component_latency_s + t.busy_s;
        out.component_energy_j = out.component_energy_j + t.energy;
        out.layers.push(LayerResult {
            name: layer.name.clone(),
            factors: c.factors,
            latency_s: t.latency_s,
            energy_j: t.energy_j,
            mults: c.mults,
            rotations: c.rotations,
            shifts: c.shifts,
            permutations: c.permutations,
            plaintext_rotations: c.plaintext_rotations,
            ntts: c.ntts,
            keyswitches: c.keyswitches,
            bytes: c.offchip,
            component_latency_s: t.busy_s,
            component_energy_j: t.energy,
            memory_bound: t.memory_bound,
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Reproduction of 000

/// One figure of 000 against this simulator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReproductionRow {
    /// What is compared and where the paper states it.
    pub figure: String,
    pub paper: f64,
    /// On the layer lists the paper used (the HEPack-Sim files).
    pub ours: f64,
    /// Relative deviation (ours / paper - 1).
    pub deviation: f64,
    /// The same figure on the real networks.
    pub ours_real_networks: f64,
    pub unit: String,
    /// Allowed |deviation| for this figure.
    pub tolerance: f64,
    pub within_tolerance: bool,
    /// Why a figure deviates (empty when it does not).
    pub explanation: String,
}

/// The tolerance of the reproduction (issue 7: within 25%).
pub const TOLERANCE: f64 = 0.25;

fn geomean(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len().max(1) as f64).exp()
}

struct Suite {
    /// [model][packing] -> (latency, energy)
    values: Vec<Vec<(f64, f64)>>,
}

const SUITE_PACKINGS: [Packing; 4] = [Packing::Channel, Packing::AplusW, Packing::C2pc, Packing::Hyena];

fn run_suite(models: &[Model], arch: &ArchConfig) -> Result<Suite, PlanError> {
    let values = models
        .iter()
        .map(|m| SUITE_PACKINGS.iter().map(|&p| simulate(m, p, arch, 1).map(|r| (r.latency_s, r.energy_j))).collect::<Result<Vec<_>, _>>())
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Suite { values })
}

impl Suite {
    /// Ratio of the geometric means over the models (000's Fig. 7-8 "average"), of packing
    /// `base` to Hyena; `energy` picks the energy instead of the latency.
    fn ratio(&self, base: usize, energy: bool) -> f64 {
        let pick = |p: usize| self.values.iter().map(|m| if energy { m[p].1 } else { m[p].0 }).collect::<Vec<_>>();
        geomean(&pick(base)) / geomean(&pick(3))
    }

    fn hyena_latency(&self, model: usize) -> f64 {
        self.values[model][3].0
    }
}

/// The reproduction table against 000 (Sec. 7.2, Figs. 7-8, Table 5) on the Hyena architecture.
///
/// The paper's ratios are of geometric means over ResNet-50, MobileNetV2 and GNMT (the averages
/// of its Figs. 7-8, as HEPack-Sim's released charts compute them). "ours" runs the layer lists
/// the paper ran (the HEPack-Sim files, [`models::hepack_resnet50`] etc.), "ours_real_networks"
/// the real networks of [`models`].
pub fn reproduction() -> Result<Vec<ReproductionRow>, PlanError> {
    let arch = ArchConfig::hyena();
    let listed = [models::hepack_resnet50(), models::hepack_mobilenet_v2(), models::hepack_gnmt()];
    let real = [models::resnet50(), models::mobilenet_v2(), models::gnmt()];
    let a = run_suite(&listed, &arch)?;
    let b = run_suite(&real, &arch)?;
    let r20 = simulate(&models::hepack_resnet20(), Packing::Hyena, &arch, 1)?.latency_s;
    let r20_real = simulate(&models::resnet20(), Packing::Hyena, &arch, 1)?.latency_s;
    let ms = 1e3;
    let rows: Vec<(&str, f64, f64, f64, &str, &str)> = vec![
        ("Hyena vs Ch-Pack speedup (Sec. 7.2, Fig. 7)", 38.0, a.ratio(0, false), b.ratio(0, false), "x", ""),
        ("Hyena vs Ch-Pack energy (Sec. 7.2, Fig. 8)", 162.0, a.ratio(0, true), b.ratio(0, true), "x", ""),
        ("Hyena vs A+W-Pack speedup (Sec. 7.2, Fig. 7)", 14.0, a.ratio(1, false), b.ratio(1, false), "x", ""),
        ("Hyena vs A+W-Pack energy (Sec. 7.2, Fig. 8)", 11.0, a.ratio(1, true), b.ratio(1, true), "x", AW_ENERGY_EXPLANATION),
        ("Hyena vs C2PC-Pack speedup (Sec. 7.2)", 1.9, a.ratio(2, false), b.ratio(2, false), "x", C2PC_EXPLANATION),
        ("ResNet-50 server latency, Hyena (Sec. 7.2)", 32.8, a.hyena_latency(0) * ms, b.hyena_latency(0) * ms, "ms", ""),
        ("MobileNetV2 server latency, Hyena (Sec. 7.2)", 8.8, a.hyena_latency(1) * ms, b.hyena_latency(1) * ms, "ms", MOBILENET_EXPLANATION),
        ("GNMT server latency, Hyena (Sec. 7.2)", 356.5, a.hyena_latency(2) * ms, b.hyena_latency(2) * ms, "ms", ""),
        ("ResNet-20 HE time, Hyena (Table 5)", 0.2, r20 * ms, r20_real * ms, "ms", RESNET20_EXPLANATION),
    ];
    Ok(rows
        .into_iter()
        .map(|(figure, paper, ours, real, unit, why)| {
            let deviation = ours / paper - 1.0;
            let within = deviation.abs() <= TOLERANCE;
            ReproductionRow {
                figure: figure.into(),
                paper,
                ours,
                deviation,
                ours_real_networks: real,
                unit: unit.into(),
                tolerance: TOLERANCE,
                within_tolerance: within,
                explanation: if within { String::new() } else { why.into() },
            }
        })
        .collect())
}

/// Note on the C2PC gap (shown only if it leaves the tolerance).
pub const C2PC_EXPLANATION: &str = "000 models C2PC as memory bound (Sec. 7.1.2) but states both \
'a polynomial is requested every 5 ns' and a 1.9x gap, and its released HEPack-Sim charges 15 ns \
per W polynomial (its charts give 3.8x). We charge one 4 KB W polynomial per product from one \
256 GB/s HBM2 stack (16 ns) and count products with the block search of Sec. 4.4; the memory \
rate behind the paper's 1.9x is not stated.";

/// Why A+W's energy is higher here than the paper's 11x implies.
pub const AW_ENERGY_EXPLANATION: &str = "every A+W product is followed by a psum permutation whose \
key switch reads one 8 KB key-switching hint from the KSH L2 buffer (6.066 W, Table 4); we charge \
that read per key switch, as for every other packing, which is about a third of A+W's energy. \
000's A+W energy leaves it out: the released HEPack-Sim charges the KSH-buffer read of the A+W \
(EPIC) dataflow once per layer instead of once per rotation (for LoLa, Ch-Pack and Hyena it \
charges every rotation). Without those reads our ratio is about 10.5x, within 5% of the paper.";

/// Why MobileNetV2 is faster here than the paper's 8.8 ms.
pub const MOBILENET_EXPLANATION: &str = "the paper's 8.8 ms is not reproduced by its own released \
layer list and simulator (HEPack-Sim's charts give 6.86 ms for the same configuration); the layer \
list or parameters behind 8.8 ms are not published.";

/// Why ResNet-20 deviates from Table 5's 0.2 ms.
pub const RESNET20_EXPLANATION: &str = "Table 5 reports the HE time rounded to one digit (0.2 ms) \
for the ResNet-20 layer list of HEPack-Sim, which holds only 12 of the network's 19 \
convolutions and no padding; the released simulator's charts give 0.14 ms for it; the real \
network (19 padded convolutions) takes longer.";

/// The reproduction table as JSON.
pub fn reproduction_json() -> Result<String, PlanError> {
    serde_json::to_string(&reproduction()?).map_err(|e| PlanError::InvalidRequest { reason: format!("cannot serialise the table: {e}") })
}

// ---------------------------------------------------------------------------------------------
// JSON entry point

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    model: serde_json::Value,
    #[serde(default = "all")]
    packing: String,
    #[serde(default = "hyena")]
    arch: String,
    #[serde(default = "one")]
    batch: usize,
}

fn all() -> String {
    "all".into()
}
fn hyena() -> String {
    "hyena".into()
}
fn one() -> usize {
    1
}

/// Runs a simulation request given as JSON:
/// `{"model": NAME | {"name": .., "layers": [..]} | [layers] | "<MAESTRO .m text>",
///   "packing": "all" | NAME, "arch": "hyena" | "f1" | "<TOML text>", "batch": N}`
/// and returns a JSON list of [`SimResult`], one per packing.
///
/// Errors: malformed JSON, an unknown model, packing or architecture, malformed TOML, an invalid
/// layer or batch, or a layer a packing cannot hold.
pub fn simulate_json(request: &str) -> Result<String, PlanError> {
    let req: Request = serde_json::from_str(request).map_err(|e| PlanError::InvalidRequest { reason: e.to_string() })?;
    let model = match &req.model {
        serde_json::Value::String(s) if s.contains("Dimensions") => models::parse_model(s, "model")?,
        serde_json::Value::String(s) => models::model_by_name(s)?,
        serde_json::Value::Array(_) => {
            let layers: Vec<LayerSpec> = serde_json::from_value(req.model.clone()).map_err(|e| PlanError::ModelFile { reason: e.to_string() })?;
            Model { name: "model".into(), layers }
        }
        serde_json::Value::Object(_) => serde_json::from_value(req.model.clone()).map_err(|e| PlanError::ModelFile { reason: e.to_string() })?,
        other => return Err(PlanError::InvalidRequest { reason: format!("\"model\" must be a name, a layer list or a model object, got {other}") }),
    };
    let arch = ArchConfig::from_name_or_toml(&req.arch)?;
    if req.batch == 0 || req.batch > 1 << 20 {
        return Err(PlanError::InvalidBatch { batch: req.batch, reason: "must be between 1 and 2^20".into() });
    }
    let packings: Vec<Packing> = if req.packing.trim().eq_ignore_ascii_case("all") { Packing::ALL.to_vec() } else { vec![Packing::parse(&req.packing)?] };
    let results = packings.into_iter().map(|p| simulate(&model, p, &arch, req.batch)).collect::<Result<Vec<_>, _>>()?;
    serde_json::to_string(&results).map_err(|e| PlanError::InvalidRequest { reason: format!("cannot serialise the results: {e}") })
}

/// The batch study of 000 Fig. 9: latency and energy of ResNet-50 (the HEPack-Sim list) for
/// Hyena, Hyena+, BatchWise and BatchWise+ at each batch size, on the Hyena architecture.
pub fn batch_study(batches: &[usize]) -> Result<Vec<SimResult>, PlanError> {
    let arch = ArchConfig::hyena();
    let model = models::hepack_resnet50();
    let mut out = Vec::new();
    for &b in batches {
        for p in [Packing::Hyena, Packing::HyenaPlus, Packing::BatchWise, Packing::BatchWisePlus] {
            let mut r = simulate(&model, p, &arch, b)?;
            r.layers.clear();
            out.push(r);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproduction_is_within_tolerance_or_explained() {
        let rows = reproduction().unwrap();
        assert_eq!(rows.len(), 9);
        for r in &rows {
            assert!(r.ours.is_finite() && r.ours > 0.0, "{r:?}");
            if r.within_tolerance {
                assert!(r.deviation.abs() <= TOLERANCE, "{r:?}");
            } else {
                assert!(!r.explanation.is_empty(), "{} deviates {:+.1}% without an explanation", r.figure, 100.0 * r.deviation);
            }
        }
        // The documented deviation: A+W's energy gap is larger by the KSH-buffer reads the
        // paper's simulator leaves out (about +40%); it must stay in that band.
        let aw = rows.iter().find(|r| r.figure.contains("A+W-Pack energy")).unwrap();
        assert!((0.25..0.6).contains(&aw.deviation), "{aw:?}");
        // GNMT's nine products are exact: 4 x 2^21 + 5 x 48 x 4096 x 64 products (+ psum
        // rotations) at 5 ns.
        let gnmt = rows.iter().find(|r| r.figure.starts_with("GNMT")).unwrap();
        assert!(gnmt.deviation.abs() < 0.01, "{gnmt:?}");
    }

    #[test]
    fn json_requests_run_and_bad_ones_fail_clearly() {
        let out = simulate_json(r#"{"model": "resnet20", "packing": "all", "arch": "hyena", "batch": 1}"#).unwrap();
        let v: Vec<SimResult> = serde_json::from_str(&out).unwrap();
        assert_eq!(v.len(), Packing::ALL.len());
        assert!(v.iter().all(|r| r.latency_s > 0.0 && r.energy_j > 0.0 && r.layers.len() == 20));
        let inline = r#"{"model": [{"name": "c", "kind": "conv", "h": 8, "w": 8, "c_in": 4, "c_out": 8, "k": 3}], "packing": "hyena", "arch": "f1"}"#;
        let v: Vec<SimResult> = serde_json::from_str(&simulate_json(inline).unwrap()).unwrap();
        assert_eq!((v.len(), v[0].arch.as_str()), (1, "f1"));
        let toml = ArchConfig::hyena().to_toml().unwrap().replace("clock_mhz = 200.0", "clock_mhz = 400.0");
        let req = serde_json::json!({"model": "gnmt", "packing": "hyena", "arch": toml}).to_string();
        assert!(simulate_json(&req).is_ok());
        for (bad, what) in [
            (r#"{"model": "nope"}"#, "unknown model"),
            (r#"{"model": "resnet20", "packing": "zip"}"#, "unknown packing"),
            (r#"{"model": "resnet20", "arch": "tpu"}"#, "unknown architecture"),
            (r#"{"model": "resnet20", "arch": "clock_mhz = ["}"#, "invalid architecture"),
            (r#"{"model": "resnet20", "batch": 0}"#, "invalid batch"),
            (r#"{"model": 3}"#, "invalid simulation request"),
            (r#"not json"#, "invalid simulation request"),
            (r#"{"model": [{"name": "z", "kind": "conv", "h": 0, "w": 8, "c_in": 4, "c_out": 8, "k": 3}]}"#, "is invalid"),
        ] {
            let e = simulate_json(bad).unwrap_err().to_string();
            assert!(e.contains(what), "{bad}: {e}");
        }
        let table: Vec<ReproductionRow> = serde_json::from_str(&reproduction_json().unwrap()).unwrap();
        assert_eq!(table.len(), 9);
    }

    #[test]
    fn batch_study_shows_fig_9_trends() {
        let r = batch_study(&[1, 512]).unwrap();
        let get = |b: usize, p: &str| r.iter().find(|x| x.batch == b && x.packing == p).unwrap().latency_s;
        // Hyena runs images one after another: 512x the latency.
        assert!((get(512, "hyena") / get(1, "hyena") - 512.0).abs() < 1e-6);
        // BatchWise packs up to 512 images in the slots: the same latency at 1 and 512.
        assert!((get(512, "batchwise") - get(1, "batchwise")).abs() < 1e-12);
        // At batch 512 BatchWise catches up with (outperforms) Hyena (Sec. 7.3), and Hyena+ is
        // the fastest of the Hyena family.
        assert!(get(512, "batchwise") < get(512, "hyena"));
        assert!(get(512, "hyena+") <= get(512, "hyena"));
        assert!(get(1, "batchwise+") < get(1, "batchwise"));
    }
}
