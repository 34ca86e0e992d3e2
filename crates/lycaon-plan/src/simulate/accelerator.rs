//! Pipeline and energy model of the Hyena accelerator and an F1-like baseline (000 Secs. 6-7,
//! Tables 3-4, Figs. 5-8).
//!
//! A PE handles a degree-1K polynomial of 32-bit words at 1K elements per cycle (Sec. 6.1). Each
//! packing's dataflow runs as chained, fully pipelined functional units (Fig. 5, bottom): a pass
//! of a pipeline costs its slowest stage, and passes of one pipeline follow each other back to
//! back (Sec. 7.1.2). Ch-Pack and GALA cannot fuse their loops (Sec. 6.4): their rotation phases
//! run stage after stage. Hyena's IF permutations run beside the main pipeline, off the critical
//! path while the NTT/rotation units keep up (Sec. 6.4). C2PC is memory bound: one W polynomial
//! per product arrives at the HBM rate (Sec. 7.1.2).
//!
//! Energy is the sum over events of a per-access energy: VMult, NTT pass, Benes (or F1 shift and
//! transpose) use, register, L2 and HBM accesses (the categories of Fig. 8). Unit energies are the
//! Table 4 powers times one 5 ns cycle (a unit at full activity does one access per cycle); HBM2
//! costs 3.9 pJ/bit (Sec. 7.1.1).

use serde::{Deserialize, Serialize};

use super::packing::{Capacities, HeParams, LayerCounts, Packing};
use crate::PlanError;

/// How ciphertexts are rotated and permuted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RotationUnit {
    /// A Benes network: any permutation of N inputs in O(1) delay (000 Sec. 6.3).
    Benes,
    /// F1's automorphism unit: shift, transpose, shift, transpose (Samardzic et al. 2021, as
    /// HEPack-Sim models the F1 architecture).
    F1Transpose,
}

/// Per-access energies in nanojoules.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Energies {
    /// One ciphertext-plaintext (or ciphertext-KSH) product: both polynomials, all lanes.
    pub vmult_nj: f64,
    /// One sqrt(n)-point NTT pass over a ciphertext (the F1 decomposition, Sec. 6.3).
    pub ntt_pass_nj: f64,
    /// One use of a Benes network (one polynomial).
    pub benes_nj: f64,
    /// One F1 shift (one polynomial).
    pub shift_nj: f64,
    /// One F1 transpose (one polynomial).
    pub transpose_nj: f64,
    /// Reading a ciphertext from the IF registers, a plaintext from the W registers, a psum
    /// ciphertext from the psum registers.
    pub if_reg_nj: f64,
    pub w_reg_nj: f64,
    pub psum_reg_nj: f64,
    /// Reading or writing 1024 words (4 KiB) of the IF, W and KSH L2 buffers.
    pub if_l2_nj_per_kword: f64,
    pub w_l2_nj_per_kword: f64,
    pub ksh_l2_nj_per_kword: f64,
    /// HBM2 energy per bit.
    pub hbm_pj_per_bit: f64,
}

/// An accelerator: clock, functional-unit latencies, buffers, memory and energies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchConfig {
    pub name: String,
    /// HE parameters a PE is built for.
    pub he: HeParams,
    pub clock_mhz: f64,
    pub rotation_unit: RotationUnit,
    /// Latency of one stage of each unit, in ns.
    pub vmult_ns: f64,
    pub ksh_ns: f64,
    pub benes_ns: f64,
    pub shift_ns: f64,
    pub transpose_ns: f64,
    pub ntt_pass_ns: f64,
    /// L2 buffer sizes in bytes and psum registers (ciphertexts).
    pub if_l2_bytes: u64,
    pub w_l2_bytes: u64,
    pub ksh_l2_bytes: u64,
    pub psum_registers: u64,
    /// HBM bandwidth in GB/s.
    pub hbm_gbps: f64,
    /// Whether every packing is limited by HBM bandwidth (roofline); the paper limits only C2PC
    /// (Sec. 7.1.2: the others prefetch below the available bandwidth).
    pub bandwidth_bound_all: bool,
    pub energy: Energies,
}

