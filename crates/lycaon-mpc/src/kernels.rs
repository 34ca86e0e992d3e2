//! The crate's only `unsafe` code: x86-64 kernels for the hot loops of silent OT, each chosen at
//! run time by CPU feature detection and each with a portable path it is tested against.
//!
//! * Fixed-key AES-128 on `u128` blocks with AES-NI, eight blocks in flight (VAES, two blocks per
//!   instruction, where present): the half-trees' hash and the LPN code's counter stream spend
//!   most of their time here. The portable path is the `aes` crate.
//! * The LPN code's gather (`gather_xor`): each row XORs ten random blocks of a table larger than
//!   the core's caches; the next rows' blocks are prefetched while the current row is summed,
//!   and the loads are unchecked after one bounds check of the batch's positions.
//! * `resize_huge`: a consumer's COT buffer (hundreds of megabytes) grown on 2 MiB pages
//!   (`madvise`) from zeroed memory, not a page fault and a clearing pass per 4 KiB page and a
//!   fill pass: `ferret_bench` 2^24, wall ratio 0.89-0.90 against `Vec::resize` (system time
//!   0.59 -> 0.35 s; `farm-bench -n 10`, two runs, 2026-11-29).
//! * The LPN code's positions (`map_positions`): each row's counter-stream words mapped into
//!   [0, k) by a 32 x 32-bit product, eight words per AVX2 instruction pair instead of one
//!   multiply each (positions of 10.6 million rows: about 0.1 s to 0.054 s on the development
//!   machine, `cargo test --release -p lycaon-mpc --lib time_main_encode -- --ignored`).
//!
//! Measured on the 2-core development machine (ferret_bench, implementation_notes/two-party.md):
//! the intrinsic AES is several times faster than the crate's autodetected backend on these
//! short batches, and prefetching takes the LPN gather from 78 to about 50 ns per row.

#![allow(unsafe_code)]

use aes::cipher::{generic_array::GenericArray, BlockEncrypt, KeyInit};
use aes::Aes128;

use crate::cot::Block;

/// Which implementation [`FixedKeyAes`] runs, decided once per key from the CPU's features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AesPath {
    /// AES-NI with 128-bit registers.
    AesNi,
    /// VAES with 256-bit registers (two blocks per instruction), and AES-NI for the tail.
    Vaes,
    /// The `aes` crate.
    Portable,
}

impl AesPath {
    /// The fastest path this CPU has.
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("sse2") {
                if std::arch::is_x86_feature_detected!("vaes") && std::arch::is_x86_feature_detected!("avx2") {
                    return AesPath::Vaes;
                }
                return AesPath::AesNi;
            }
        }
        AesPath::Portable
    }
}

/// AES-128 under one public key, on `u128` blocks (little-endian byte order, as the `aes` crate's
/// `GenericArray` of `to_le_bytes`).
#[derive(Clone)]
pub(crate) struct FixedKeyAes {
    path: AesPath,
    /// The eleven round keys, each as little-endian bytes (AES-NI's register layout).
    round_keys: [Block; 11],
    portable: Aes128,
}

impl FixedKeyAes {
    pub(crate) fn new(key: Block) -> Self {
        Self::with_path(key, AesPath::detect())
    }

    /// A key on a chosen path (tests compare the paths; `Portable` always works).
    pub(crate) fn with_path(key: Block, path: AesPath) -> Self {
        let portable = Aes128::new(&GenericArray::from(key.to_le_bytes()));
        FixedKeyAes { path, round_keys: expand_key(key), portable }
    }

    #[cfg(test)]
    pub(crate) fn path(&self) -> AesPath {
        self.path
    }

