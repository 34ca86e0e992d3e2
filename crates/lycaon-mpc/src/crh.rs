//! Correlation-robust hash functions H: {0,1}^128 -> {0,1}^128 from one fixed-key AES-128
//! permutation π, batched: the hashes that turn correlated OT (`q`, `q ^ delta`) into OT with
//! independent-looking keys.
//!
//! Constructions of Guo, Katz, Wang and Yu, "Efficient and Secure Multiparty Computation from
//! Fixed-Key Block Ciphers" (IEEE S&P 2020, GKWY20), in the random-permutation model:
//!
//! * `cr(x)   = π(x) ⊕ x` (Matyas–Meyer–Oseas), correlation robust;
//! * `ccr(x)  = π(σ(x)) ⊕ σ(x)` with the linear orthomorphism σ(x_L ‖ x_R) = (x_L ⊕ x_R) ‖ x_L,
//!   circular correlation robust;
//! * `tccr(x, i) = π(π(x) ⊕ i) ⊕ π(x)`, tweakable circular correlation robust: the hash used to
//!   derandomise OT, with the tweak `i` unique per OT instance (and per output index for 1-of-N).
//!
//! The AES key is public and fixed (derived from a domain string with BLAKE3); its security rests
//! on AES behaving as a random permutation under that key, as in GKWY20, emp-toolkit and libOTe.

use rayon::prelude::*;

use crate::cot::Block;
use crate::kernels::FixedKeyAes;

/// Blocks handed to AES at once (lets AES-NI pipeline eight blocks at a time).
const AES_BATCH: usize = 64;
/// Below this many blocks a batch is hashed on the calling thread.
const PARALLEL_THRESHOLD: usize = 1 << 13;
/// Blocks per rayon task.
const PARALLEL_CHUNK: usize = 1 << 12;

/// The domain string the fixed public AES key is derived from.
const FIXED_KEY_CONTEXT: &str = "lycaon-mpc 2025 fixed-key AES-128 permutation for correlation-robust hashing";

/// A public AES key derived from a domain-separation label and public context bytes (BLAKE3).
pub(crate) fn derive_key(label: &str, context: &[u8]) -> [u8; 16] {
    let mut hasher = blake3::Hasher::new_derive_key(label);
    hasher.update(context);
    let mut key = [0u8; 16];
    key.copy_from_slice(&hasher.finalize().as_bytes()[..16]);
    key
}

/// σ(x_L ‖ x_R) = (x_L ⊕ x_R) ‖ x_L, x_L the high 64 bits.
#[inline]
fn sigma(x: Block) -> Block {
    let hi = x >> 64;
    let lo = x & u128::from(u64::MAX);
    ((hi ^ lo) << 64) | hi
}

/// Runs `work(offset, chunk)` over `blocks`, in parallel when the batch is large.
fn for_chunks(blocks: &mut [Block], work: impl Fn(usize, &mut [Block]) + Sync) {
    use lycaon_math::profile::{time, Kernel};
    if blocks.len() < PARALLEL_THRESHOLD {
        let _t = time(Kernel::OtHash);
        work(0, blocks);
    } else {
        blocks.par_chunks_mut(PARALLEL_CHUNK).enumerate().for_each(|(k, chunk)| {
            let _t = time(Kernel::OtHash);
            work(k * PARALLEL_CHUNK, chunk)
        });
    }
}

/// Fixed-key AES hashes (see the module documentation). Cheap to clone; safe to share.
#[derive(Clone)]
pub struct Hasher {
    aes: FixedKeyAes,
}

impl std::fmt::Debug for Hasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hasher(fixed-key AES-128)")
    }
}

impl Default for Hasher {
    fn default() -> Self {
        Self::new()
    }
}

impl Hasher {
    /// The hasher under the crate's fixed public key (both parties must use the same key).
    pub fn new() -> Self {
        Self::with_key(derive_key(FIXED_KEY_CONTEXT, &[]))
    }

    /// A hasher under another public key (domain separation between applications).
    pub fn with_key(key: [u8; 16]) -> Self {
        Hasher { aes: FixedKeyAes::new(u128::from_le_bytes(key)) }
    }

    /// The fixed-key permutation π.
    pub fn permute(&self, x: Block) -> Block {
        let mut b = [x];
        self.aes.encrypt_in_place(&mut b);
        b[0]
    }

    /// `π(x) ⊕ x`.
    pub fn cr(&self, x: Block) -> Block {
        self.permute(x) ^ x
    }