/// Cycle time at 200 MHz (000 Sec. 7.1.1).
const CYCLE_NS: f64 = 5.0;

impl ArchConfig {
    /// The Hyena architecture (000 Sec. 6, Table 4): 200 MHz, 65 nm, Benes rotation, 2 MB IF,
    /// 4 MB W and 8 MB KSH L2, 64 psum registers, HBM2 at 3.9 pJ/bit.
    pub fn hyena() -> Self {
        Self {
            name: "hyena".into(),
            he: HeParams::paper(),
            // 000 Sec. 7.1.1: 65 nm at 200 MHz.
            clock_mhz: 200.0,
            rotation_unit: RotationUnit::Benes,
            // Sec. 6.4: fully pipelined VMult, 1K elements per cycle; the key-switch product uses
            // the same MAC vector (Sec. 6.3).
            vmult_ns: CYCLE_NS,
            ksh_ns: CYCLE_NS,
            // Sec. 6.3: latch-free Benes stages, O(1) delay; HEPack-Sim charges one 1 ns tick.
            benes_ns: 1.0,
            // F1 units, unused with a Benes network (kept for custom configurations).
            shift_ns: 1.0,
            transpose_ns: 32.0,
            // Sec. 6.3: F1's NTT as 32-point NTTs on vector multipliers: log2(32) = 5 butterfly
            // steps of one cycle each per pass.
            ntt_pass_ns: 5.0 * CYCLE_NS,
            // Table 4: IF L2 2 MB, W L2 4 MB, KSH L2 8 MB; Sec. 6.3: 64 psum register pairs.
            if_l2_bytes: 2 << 20,
            w_l2_bytes: 4 << 20,
            ksh_l2_bytes: 8 << 20,
            psum_registers: 64,
            // One HBM2 stack: 1024-bit interface at 2 Gb/s per pin (JEDEC JESD235A) = 256 GB/s,
            // a 4 KB W polynomial every 16 ns (HEPack-Sim uses 15 ns per polynomial for C2PC).
            hbm_gbps: 256.0,
            bandwidth_bound_all: false,
            energy: Energies::hyena_65nm(),
        }
    }

    /// An F1-like baseline (F1, Samardzic et al. 2021, as 000 compares against it in HEPack-Sim):
    /// the same PE and buffers, with F1's automorphism unit (shift + transpose + shift +
    /// transpose, 32 ns per transpose of a 1K polynomial) in place of the Benes network, which
    /// also serves the NTT's transposes.
    pub fn f1() -> Self {
        Self { name: "f1".into(), rotation_unit: RotationUnit::F1Transpose, energy: Energies { ..Energies::hyena_65nm() }, ..Self::hyena() }
    }

    /// A built-in architecture by name, or one parsed from TOML text.
    pub fn from_name_or_toml(text: &str) -> Result<Self, PlanError> {
        match text.trim().to_lowercase().as_str() {
            "hyena" => Ok(Self::hyena()),
            "f1" => Ok(Self::f1()),
            t if !t.contains('=') => Err(PlanError::UnknownArch { name: text.trim().into() }),
            _ => Self::from_toml(text),
        }
    }

    /// Parses a TOML description (every field; start from `ArchConfig::hyena().to_toml()`).
    pub fn from_toml(text: &str) -> Result<Self, PlanError> {
        let arch: Self = toml::from_str(text).map_err(|e| PlanError::InvalidArch { reason: e.to_string() })?;
        arch.validate()?;
        Ok(arch)
    }

    /// The TOML form of this configuration.
    pub fn to_toml(&self) -> Result<String, PlanError> {
        toml::to_string(self).map_err(|e| PlanError::InvalidArch { reason: e.to_string() })
    }