    /// Replaces every block `x` with `AES_k(x)`.
    pub(crate) fn encrypt_in_place(&self, blocks: &mut [Block]) {
        match self.path {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `detect` (or a test that checked the same features) chose this path only
            // where the CPU has AES-NI and SSE2.
            AesPath::AesNi => unsafe { x86::encrypt_aesni(&self.round_keys, blocks) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: chosen only where the CPU has VAES, AVX2 and AES-NI.
            AesPath::Vaes => unsafe { x86::encrypt_vaes(&self.round_keys, blocks) },
            _ => encrypt_portable(&self.portable, blocks),
        }
    }
}

/// The `aes` crate, converting in batches of 32 blocks (also IKNP's seed PRGs, whose keys are
/// secret and stay in the crate's zeroized key schedule).
pub(crate) fn encrypt_portable(cipher: &Aes128, blocks: &mut [Block]) {
    let mut buf = [GenericArray::default(); 32];
    for chunk in blocks.chunks_mut(32) {
        let buf = &mut buf[..chunk.len()];
        for (b, x) in buf.iter_mut().zip(chunk.iter()) {
            *b = GenericArray::from(x.to_le_bytes());
        }
        cipher.encrypt_blocks(buf);
        for (x, b) in chunk.iter_mut().zip(buf.iter()) {
            *x = u128::from_le_bytes((*b).into());
        }
    }
}

/// The AES-128 key schedule (FIPS-197, 5.2) in portable code: round keys as little-endian
/// `u128`s, the layout AES-NI loads.
fn expand_key(key: Block) -> [Block; 11] {
    const RCON: [u8; 10] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36];
    let mut w = [[0u8; 4]; 44];
    for (i, word) in key.to_le_bytes().chunks_exact(4).enumerate() {
        w[i].copy_from_slice(word);
    }
    for i in 4..44 {
        let mut t = w[i - 1];
        if i % 4 == 0 {
            t = [SBOX[t[1] as usize] ^ RCON[i / 4 - 1], SBOX[t[2] as usize], SBOX[t[3] as usize], SBOX[t[0] as usize]];
        }
        w[i] = core::array::from_fn(|j| w[i - 4][j] ^ t[j]);
    }
    core::array::from_fn(|r| {
        let mut bytes = [0u8; 16];
        for j in 0..4 {
            bytes[4 * j..4 * j + 4].copy_from_slice(&w[4 * r + j]);
        }
        u128::from_le_bytes(bytes)
    })
}

