//! Base oblivious transfer: `count` random 1-out-of-2 OTs of 128-bit keys from public-key
//! operations in the Ristretto255 group, the seeds of OT extension.
//!
//! The protocol is Chou and Orlandi, "The Simplest Protocol for Oblivious Transfer"
//! (LATINCRYPT 2015, ePrint 2015/267), batched with one sender key for all instances; secure
//! against semi-honest parties under computational Diffie–Hellman in the random-oracle model
//! (the setting this crate targets; CO15 is known not to be UC-secure against a malicious
//! receiver, see Genç, Iovino and Rial, ePrint 2017/1032):
//!
//! 1. the sender draws `a`, sends `A = aG`;
//! 2. the receiver, for choice `c_i`, draws `b_i` and sends `B_i = b_i G + c_i A`;
//!    its key is `k_i = H(i, A, B_i, b_i A)`;
//! 3. the sender's keys are `k_i^0 = H(i, A, B_i, a B_i)` and `k_i^1 = H(i, A, B_i, a B_i - aA)`.
//!
//! `H` is BLAKE3 in key-derivation mode, truncated to 128 bits; the transcript (`A`, `B_i`) and
//! the index `i` are hashed with the shared point so that keys of different instances and runs
//! are independent. `B_i` is uniform whatever `c_i` is, so the receiver's choices are perfectly
//! hidden; the sender's other key needs `b_i`'s discrete logarithm relative to `A`.
//! Cost: one message of 32 bytes from the sender, one of `32 * count` bytes from the receiver.

use curve25519_dalek::constants::RISTRETTO_BASEPOINT_POINT;
use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::IsIdentity;
use rand_chacha::ChaCha20Rng;
use rand_core::{CryptoRng, SeedableRng};
use rayon::prelude::*;
use subtle::{Choice, ConditionallySelectable};
use zeroize::Zeroize;

use crate::{channel::Channel, cot::Block, MpcError, Result};

/// Bytes of a compressed Ristretto255 point.
const POINT_BYTES: usize = 32;
/// BLAKE3 key-derivation context of the OT keys.
const KEY_CONTEXT: &str = "lycaon-mpc 2025 Chou-Orlandi base OT key over Ristretto255";

/// A ChaCha20 generator seeded with 32 bytes from the operating system's CSPRNG.
pub fn os_seeded_rng() -> Result<ChaCha20Rng> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| MpcError::Crypto(format!("operating-system randomness unavailable: {e}")))?;
    let rng = ChaCha20Rng::from_seed(seed);
    seed.zeroize();
    Ok(rng)
}

/// A uniform scalar: 64 random bytes reduced modulo the group order (bias below 2^-250).
fn random_scalar<R: CryptoRng + ?Sized>(rng: &mut R) -> Scalar {
    let mut wide = [0u8; 64];
    rng.fill_bytes(&mut wide);
    let s = Scalar::from_bytes_mod_order_wide(&wide);
    wide.zeroize();
    s
}

/// A point from the peer: exactly 32 bytes of a valid Ristretto255 encoding.
fn decode_point(bytes: &[u8], what: &str) -> Result<RistrettoPoint> {
    CompressedRistretto::from_slice(bytes)
        .ok()
        .and_then(|c| c.decompress())
        .ok_or_else(|| MpcError::Malformed(format!("{what} is not a valid Ristretto255 point")))
}

/// `H(i, A, B_i, P)`, 128 bits.
fn derive_key(index: usize, a: &[u8], b: &[u8], shared: &RistrettoPoint) -> Block {
    let mut h = blake3::Hasher::new_derive_key(KEY_CONTEXT);
    h.update(&(index as u64).to_le_bytes());
    h.update(a);
    h.update(b);
    h.update(shared.compress().as_bytes());
    let out = h.finalize();
    let mut k = [0u8; 16];
    k.copy_from_slice(&out.as_bytes()[..16]);
    u128::from_le_bytes(k)
}

/// The sender's half: `count` random key pairs `(k_i^0, k_i^1)`; the receiver learns `k_i^{c_i}`.
///
/// Sends `A` (32 bytes), then receives `32 * count` bytes. `count == 0` exchanges nothing.
/// Errors: the channel's errors; `Malformed` if a `B_i` is not a valid point.
pub fn base_ot_send<R: CryptoRng + ?Sized>(channel: &mut dyn Channel, count: usize, rng: &mut R) -> Result<Vec<(Block, Block)>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let mut a = random_scalar(rng);
    let big_a = RISTRETTO_BASEPOINT_POINT * a;
    let a_bytes = big_a.compress().to_bytes();
    channel.send(&a_bytes)?;
    let reply = channel.recv_exact(POINT_BYTES * count, "base OT receiver points")?;
    let a_times_a = big_a * a;
    let keys = reply
        .par_chunks_exact(POINT_BYTES)
        .enumerate()
        .map(|(i, b_bytes)| {
            let b = decode_point(b_bytes, "a base OT receiver point")?;
            let k0 = b * a;
            let k1 = k0 - a_times_a;
            Ok((derive_key(i, &a_bytes, b_bytes, &k0), derive_key(i, &a_bytes, b_bytes, &k1)))
        })
        .collect::<Result<Vec<_>>>();
    a.zeroize();
    keys
}