    /// Checks every latency, size and energy is positive and finite.
    pub fn validate(&self) -> Result<(), PlanError> {
        self.he.validate()?;
        let e = &self.energy;
        let positive = [
            ("clock_mhz", self.clock_mhz),
            ("vmult_ns", self.vmult_ns),
            ("ksh_ns", self.ksh_ns),
            ("benes_ns", self.benes_ns),
            ("shift_ns", self.shift_ns),
            ("transpose_ns", self.transpose_ns),
            ("ntt_pass_ns", self.ntt_pass_ns),
            ("hbm_gbps", self.hbm_gbps),
        ];
        let non_negative = [
            ("vmult_nj", e.vmult_nj),
            ("ntt_pass_nj", e.ntt_pass_nj),
            ("benes_nj", e.benes_nj),
            ("shift_nj", e.shift_nj),
            ("transpose_nj", e.transpose_nj),
            ("if_reg_nj", e.if_reg_nj),
            ("w_reg_nj", e.w_reg_nj),
            ("psum_reg_nj", e.psum_reg_nj),
            ("if_l2_nj_per_kword", e.if_l2_nj_per_kword),
            ("w_l2_nj_per_kword", e.w_l2_nj_per_kword),
            ("ksh_l2_nj_per_kword", e.ksh_l2_nj_per_kword),
            ("hbm_pj_per_bit", e.hbm_pj_per_bit),
        ];
        for (name, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(PlanError::InvalidArch { reason: format!("{name} = {v} must be positive and finite") });
            }
        }
        for (name, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return Err(PlanError::InvalidArch { reason: format!("energy.{name} = {v} must be non-negative and finite") });
            }
        }
        if self.psum_registers == 0 {
            return Err(PlanError::InvalidArch { reason: "psum_registers must be at least 1".into() });
        }
        Ok(())
    }

    /// How many of each structure the buffers hold.
    pub fn capacities(&self) -> Capacities {
        Capacities {
            if_cts: (self.if_l2_bytes / self.he.ct_bytes()).max(1),
            w_polys: (self.w_l2_bytes / self.he.poly_bytes()).max(1),
            keys: (self.ksh_l2_bytes / self.he.ksh_bytes()).max(1),
            psum_registers: self.psum_registers,
        }
    }

    fn rotation_stages(&self) -> Vec<f64> {
        match self.rotation_unit {
            RotationUnit::Benes => vec![self.benes_ns],
            RotationUnit::F1Transpose => vec![self.shift_ns, self.transpose_ns, self.shift_ns, self.transpose_ns],
        }
    }

    fn transpose_stage(&self) -> f64 {
        match self.rotation_unit {
            RotationUnit::Benes => self.benes_ns,
            RotationUnit::F1Transpose => self.transpose_ns,
        }
    }

    /// A domain conversion: pass, transpose, pass (Sec. 6.3).
    fn ntt_stages(&self) -> Vec<f64> {
        vec![self.ntt_pass_ns, self.transpose_stage(), self.ntt_pass_ns]
    }

    /// A permutation in the coefficient domain: INTT, rotate, NTT, key switch (Fig. 5).
    fn permute_stages(&self) -> Vec<f64> {
        let mut v = self.ntt_stages();
        v.extend(self.rotation_stages());
        v.extend(self.ntt_stages());
        v.push(self.ksh_ns);
        v
    }
}

