//! Fixed-key AES-128 for Ferret: the length-doubling PRG of the GGM trees, a correlation-robust
//! hash for the tree corrections, and the counter-mode stream that draws the public code.
//!
//! Every key here is public (derived from a label, or from the code seed both parties know);
//! security rests on AES behaving as a random permutation under a known key, as in Guo, Katz,
//! Wang and Yu, "Efficient and Secure Multiparty Computation from Fixed-Key Block Ciphers" (S&P
//! 2020), which emp-ot's Ferret also relies on.

use crate::cot::Block;
use crate::crh::{self, Hasher};
pub(crate) use crate::kernels::FixedKeyAes;

/// Parents expanded per AES call: a multiple of the kernels' 16 blocks in flight.
const BATCH: usize = 64;

impl FixedKeyAes {
    /// A key derived from a domain-separation label and some public context bytes.
    pub(crate) fn from_label(label: &str, context: &[u8]) -> Self {
        Self::new(u128::from_le_bytes(crh::derive_key(label, context)))
    }
}

/// The GGM trees' length-doubling PRG: `G(s) = (AES_k0(s) ^ s, AES_k1(s) ^ s)`, two fixed keys
/// (emp-ot's TwoKeyPRP, Davies-Meyer on each half).
#[derive(Clone)]
pub(crate) struct GgmPrg {
    left: FixedKeyAes,
    right: FixedKeyAes,
}

impl GgmPrg {
    pub(crate) fn new() -> Self {
        GgmPrg {
            left: FixedKeyAes::from_label("lycaon-mpc ferret ggm prg left child", &[]),
            right: FixedKeyAes::from_label("lycaon-mpc ferret ggm prg right child", &[]),
        }
    }

    /// Expands the first `parents` nodes of `nodes` (one tree level) into the `2 * parents` nodes
    /// of the next level in place: node `j` becomes children `2j` (left) and `2j + 1` (right).
    /// Returns the XOR of the left children and the XOR of the right children.
    pub(crate) fn expand_level(&self, nodes: &mut [Block], parents: usize) -> (Block, Block) {
        debug_assert!(nodes.len() >= 2 * parents);
        let mut seeds = [0u128; BATCH];
        let mut left = [0u128; BATCH];
        let mut right = [0u128; BATCH];
        let (mut sum_left, mut sum_right) = (0u128, 0u128);
        // From the last parent down: the children of parents [start, end) land in
        // [2 start, 2 end), which holds only parents already read.
        let mut end = parents;
        while end > 0 {
            let start = end.saturating_sub(BATCH);
            let m = end - start;
            seeds[..m].copy_from_slice(&nodes[start..end]);
            left[..m].copy_from_slice(&seeds[..m]);
            right[..m].copy_from_slice(&seeds[..m]);
            self.left.encrypt_in_place(&mut left[..m]);
            self.right.encrypt_in_place(&mut right[..m]);
            for i in 0..m {
                let l = left[i] ^ seeds[i];
                let r = right[i] ^ seeds[i];
                nodes[2 * (start + i)] = l;
                nodes[2 * (start + i) + 1] = r;
                sum_left ^= l;
                sum_right ^= r;
            }
            end = start;
        }
        (sum_left, sum_right)
    }
}

/// The correlation-robust hash of the tree corrections: `crh::Hasher::ccr`,
/// `H(x) = AES_k(sigma(x)) ^ sigma(x)` (Guo et al., S&P 2020), under Ferret's own public key, so
/// `H(q)` and `H(q ^ delta)` look independent and random to anyone who does not know `delta`.
pub(crate) fn correlation_robust_hash() -> Hasher {
    Hasher::with_key(crh::derive_key("lycaon-mpc ferret correlation-robust hash", &[]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aes_matches_fips197_vector() {
        // FIPS-197 appendix C.1: key 000102..0f, plaintext 00112233..ff.
        let key = u128::from_le_bytes(core::array::from_fn(|i| i as u8));
        let pt = u128::from_le_bytes(core::array::from_fn(|i| (i as u8) * 0x11));
        let mut b = [pt];
        FixedKeyAes::new(key).encrypt_in_place(&mut b);
        let expected = [0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a];
        assert_eq!(b[0].to_le_bytes(), expected);
    }

    #[test]
    fn in_place_level_expansion_matches_node_by_node() {
        let prg = GgmPrg::new();
        for parents in [1usize, 3, 32, 33, 100] {
            let start: Vec<Block> = (0..parents as u128).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)).collect();
            let mut nodes = vec![0u128; 2 * parents];
            nodes[..parents].copy_from_slice(&start);
            let (sl, sr) = prg.expand_level(&mut nodes, parents);
            let (mut el, mut er) = (0, 0);
            for (j, &s) in start.iter().enumerate() {
                let mut l = [s];
                let mut r = [s];
                prg.left.encrypt_in_place(&mut l);
                prg.right.encrypt_in_place(&mut r);
                assert_eq!(nodes[2 * j], l[0] ^ s);
                assert_eq!(nodes[2 * j + 1], r[0] ^ s);
                el ^= l[0] ^ s;
                er ^= r[0] ^ s;
            }
            assert_eq!((sl, sr), (el, er));
        }
    }
}

#[cfg(test)]
mod timing {
    use super::*;

    #[test]
    #[ignore]
    fn time_tree() {
        let prg = GgmPrg::new();
        let mut tree = vec![0u128; 1 << 13];
        let t = std::time::Instant::now();
        for s in 0..1295u128 {
            tree[0] = s;
            for level in 0..13 {
                prg.expand_level(&mut tree, 1 << level);
            }
        }
        let e = t.elapsed().as_secs_f64();
        println!("1295 trees: {:.3} s, {:.2} ns per AES", e, e * 1e9 / (1295.0 * 16382.0));
        let f = FixedKeyAes::from_label("x", &[]);
        let mut blocks = vec![0u128; 1 << 20];
        let t = std::time::Instant::now();
        for _ in 0..10 { f.encrypt_in_place(&mut blocks); }
        println!("encrypt_in_place: {:.2} ns per block", t.elapsed().as_secs_f64() * 1e9 / (10.0 * (1 << 20) as f64));
    }
}