/// Hints that the cache line holding `table[index]` will be read soon. A hint only: no effect
/// on results, and nothing on targets without one.
#[inline(always)]
pub(crate) fn prefetch<T>(table: &[T], index: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(item) = table.get(index) {
        // SAFETY: `_mm_prefetch` only hints the cache and never faults; SSE is part of the
        // x86-64 baseline; the pointer is to a live element of `table`.
        unsafe { core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>((item as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (table, index);
}

/// Rows ahead whose table entries [`gather_xor`] requests before summing the current row.
const PREFETCH_ROWS: usize = 8;

/// `out[r] ^= XOR_{j in positions[r]} table[j]` for every row r (`out[r] =` unless `ADD`): the
/// LPN code's sparse product. Positions come from the public code and are always inside the
/// table; each is clamped to the last entry all the same (one `min` a load, where a scan of
/// every position before the loop cost about 3% of a ReLU's CPU), so no load can leave the table.
pub(crate) fn gather_xor<const ADD: bool, const W: usize>(table: &[Block], positions: &[[u32; W]], out: &mut [Block]) {
    assert!(out.len() <= positions.len(), "{} rows of output for {} rows of positions", out.len(), positions.len());
    if out.is_empty() {
        return;
    }
    assert!(!table.is_empty(), "an LPN encoding from an empty table");
    debug_assert!(positions.iter().flatten().all(|&j| (j as usize) < table.len()), "an LPN position outside a table of {}", table.len());
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `table` is not empty and the kernel clamps every position into it; `out` is no
    // longer than `positions`; SSE2 is part of the x86-64 baseline.
    unsafe {
        x86::gather_xor::<ADD, W>(table, positions, out)
    }
    #[cfg(not(target_arch = "x86_64"))]
    gather_xor_portable::<ADD, W>(table, positions, out)
}

/// [`gather_xor`] in bounds-checked code with the same prefetching (tests compare the two).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub(crate) fn gather_xor_portable<const ADD: bool, const W: usize>(table: &[Block], positions: &[[u32; W]], out: &mut [Block]) {
    for (r, (o, p)) in out.iter_mut().zip(positions).enumerate() {
        if let Some(next) = positions.get(r + PREFETCH_ROWS) {
            for &j in next {
                prefetch(table, j as usize);
            }
        }
        let acc = p.iter().fold(0u128, |acc, &j| acc ^ table[(j as usize).min(table.len() - 1)]);
        *o = if ADD { *o ^ acc } else { acc };
    }
}

/// Grows `v` to `len` elements of `value`, asking the kernel (Linux) to back a new allocation
/// with 2 MiB pages before its first touch: a consumer's COT buffer of hundreds of megabytes
/// otherwise costs a page fault and a clearing pass per 4 KiB page. A zero `value` of a
/// primitive type comes from the allocator already zeroed (`calloc`), so the growth is not
/// written twice.
pub(crate) fn resize_huge<T: Clone>(v: &mut Vec<T>, len: usize, value: T) {
    if len <= v.capacity() {
        v.resize(len, value);
        return;
    }
    let mut grown = vec![value; len];
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 1 << 21;
        let start = grown.as_ptr() as usize;
        let end = start + len * size_of::<T>();
        let (from, to) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if to > from {
            // SAFETY: [from, to) lies inside `grown`'s allocation; MADV_HUGEPAGE only changes
            // how the kernel backs those pages, never their contents or validity. A refusal
            // (THP off, an old kernel) leaves 4 KiB pages: ignored.
            let _ = unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE) };
        }
    }
    grown[..v.len()].clone_from_slice(v);
    *v = grown;
}

/// A copy of `src` on 2 MiB pages (as [`resize_huge`]): for a generator's reserve, the LPN
/// code's table of about 10 MB that every row reads ten random blocks of. On 4 KiB pages those
/// reads miss the TLB as well as the core's caches.
pub(crate) fn huge_copy<T: Copy + Default>(src: &[T]) -> Vec<T> {
    let mut v = Vec::new();
    resize_huge(&mut v, src.len(), T::default());
    v.copy_from_slice(src);
    v
}

/// The LPN code's positions from its counter stream: row r's `W` positions are the first `W` of
/// the 32-bit words of `blocks[3r .. 3r + 3]` (little-endian), each mapped into [0, k) by
/// `(w * k) >> 32`. `blocks` holds exactly three blocks per row of `out`.
pub(crate) fn map_positions<const W: usize>(blocks: &[Block], k: u32, out: &mut [[u32; W]]) {
    assert!(W <= 12 && blocks.len() == 3 * out.len(), "{} blocks for {} rows of {W} positions", blocks.len(), out.len());
    #[cfg(target_arch = "x86_64")]
    if W >= 8 && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was just detected; the block and row counts were checked above.
        unsafe { x86::map_positions_avx2::<W>(blocks, k, out) };
        return;
    }
    map_positions_portable::<W>(blocks, k, out)
}