impl Energies {
    /// 65 nm energies from 000 Table 4 (power at 200 MHz times one 5 ns cycle) and HEPack-Sim.
    pub fn hyena_65nm() -> Self {
        // Table 4 powers (W) times the 5 ns cycle give nJ per cycle of full activity.
        let per_cycle = |watts: f64| watts * CYCLE_NS;
        Self {
            // MAC unit rows of Table 4: 0.404 W + 0.494 W for the two VMult vectors.
            vmult_nj: per_cycle(0.404 + 0.494),
            // NTT unit (2 x 32 32-point units with twiddles): 0.968 W, busy 5 cycles per pass.
            ntt_pass_nj: per_cycle(0.968) * 5.0,
            // Rotate (Benes), 2 x 2 networks: 2.062 W, one network per polynomial.
            benes_nj: per_cycle(2.062) / 4.0,
            // F1's shift uses a network like the Benes; its transpose costs 26.58 nJ in
            // HEPack-Sim's energy table (000 Sec. 7.1.2's released simulator).
            shift_nj: per_cycle(2.062) / 4.0,
            transpose_nj: 26.58,
            // Registers: IF 2K words 0.008 W, W 1K words 0.004 W, psum 2K x 64 words 0.552 W
            // (one of the 64 psum ciphertexts per access).
            if_reg_nj: per_cycle(0.008),
            w_reg_nj: per_cycle(0.004),
            psum_reg_nj: per_cycle(0.552) / 64.0,
            // L2: IF 3.801 W, W 2.793 W, KSH 6.066 W, 1024 words per cycle.
            if_l2_nj_per_kword: per_cycle(3.801),
            w_l2_nj_per_kword: per_cycle(2.793),
            ksh_l2_nj_per_kword: per_cycle(6.066),
            // 000 Sec. 7.1.1: HBM2 accesses at 3.9 pJ/bit (O'Connor et al. 2017).
            hbm_pj_per_bit: 3.9,
        }
    }
}

/// Latency (s) or energy (J) per component, the categories of 000 Figs. 7-8.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Components {
    pub vmult: f64,
    pub ntt: f64,
    pub automorphism: f64,
    pub registers: f64,
    pub l2: f64,
    pub memory: f64,
}

impl Components {
    pub fn total(&self) -> f64 {
        self.vmult + self.ntt + self.automorphism + self.registers + self.l2 + self.memory
    }
}

impl std::ops::Add for Components {
    type Output = Components;
    fn add(self, o: Components) -> Components {
        Components {
            vmult: self.vmult + o.vmult,
            ntt: self.ntt + o.ntt,
            automorphism: self.automorphism + o.automorphism,
            registers: self.registers + o.registers,
            l2: self.l2 + o.l2,
            memory: self.memory + o.memory,
        }
    }
}

/// Time and energy of one layer on one architecture.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerCost {
    pub latency_s: f64,
    pub energy_j: f64,
    /// Busy time of each unit (s): how long it works, not when.
    pub busy_s: Components,
    pub energy: Components,
    /// Cycle time of the main pipeline (ns).
    pub cycle_ns: f64,
    /// Whether the layer waits on HBM.
    pub memory_bound: bool,
}

fn max_stage(stages: &[f64]) -> f64 {
    stages.iter().copied().fold(0.0, f64::max)
}