/// The receiver's half: the key `k_i^{c_i}` of each pair for the choices `c_i`.
///
/// Receives `A` (32 bytes), then sends `32 * choices.len()` bytes. No choices exchange nothing.
/// Errors: the channel's errors; `Malformed` if `A` is not a valid point or is the identity.
pub fn base_ot_receive<R: CryptoRng + ?Sized>(channel: &mut dyn Channel, choices: &[bool], rng: &mut R) -> Result<Vec<Block>> {
    if choices.is_empty() {
        return Ok(Vec::new());
    }
    let a_bytes = channel.recv_exact(POINT_BYTES, "base OT sender point")?;
    let big_a = decode_point(&a_bytes, "the base OT sender point")?;
    if big_a.is_identity() {
        return Err(MpcError::Malformed("the base OT sender point is the identity".into()));
    }
    let mut scalars: Vec<Scalar> = (0..choices.len()).map(|_| random_scalar(rng)).collect();
    let points: Vec<([u8; POINT_BYTES], RistrettoPoint)> = scalars
        .par_iter()
        .zip(choices.par_iter())
        .map(|(b, &c)| {
            let bg = RistrettoPoint::mul_base(b);
            let chosen = RistrettoPoint::conditional_select(&bg, &(bg + big_a), Choice::from(u8::from(c)));
            (chosen.compress().to_bytes(), big_a * b)
        })
        .collect();
    scalars.zeroize();
    let message: Vec<u8> = points.iter().flat_map(|(b, _)| *b).collect();
    channel.send(&message)?;
    Ok(points.par_iter().enumerate().map(|(i, (b_bytes, shared))| derive_key(i, &a_bytes, b_bytes, shared)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{run_pair, LinkModel};
    use rand_core::Rng;

    fn random_choices(n: usize, seed: u64) -> Vec<bool> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        (0..n).map(|_| rng.next_u32() & 1 == 1).collect()
    }

    #[test]
    fn receiver_gets_the_chosen_key_only() {
        for n in [0usize, 1, 2, 128, 300] {
            let choices = random_choices(n, n as u64);
            let c = choices.clone();
            let ((pairs, s0), (keys, s1)) = run_pair(
                LinkModel::UNLIMITED,
                |ch| base_ot_send(ch, n, &mut ChaCha20Rng::seed_from_u64(1)),
                move |ch| base_ot_receive(ch, &c, &mut ChaCha20Rng::seed_from_u64(2)),
            )
            .unwrap();
            assert_eq!((pairs.len(), keys.len()), (n, n));
            for i in 0..n {
                let (k0, k1) = pairs[i];
                assert_ne!(k0, k1);
                assert_eq!(keys[i], if choices[i] { k1 } else { k0 }, "instance {i}");
            }
            let expected_up = if n == 0 { 0 } else { 32 };
            assert_eq!((s0.bytes_sent, s0.bytes_received), (expected_up, 32 * n as u64));
            assert_eq!((s1.bytes_sent, s1.bytes_received), (32 * n as u64, expected_up));
            // All keys distinct across instances.
            let mut all: Vec<Block> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), 2 * n);
        }
    }

    #[test]
    fn invalid_points_are_malformed() {
        // 32 bytes of 0xff are not a canonical encoding.
        let r = run_pair(LinkModel::UNLIMITED, |ch| ch.send(&[0xff; 32]), |ch| base_ot_receive(ch, &[true], &mut ChaCha20Rng::seed_from_u64(3)));
        assert!(matches!(r, Err(MpcError::Malformed(_))), "{r:?}");
        // The identity as A.
        let r = run_pair(LinkModel::UNLIMITED, |ch| ch.send(&[0u8; 32]), |ch| base_ot_receive(ch, &[true], &mut ChaCha20Rng::seed_from_u64(3)));
        assert!(matches!(r, Err(MpcError::Malformed(_))), "{r:?}");
        // A bad B_i.
        let r = run_pair(
            LinkModel::UNLIMITED,
            |ch| base_ot_send(ch, 2, &mut ChaCha20Rng::seed_from_u64(4)),
            |ch| {
                ch.recv()?;
                ch.send(&[0xee; 64])
            },
        );
        assert!(matches!(r, Err(MpcError::Malformed(_))), "{r:?}");
    }

    #[test]
    fn os_rng_gives_fresh_randomness() {
        let mut a = os_seeded_rng().unwrap();
        let mut b = os_seeded_rng().unwrap();
        assert_ne!(a.next_u64(), b.next_u64());
    }
}