/// [`map_positions`] in portable code (tests compare the two).
pub(crate) fn map_positions_portable<const W: usize>(blocks: &[Block], k: u32, out: &mut [[u32; W]]) {
    for (p, row) in out.iter_mut().zip(blocks.chunks_exact(3)) {
        *p = core::array::from_fn(|w| (((row[w / 4] >> (32 * (w % 4))) as u32 as u64 * k as u64) >> 32) as u32);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    use crate::cot::Block;

    /// Blocks in flight per loop iteration: AES-NI's latency over its throughput.
    const LANES: usize = 8;

    #[inline(always)]
    unsafe fn load_keys(round_keys: &[Block; 11]) -> [__m128i; 11] {
        // SAFETY (for callers): `loadu` reads 16 bytes from a valid `u128`, any alignment.
        core::array::from_fn(|r| unsafe { _mm_loadu_si128(round_keys[r..].as_ptr().cast()) })
    }

    /// SAFETY: the CPU must have AES-NI and SSE2.
    #[target_feature(enable = "aes,sse2")]
    pub(super) unsafe fn encrypt_aesni(round_keys: &[Block; 11], blocks: &mut [Block]) {
        // SAFETY: the loads and stores below stay inside `blocks` (chunks of exactly LANES
        // blocks, then single blocks) and use unaligned access.
        unsafe {
            let k = load_keys(round_keys);
            let mut chunks = blocks.chunks_exact_mut(LANES);
            for chunk in &mut chunks {
                let p = chunk.as_mut_ptr().cast::<__m128i>();
                let mut s: [__m128i; LANES] = core::array::from_fn(|i| _mm_xor_si128(_mm_loadu_si128(p.add(i)), k[0]));
                for key in &k[1..10] {
                    for x in s.iter_mut() {
                        *x = _mm_aesenc_si128(*x, *key);
                    }
                }
                for (i, x) in s.iter().enumerate() {
                    _mm_storeu_si128(p.add(i), _mm_aesenclast_si128(*x, k[10]));
                }
            }
            for b in chunks.into_remainder() {
                let p = (b as *mut Block).cast::<__m128i>();
                let mut x = _mm_xor_si128(_mm_loadu_si128(p), k[0]);
                for key in &k[1..10] {
                    x = _mm_aesenc_si128(x, *key);
                }
                _mm_storeu_si128(p, _mm_aesenclast_si128(x, k[10]));
            }
        }
    }

    /// SAFETY: the CPU must have AVX2; `blocks.len() == 3 * out.len()` and `8 <= W <= 12`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn map_positions_avx2<const W: usize>(blocks: &[Block], k: u32, out: &mut [[u32; W]]) {
        // SAFETY: row r reads the 32 bytes at blocks[3r] and blocks[3r + 2] (inside the row's
        // three blocks, unaligned) and writes 32 bytes at out[r][0] (W >= 8 words, unaligned).
        unsafe {
            let kv = _mm256_set1_epi64x(k as i64);
            for (r, row) in out.iter_mut().enumerate() {
                let src = blocks.as_ptr().add(3 * r);
                let words = _mm256_loadu_si256(src.cast());
                // Products of the even words, then of the odd ones: the positions are their
                // high halves.
                let even = _mm256_srli_epi64::<32>(_mm256_mul_epu32(words, kv));
                let odd = _mm256_mul_epu32(_mm256_srli_epi64::<32>(words), kv);
                _mm256_storeu_si256(row.as_mut_ptr().cast(), _mm256_blend_epi32::<0b1010_1010>(even, odd));
                let tail = *src.add(2);
                for (w, p) in row.iter_mut().enumerate().skip(8) {
                    *p = (((tail >> (32 * (w - 8))) as u32 as u64 * k as u64) >> 32) as u32;
                }
            }
        }
    }

    /// SAFETY: `table` must not be empty and `out.len() <= positions.len()`.
    #[inline(always)]
    pub(super) unsafe fn gather_xor<const ADD: bool, const W: usize>(table: &[Block], positions: &[[u32; W]], out: &mut [Block]) {
        let base = table.as_ptr().cast::<__m128i>();
        let last = table.len() - 1;
        for r in 0..out.len() {
            // SAFETY: r < out.len() <= positions.len(); every position is clamped to at most
            // `last`, so each pointer is to a live block of `table`; loads are unaligned.
            unsafe {
                if let Some(next) = positions.get(r + super::PREFETCH_ROWS) {
                    for &j in next {
                        _mm_prefetch::<_MM_HINT_T0>(base.add((j as usize).min(last)).cast());
                    }
                }
                let p = positions.get_unchecked(r);
                let mut acc = _mm_setzero_si128();
                for &j in p {
                    acc = _mm_xor_si128(acc, _mm_loadu_si128(base.add((j as usize).min(last))));
                }
                let o = out.as_mut_ptr().add(r).cast::<__m128i>();
                if ADD {
                    acc = _mm_xor_si128(acc, _mm_loadu_si128(o));
                }
                _mm_storeu_si128(o, acc);
            }
        }
    }

    /// SAFETY: the CPU must have VAES, AVX2, AES-NI and SSE2.
    #[target_feature(enable = "vaes,avx2,aes,sse2")]
    pub(super) unsafe fn encrypt_vaes(round_keys: &[Block; 11], blocks: &mut [Block]) {
        // SAFETY: each 256-bit load or store covers two consecutive blocks of a chunk of
        // exactly 2 * LANES blocks; the tail goes to the AES-NI kernel, whose features the
        // caller guarantees too.
        unsafe {
            let k128 = load_keys(round_keys);
            let k: [__m256i; 11] = core::array::from_fn(|r| _mm256_broadcastsi128_si256(k128[r]));
            let mut chunks = blocks.chunks_exact_mut(2 * LANES);
            for chunk in &mut chunks {
                let p = chunk.as_mut_ptr().cast::<__m256i>();
                let mut s: [__m256i; LANES] = core::array::from_fn(|i| _mm256_xor_si256(_mm256_loadu_si256(p.add(i)), k[0]));
                for key in &k[1..10] {
                    for x in s.iter_mut() {
                        *x = _mm256_aesenc_epi128(*x, *key);
                    }
                }
                for (i, x) in s.iter().enumerate() {
                    _mm256_storeu_si256(p.add(i), _mm256_aesenclast_epi128(*x, k[10]));
                }
            }
            encrypt_aesni(round_keys, chunks.into_remainder());
        }
    }
}