/// Times and charges energy for one layer's counts (000 Secs. 6.4 and 7.1.2).
pub fn cost(counts: &LayerCounts, arch: &ArchConfig) -> LayerCost {
    let he = &arch.he;
    let limbs = he.limbs() as f64;
    let ev = counts.events;
    let (mult, psum, if_seq) = (ev.mult as f64, ev.psum as f64, ev.if_seq as f64);
    let rot = arch.rotation_stages();
    let permute = arch.permute_stages();
    // Products on several limbs take one pass per limb.
    let vmult_ns = arch.vmult_ns * limbs;
    let ksh_ns = arch.ksh_ns * limbs;
    let mut cycle_ns = vmult_ns;
    let compute_ns = match counts.packing {
        Packing::Lola | Packing::AplusW => {
            // Fig. 5: [rotate W (A+W)] VMult, INTT, permute psum, NTT, key switch, chained.
            let mut stages = vec![vmult_ns];
            if counts.packing == Packing::AplusW {
                stages.extend(rot.iter().copied());
            }
            stages.extend(permute.iter().copied());
            cycle_ns = max_stage(&stages);
            mult * cycle_ns
        }
        Packing::Hyena | Packing::HyenaPlus => {
            // Mult pipeline [rotate W, VMult]; psum pipeline [rotate, key switch]; the IF
            // permutations run beside them (Sec. 6.4).
            let mut mult_stages = rot.clone();
            mult_stages.push(vmult_ns);
            let mut psum_stages = rot.clone();
            psum_stages.push(ksh_ns);
            cycle_ns = max_stage(&mult_stages);
            let main = mult * cycle_ns + psum * max_stage(&psum_stages);
            main.max(if_seq * max_stage(&permute))
        }
        Packing::Channel | Packing::Gala => {
            // Sec. 6.4: the loops cannot be fused; the psum rotations run stage after stage, the
            // IF permutations pipelined among themselves.
            mult * vmult_ns + psum * (rot.iter().sum::<f64>() + ksh_ns) + if_seq * max_stage(&permute)
        }
        Packing::C2pc => {
            // Sec. 7.1.2: memory bound, one W polynomial per product at the HBM rate.
            let fetch_ns = he.poly_bytes() as f64 / arch.hbm_gbps;
            cycle_ns = vmult_ns.max(fetch_ns);
            mult * cycle_ns
        }
        Packing::BatchWise | Packing::BatchWisePlus => mult * vmult_ns,
    };
    let memory_ns = counts.offchip.total() as f64 / arch.hbm_gbps;
    let bound = arch.bandwidth_bound_all && memory_ns > compute_ns;
    let latency_ns = if bound { memory_ns } else { compute_ns };

    // Busy time per unit.
    let rot_ns: f64 = rot.iter().sum();
    let ntt_ns = 4.0 * arch.ntt_pass_ns;
    let busy = Components {
        vmult: (counts.mults as f64 * vmult_ns + counts.keyswitches as f64 * ksh_ns) * 1e-9,
        ntt: counts.ntts as f64 * ntt_ns * 1e-9,
        automorphism: ((counts.rotations + counts.plaintext_rotations) as f64 * rot_ns + counts.ntts as f64 * 2.0 * arch.transpose_stage()) * 1e-9,
        registers: 0.0,
        l2: 0.0,
        memory: memory_ns * 1e-9,
    };

    // Energy per event.
    let e = &arch.energy;
    let rot_poly_nj = match arch.rotation_unit {
        RotationUnit::Benes => e.benes_nj,
        RotationUnit::F1Transpose => 2.0 * e.shift_nj + 2.0 * e.transpose_nj,
    };
    let transpose_nj = match arch.rotation_unit {
        RotationUnit::Benes => e.benes_nj,
        RotationUnit::F1Transpose => e.transpose_nj,
    };
    let kword = |bytes: u64| bytes as f64 / 4096.0;
    let (mults, ks, ntts) = (counts.mults as f64, counts.keyswitches as f64, counts.ntts as f64);
    let energy_nj = Components {
        // Products and key-switch products on the MAC vectors, one pass per limb.
        vmult: (mults + ks) * e.vmult_nj * limbs,
        // A round trip is four passes (INTT, NTT; each pass, transpose, pass) on both polynomials.
        ntt: ntts * 4.0 * e.ntt_pass_nj * limbs,
        // Ciphertext rotations move two polynomials, plaintext (W) rotations one; a round trip's
        // two transposes per polynomial use the same network.
        automorphism: (counts.rotations as f64 * 2.0 + counts.plaintext_rotations as f64) * rot_poly_nj * limbs + ntts * 4.0 * transpose_nj * limbs,
        // IF and W register reads per product; KSH and psum read and write per key switch.
        registers: (mults * (e.if_reg_nj + e.w_reg_nj) + ks * (e.if_reg_nj + 2.0 * e.psum_reg_nj)) * limbs,
        // L2: reads by the dataflow, and writes of what arrives from memory.
        l2: kword(counts.l2_reads.input + counts.offchip.input) * e.if_l2_nj_per_kword
            + kword(counts.l2_reads.weights + counts.offchip.weights) * e.w_l2_nj_per_kword
            + kword(counts.l2_reads.keys + counts.offchip.keys) * e.ksh_l2_nj_per_kword,
        memory: counts.offchip.total() as f64 * 8.0 * e.hbm_pj_per_bit * 1e-3,
    };
    let energy = Components {
        vmult: energy_nj.vmult * 1e-9,
        ntt: energy_nj.ntt * 1e-9,
        automorphism: energy_nj.automorphism * 1e-9,
        registers: energy_nj.registers * 1e-9,
        l2: energy_nj.l2 * 1e-9,
        memory: energy_nj.memory * 1e-9,
    };
    LayerCost { latency_s: latency_ns * 1e-9, energy_j: energy.total(), busy_s: busy, energy, cycle_ns, memory_bound: bound || counts.packing == Packing::C2pc }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::models::LayerSpec;
    use crate::simulate::packing::{count_layer, CountingOptions};

    #[test]
    fn presets_round_trip_through_toml() {
        for arch in [ArchConfig::hyena(), ArchConfig::f1()] {
            let text = arch.to_toml().unwrap();
            assert_eq!(ArchConfig::from_name_or_toml(&text).unwrap(), arch);
        }
        assert!(matches!(ArchConfig::from_name_or_toml("tpu"), Err(PlanError::UnknownArch { .. })));
        assert!(matches!(ArchConfig::from_name_or_toml("clock_mhz = [1"), Err(PlanError::InvalidArch { .. })));
        let mut bad = ArchConfig::hyena();
        bad.vmult_ns = 0.0;
        assert!(ArchConfig::from_toml(&bad.to_toml().unwrap()).is_err());
        // Table 4 buffers: 2 MB / 8 KB = 256 IF ciphertexts, 4 MB / 4 KB = 1024 W, 8 MB / 8 KB =
        // 1024 keys (one per rotation of n = 1024, Sec. 2.4).
        let c = ArchConfig::hyena().capacities();
        assert_eq!((c.if_cts, c.w_polys, c.keys, c.psum_registers), (256, 1024, 1024, 64));
    }

    #[test]
    fn pipelines_take_their_slowest_stage() {
        let arch = ArchConfig::hyena();
        let opts = CountingOptions::default();
        let l = LayerSpec::conv("l", 8, 4, 8, 3, 1, 0);
        let c = count_layer(&l, Packing::Hyena, &arch.he, &arch.capacities(), 1, &opts).unwrap();
        let t = cost(&c, &arch);
        // Hyena on the Benes PE: one product or one psum rotation per 5 ns cycle.
        assert_eq!(t.cycle_ns, 5.0);
        assert!((t.latency_s - (c.events.mult + c.events.psum) as f64 * 5e-9).abs() < 1e-15);
        // A+W chains an NTT pass (25 ns) into each product.
        let c = count_layer(&l, Packing::AplusW, &arch.he, &arch.capacities(), 1, &opts).unwrap();
        assert_eq!(cost(&c, &arch).cycle_ns, 25.0);
        // On the F1-like PE the 32 ns transpose sets A+W's cycle.
        let f1 = ArchConfig::f1();
        assert_eq!(cost(&c, &f1).cycle_ns, 32.0);
        // C2PC waits for a 4 KB W polynomial at 256 GB/s: 16 ns per product.
        let c = count_layer(&l, Packing::C2pc, &arch.he, &arch.capacities(), 1, &opts).unwrap();
        assert_eq!(cost(&c, &arch).cycle_ns, 16.0);
        // Memory energy: bytes x 8 x 3.9 pJ.
        let e = cost(&c, &arch).energy.memory;
        assert!((e - c.offchip.total() as f64 * 8.0 * 3.9e-12).abs() < 1e-15);
    }
}