    /// `π(σ(x)) ⊕ σ(x)`.
    pub fn ccr(&self, x: Block) -> Block {
        let s = sigma(x);
        self.permute(s) ^ s
    }

    /// `π(π(x) ⊕ tweak) ⊕ π(x)`.
    pub fn tccr(&self, x: Block, tweak: Block) -> Block {
        let p = self.permute(x);
        self.permute(p ^ tweak) ^ p
    }

    /// `x ↦ π(x) ⊕ x` on every block of a chunk, on the calling thread.
    fn xor_permuted(&self, chunk: &mut [Block]) {
        let mut buf = [0u128; AES_BATCH];
        for c in chunk.chunks_mut(AES_BATCH) {
            let buf = &mut buf[..c.len()];
            buf.copy_from_slice(c);
            self.aes.encrypt_in_place(buf);
            c.iter_mut().zip(buf.iter()).for_each(|(x, p)| *x ^= p);
        }
    }

    /// `cr` on every block, in place.
    pub fn cr_many(&self, blocks: &mut [Block]) {
        for_chunks(blocks, |_, chunk| self.xor_permuted(chunk));
    }

    /// `ccr` on every block, in place.
    pub fn ccr_many(&self, blocks: &mut [Block]) {
        for_chunks(blocks, |_, chunk| {
            chunk.iter_mut().for_each(|x| *x = sigma(*x));
            self.xor_permuted(chunk);
        });
    }

    /// `tccr(blocks[i], tweak(i))` for every `i`, in place.
    pub fn tccr_many(&self, blocks: &mut [Block], tweak: impl Fn(usize) -> Block + Sync) {
        for_chunks(blocks, |offset, chunk| {
            let mut buf = [0u128; AES_BATCH];
            for (k, c) in chunk.chunks_mut(AES_BATCH).enumerate() {
                let base = offset + k * AES_BATCH;
                self.aes.encrypt_in_place(c); // c = π(x)
                let buf = &mut buf[..c.len()];
                for (i, (b, p)) in buf.iter_mut().zip(c.iter()).enumerate() {
                    *b = p ^ tweak(base + i);
                }
                self.aes.encrypt_in_place(buf);
                c.iter_mut().zip(buf.iter()).for_each(|(x, h)| *x ^= h);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aes_matches_fips197_vector() {
        // FIPS-197 appendix C.1: key 000102..0f, plaintext 00112233..ff.
        let key: [u8; 16] = core::array::from_fn(|i| i as u8);
        let pt: [u8; 16] = core::array::from_fn(|i| (i as u8) * 0x11);
        let h = Hasher::with_key(key);
        let ct = h.permute(u128::from_le_bytes(pt)).to_le_bytes();
        assert_eq!(ct, [0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a]);
    }

    #[test]
    fn batched_hashes_equal_single_hashes() {
        let h = Hasher::new();
        for n in [0usize, 1, 63, 64, 65, 1000, PARALLEL_THRESHOLD + 77] {
            let xs: Vec<Block> = (0..n as u128).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) ^ 0xdead_beef).collect();
            let mut a = xs.clone();
            h.cr_many(&mut a);
            let mut b = xs.clone();
            h.ccr_many(&mut b);
            let mut c = xs.clone();
            h.tccr_many(&mut c, |i| (i as u128) << 64 | 5);
            for i in 0..n {
                assert_eq!(a[i], h.cr(xs[i]));
                assert_eq!(b[i], h.ccr(xs[i]));
                assert_eq!(c[i], h.tccr(xs[i], (i as u128) << 64 | 5));
            }
        }
    }

    #[test]
    fn sigma_is_an_orthomorphism_on_samples() {
        // σ(x_L ‖ x_R) = (x_L ⊕ x_R) ‖ x_L and σ(x) ⊕ x = x_R ‖ (x_L ⊕ x_R) are both bijective.
        for x in [0u128, 1, u128::MAX, 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210] {
            let (hi, lo) = (x >> 64, x & u128::from(u64::MAX));
            assert_eq!(sigma(x), ((hi ^ lo) << 64) | hi);
            assert_eq!(sigma(x) ^ x, (lo << 64) | (hi ^ lo));
        }
        let h = Hasher::new();
        assert_ne!(h.tccr(7, 1), h.tccr(7, 2));
        assert_ne!(h.cr(7), h.ccr(7));
    }
}