/// The AES S-box (FIPS-197, figure 7), for the key schedule only.
const SBOX: [u8; 256] = [
    0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76, 0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4,
    0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0, 0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15, 0x04, 0xc7, 0x23, 0xc3,
    0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75, 0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3,
    0x2f, 0x84, 0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf, 0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85,
    0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8, 0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2, 0xcd, 0x0c,
    0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73, 0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14,
    0xde, 0x5e, 0x0b, 0xdb, 0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79, 0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5,
    0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08, 0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a,
    0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e, 0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e,
    0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf, 0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16,
];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn resize_huge_keeps_the_contents_and_fills_the_growth() {
        let mut v: Vec<Block> = (0..1000).collect();
        // Small and then past several 2 MiB pages, as `Vec::resize` would.
        for len in [1000usize, 3000, 1 << 20, 10] {
            let mut expected = v.clone();
            expected.resize(len, 7);
            resize_huge(&mut v, len, 7);
            assert_eq!(v, expected);
        }
        let mut bits = vec![true; 3];
        resize_huge(&mut bits, 5_000_000, false);
        assert!(bits[..3].iter().all(|&b| b) && bits[3..].iter().all(|&b| !b));
    }

    fn paths() -> Vec<AesPath> {
        let best = AesPath::detect();
        let mut paths = vec![AesPath::Portable];
        if best != AesPath::Portable {
            paths.push(AesPath::AesNi);
        }
        if best == AesPath::Vaes {
            paths.push(AesPath::Vaes);
        }
        paths
    }

    #[test]
    fn fips197_vector_on_every_path() {
        // FIPS-197 appendix C.1: key 000102..0f, plaintext 00112233..ff.
        let key = u128::from_le_bytes(core::array::from_fn(|i| i as u8));
        let pt = u128::from_le_bytes(core::array::from_fn(|i| (i as u8) * 0x11));
        let expected = [0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a];
        for path in paths() {
            let mut b = [pt];
            FixedKeyAes::with_path(key, path).encrypt_in_place(&mut b);
            assert_eq!(b[0].to_le_bytes(), expected, "{path:?}");
        }
    }

    #[test]
    fn this_machine_uses_an_intrinsic_path_where_it_can() {
        let aes = FixedKeyAes::new(1);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("aes") {
            assert_ne!(aes.path(), AesPath::Portable);
        }
        let _ = aes;
    }

    proptest! {
        #[test]
        fn intrinsic_paths_match_the_portable_one(key in any::<u128>(), blocks in proptest::collection::vec(any::<u128>(), 0..70)) {
            let mut want = blocks.clone();
            FixedKeyAes::with_path(key, AesPath::Portable).encrypt_in_place(&mut want);
            for path in paths() {
                let mut got = blocks.clone();
                FixedKeyAes::with_path(key, path).encrypt_in_place(&mut got);
                prop_assert_eq!(&got, &want, "{:?}", path);
            }
        }

        #[test]
        fn gather_matches_the_portable_path(
            table in proptest::collection::vec(any::<u128>(), 1..300),
            rows in proptest::collection::vec((proptest::array::uniform10(any::<u32>()), any::<u128>()), 0..40),
        ) {
            let positions: Vec<[u32; 10]> = rows.iter().map(|(p, _)| p.map(|j| j % table.len() as u32)).collect();
            let start: Vec<u128> = rows.iter().map(|(_, o)| *o).collect();
            let (mut add, mut add_portable, mut set, mut set_portable) = (start.clone(), start.clone(), start.clone(), start.clone());
            gather_xor::<true, 10>(&table, &positions, &mut add);
            gather_xor_portable::<true, 10>(&table, &positions, &mut add_portable);
            gather_xor::<false, 10>(&table, &positions, &mut set);
            gather_xor_portable::<false, 10>(&table, &positions, &mut set_portable);
            prop_assert_eq!(&add, &add_portable);
            prop_assert_eq!(&set, &set_portable);
            for (r, p) in positions.iter().enumerate() {
                let sum = p.iter().fold(0u128, |a, &j| a ^ table[j as usize]);
                prop_assert_eq!(set[r], sum);
                prop_assert_eq!(add[r], start[r] ^ sum);
            }
        }

        #[test]
        fn position_kernel_matches_the_portable_path(k in 1u32.., rows in proptest::collection::vec(any::<[u128; 3]>(), 0..40)) {
            let blocks: Vec<u128> = rows.iter().flatten().copied().collect();
            let (mut got, mut want) = (vec![[0u32; 10]; rows.len()], vec![[0u32; 10]; rows.len()]);
            map_positions::<10>(&blocks, k, &mut got);
            map_positions_portable::<10>(&blocks, k, &mut want);
            prop_assert_eq!(&got, &want);
            prop_assert!(got.iter().flatten().all(|&p| p < k));
        }

        #[test]
        fn prefetch_has_no_effect_on_values(table in proptest::collection::vec(any::<u128>(), 0..40), index in 0usize..60) {
            let before = table.clone();
            prefetch(&table, index);
            prop_assert_eq!(table, before);
        }
    }
}

#[cfg(test)]
mod timing {
    use super::*;

    #[test]
    #[ignore]
    fn time_paths() {
        for path in [AesPath::Portable, AesPath::AesNi, AesPath::Vaes] {
            let aes = FixedKeyAes::with_path(3, path);
            let mut blocks = vec![1u128; 1024];
            let t = std::time::Instant::now();
            for _ in 0..10_000 {
                aes.encrypt_in_place(&mut blocks);
            }
            println!("{path:?}: {:.3} ns per block", t.elapsed().as_secs_f64() * 1e9 / 1024e4);
        }
    }
}
