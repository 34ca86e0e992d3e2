//! Fixed-key AES-128 for Ferret: the half-tree's level expansion (a circular correlation-robust
//! hash) and the counter-mode stream that draws the public code.
//!
//! Every key here is public (derived from a label, or from the code seed both parties know);
//! security rests on AES behaving as a random permutation under a known key, as in Guo, Katz,
//! Wang and Yu, "Efficient and Secure Multiparty Computation from Fixed-Key Block Ciphers" (S&P
//! 2020), which emp-ot's Ferret also relies on.

use crate::cot::Block;
use crate::crh::{self, Hasher};
pub(crate) use crate::kernels::FixedKeyAes;

impl FixedKeyAes {
    /// A key derived from a domain-separation label and some public context bytes.
    pub(crate) fn from_label(label: &str, context: &[u8]) -> Self {
        Self::new(u128::from_le_bytes(crh::derive_key(label, context)))
    }
}

/// The half-tree's level expansion (Guo, Yang, Wang, Zhang, Xie, Liu and Zhao, "Half-Tree:
/// Halving the Cost of Tree Expansion in COT and DPF", Eurocrypt 2023): a node x has children
/// H(x) and x ^ H(x) with H the circular correlation-robust hash of GKWY20
/// (`crh::Hasher::ccr`), so every level's nodes XOR to the root pair's XOR (delta) and the
/// right side's sum follows from the left's: one AES call per node.
pub(crate) struct HalfTreeHash {
    hash: Hasher,
}

impl HalfTreeHash {
    pub(crate) fn new() -> Self {
        HalfTreeHash { hash: Hasher::with_key(crh::derive_key("lycaon-mpc ferret half-tree hash", &[])) }
    }

    /// Expands the first `len` nodes of `nodes` (one level) into the `2 * len` of the next in
    /// place: node `j` becomes children `j` (left, H(x)) and `j + len` (right, x ^ H(x)).
    /// Returns the XOR of the left children.
    pub(crate) fn expand_level(&self, nodes: &mut [Block], len: usize) -> Block {
        debug_assert!(nodes.len() >= 2 * len);
        let (left, right) = nodes[..2 * len].split_at_mut(len);
        right.copy_from_slice(left);
        self.hash.ccr_many(left);
        let mut sum = 0;
        for (l, r) in left.iter().zip(right.iter_mut()) {
            *r ^= l;
            sum ^= l;
        }
        sum
    }
}

/// The length-doubling PRG of a plain GGM tree, G(x) = (π0(x) ^ x, π1(x) ^ x) with two
/// fixed-key permutations (as emp-ot's GGM trees): unlike the half-tree's children, a level's
/// nodes are independent of any correlation, which the vector OT's trees need (their punctured
/// leaf must not be tied to a global offset).
pub(crate) struct GgmPrg {
    left: FixedKeyAes,
    right: FixedKeyAes,
}

impl GgmPrg {
    pub(crate) fn new() -> Self {
        GgmPrg { left: FixedKeyAes::from_label("lycaon-mpc vole ggm left", &[]), right: FixedKeyAes::from_label("lycaon-mpc vole ggm right", &[]) }
    }

    /// Expands the first `len` nodes of `nodes` (one level) into the `2 * len` of the next in
    /// place: node `j` becomes children `j` (left) and `j + len` (right). `scratch` holds at
    /// least `len` blocks. Returns the XORs of the left and of the right children.
    pub(crate) fn expand_level(&self, nodes: &mut [Block], len: usize, scratch: &mut [Block]) -> (Block, Block) {
        debug_assert!(nodes.len() >= 2 * len && scratch.len() >= len);
        let (left, right) = nodes[..2 * len].split_at_mut(len);
        let parents = &mut scratch[..len];
        parents.copy_from_slice(left);
        right.copy_from_slice(left);
        self.left.encrypt_in_place(left);
        self.right.encrypt_in_place(right);
        let (mut sum_left, mut sum_right) = (0, 0);
        for ((l, r), p) in left.iter_mut().zip(right.iter_mut()).zip(parents.iter()) {
            *l ^= p;
            *r ^= p;
            sum_left ^= *l;
            sum_right ^= *r;
        }
        (sum_left, sum_right)
    }

    /// The children of one node (tests).
    #[cfg(test)]
    pub(crate) fn children(&self, x: Block) -> (Block, Block) {
        let (mut l, mut r) = ([x], [x]);
        self.left.encrypt_in_place(&mut l);
        self.right.encrypt_in_place(&mut r);
        (l[0] ^ x, r[0] ^ x)
    }
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
    fn level_expansion_matches_node_by_node() {
        let tree = HalfTreeHash::new();
        for len in [1usize, 3, 32, 33, 100] {
            let start: Vec<Block> = (0..len as u128).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)).collect();
            let mut nodes = vec![0u128; 2 * len];
            nodes[..len].copy_from_slice(&start);
            let sum = tree.expand_level(&mut nodes, len);
            let mut expected = 0;
            for (j, &x) in start.iter().enumerate() {
                let h = tree.hash.ccr(x);
                assert_eq!((nodes[j], nodes[j + len]), (h, x ^ h));
                expected ^= h;
            }
            assert_eq!(sum, expected);
            // Children XOR to their parent, so a level's sum is the level above's.
            let level: Block = nodes.iter().fold(0, |a, &b| a ^ b);
            assert_eq!(level, start.iter().fold(0, |a, &b| a ^ b));
        }
    }
}

#[cfg(test)]
mod timing {
    use super::*;

    #[test]
    #[ignore]
    fn time_tree() {
        let half_tree = HalfTreeHash::new();
        let mut tree = vec![0u128; 1 << 13];
        let t = std::time::Instant::now();
        for s in 0..1295u128 {
            tree[0] = s;
            tree[1] = s ^ 1;
            for level in 1..13 {
                half_tree.expand_level(&mut tree, 1 << level);
            }
        }
        let e = t.elapsed().as_secs_f64();
        println!("1295 trees: {:.3} s, {:.2} ns per hash", e, e * 1e9 / (1295.0 * 8190.0));
        let f = FixedKeyAes::from_label("x", &[]);
        let mut blocks = vec![0u128; 1 << 20];
        let t = std::time::Instant::now();
        for _ in 0..10 {
            f.encrypt_in_place(&mut blocks);
        }
        println!("encrypt_in_place: {:.2} ns per block", t.elapsed().as_secs_f64() * 1e9 / (10.0 * (1 << 20) as f64));
    }
}
