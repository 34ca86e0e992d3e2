//! Keys generated only up to a level: they rotate and relinearise correctly at every level up to
//! theirs, are refused above it, are smaller than full keys by the predicted ratio, serialise
//! with their level; rotation keysets compose missing steps and refuse impossible ones.

use std::sync::Arc;

use lycaon_math::{Automorphism, Coeff, Poly, Sampler};
use lycaon_rlwe::keyswitch::{automorphism, relinearize};
use lycaon_rlwe::{
    encrypt_zero_symmetric, phase, Ciphertext, GaloisKeys, KeySwitchKey, Parameters, ParametersLiteral, RelinKey, RlweError, RotationKeyset,
    SecretKey, Security,
};

const DELTA: i64 = 1 << 30;

/// n = 256, six 40-bit ciphertext primes in three digits of two, two special primes.
fn params() -> Arc<Parameters> {
    let mut lit = ParametersLiteral::bfv_from_bits(256, &[40, 40, 40, 40, 40, 40], &[50, 50], 17).unwrap();
    lit.plaintext_modulus = None;
    lit.key_switch_digits = 3;
    lit.security = Security::InsecureTestOnly;
    Parameters::new(lit).unwrap()
}

fn message(n: usize, seed: u64) -> Vec<i64> {
    let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 21) as i64 - 10
        })
        .collect()
}

/// A symmetric encryption of DELTA * m at `level`.
fn encrypt(sk: &SecretKey, m: &[i64], level: usize, s: &mut Sampler) -> Ciphertext {
    let params = sk.params();
    let mut seeded = encrypt_zero_symmetric(sk, level, s).unwrap();
    let scaled: Vec<i64> = m.iter().map(|&c| c * DELTA).collect();
    let q = params.q_at(level).unwrap();
    let pt = params.backend().ntt(Poly::<Coeff>::from_signed(q, &scaled).unwrap()).unwrap();
    seeded.c0_mut().add_assign(&pt).unwrap();
    seeded.expand(params).unwrap()
}

/// Largest |phase - DELTA * want| over the coefficients, read from the first limb (centred).
fn error(sk: &SecretKey, ct: &Ciphertext, want: &[i64]) -> i64 {
    let p = sk.params().backend().intt(phase(sk, ct).unwrap()).unwrap();
    let q0 = p.basis().moduli()[0].value() as i64;
    p.limb(0)
        .iter()
        .zip(want)
        .map(|(&x, &w)| {
            let x = x as i64;
            let centred = if x > q0 / 2 { x - q0 } else { x };
            (centred - w * DELTA).abs()
        })
        .max()
        .unwrap()
}

fn rotated(m: &[i64], g: u64) -> Vec<i64> {
    let n = m.len();
    assert!(Automorphism::new(g, n).is_ok());
    let mut out = vec![0i64; n];
    for (i, &c) in m.iter().enumerate() {
        let t = (i as u64 * g % (2 * n as u64)) as usize;
        if t >= n {
            out[t - n] -= c;
        } else {
            out[t] += c;
        }
    }
    out
}

#[test]
fn a_key_up_to_level_k_rotates_at_every_level_up_to_k_and_refuses_above() {
    let params = params();
    let mut s = Sampler::from_seed([11; 32]);
    let sk = SecretKey::generate(&params, &mut s).unwrap();
    let k = 2;
    let g = lycaon_math::rotation_galois_element(5, params.n());
    let gk = GaloisKeys::generate_at(&sk, &[(g, k)], &mut s).unwrap();
    assert_eq!(gk.level_of(g), Some(k));
    let m = message(params.n(), 1);
    let want = rotated(&m, g);
    for level in 0..=params.max_level() {
        let ct = encrypt(&sk, &m, level, &mut s);
        let result = automorphism(&params, &ct, g, &gk);
        if level <= k {
            let out = result.unwrap();
            assert_eq!(out.level(), level);
            let e = error(&sk, &out, &want);
            assert!(e < 1 << 12, "level {level}: error {e}");
        } else {
            let err = result.unwrap_err();
            assert_eq!(err, RlweError::KeyLevelTooLow { galois_element: Some(g), key_level: k, ciphertext_level: level });
            assert!(err.to_string().contains(&format!("generated up to level {k}")), "{err}");
        }
    }
}

#[test]
fn a_relinearisation_key_up_to_level_k_works_there_and_is_refused_above() {
    let params = params();
    let mut s = Sampler::from_seed([12; 32]);
    let sk = SecretKey::generate(&params, &mut s).unwrap();
    let rk = RelinKey::generate_at(&sk, 1, &mut s).unwrap();
    let m = message(params.n(), 2);
    for level in [0, 1, 3] {
        // (0, 0, DELTA m) decrypts to DELTA m s^2; relinearised it must still.
        let ct = encrypt(&sk, &vec![0; params.n()], level, &mut s);
        let q = params.q_at(level).unwrap();
        let scaled: Vec<i64> = m.iter().map(|&c| c * DELTA).collect();
        let c2 = params.backend().ntt(Poly::<Coeff>::from_signed(q, &scaled).unwrap()).unwrap();
        let mut parts = ct.into_parts();
        parts.push(c2);
        let three = Ciphertext::from_parts(&params, parts).unwrap();
        let before = phase(&sk, &three).unwrap();
        match relinearize(&params, &three, &rk) {
            Ok(two) => {
                assert!(level <= 1);
                let mut diff = phase(&sk, &two).unwrap();
                diff.sub_assign(&before).unwrap();
                let d = params.backend().intt(diff).unwrap();
                let q0 = q.moduli()[0].value();
                let worst = d.limb(0).iter().map(|&x| x.min(q0 - x)).max().unwrap();
                assert!(worst < 1 << 12, "level {level}: relinearisation error {worst}");
            }
            Err(err) => {
                assert_eq!(level, 3);
                assert_eq!(err, RlweError::KeyLevelTooLow { galois_element: None, key_level: 1, ciphertext_level: 3 });
            }
        }
    }
}

#[test]
fn level_limited_keys_are_smaller_by_the_limb_and_digit_ratio() {
    let params = params();
    let mut s = Sampler::from_seed([13; 32]);
    let sk = SecretKey::generate(&params, &mut s).unwrap();
    let g = lycaon_math::rotation_galois_element(1, params.n());
    let top = params.max_level();
    let alpha = params.special_prime_count();
    let full = GaloisKeys::generate(&sk, &[g], &mut s).unwrap();
    let full_key = full.get(g).unwrap();
    assert_eq!((full_key.level(), full_key.num_digits(), full_key.num_limbs()), (top, 3, top + 1 + alpha));
    for k in 0..=top {
        let key = GaloisKeys::generate_at(&sk, &[(g, k)], &mut s).unwrap();
        let key = key.get(g).unwrap();
        let digits = params.key_switch_digit_sizes(k).unwrap().len();
        assert_eq!(key.num_digits(), digits);
        assert_eq!(key.num_limbs(), k + 1 + alpha);
        // Memory: exactly (limbs of Q_k P / limbs of Q_L P) * (digits at k / digits at L).
        let (m_k, m_full) = (key.memory_bytes(), full_key.memory_bytes());
        assert_eq!(m_k * (top + 1 + alpha) * full_key.num_digits(), m_full * (k + 1 + alpha) * digits, "level {k}");
        // Serialised: the sizes reported are exactly the bytes written.
        assert_eq!(key.serialized_len(true), key.to_bytes().len());
        assert_eq!(key.serialized_len(false), key.to_bytes_unseeded().len());
        // Residues are bit-packed at their prime's width: the payload is digits x sum of limb bits.
        let limb_bytes: usize = params.q_at(k).unwrap().moduli().iter().chain(params.p().unwrap().moduli()).map(|q| (params.n() * q.bits() as usize).div_ceil(8)).sum();
        let header = lycaon_rlwe::wire::HEADER_LEN + lycaon_rlwe::wire::CHECKSUM_LEN;
        let fixed = if k == top { 4 + 32 } else { 4 + 1 + 4 + 32 };
        assert_eq!(key.serialized_len(true), header + fixed + digits * limb_bytes);
        assert_eq!(key.serialized_len(false), header + 9 + 2 * digits * limb_bytes);
        let sizes = key.byte_sizes(Some(g));
        assert_eq!((sizes.level, sizes.digits, sizes.limbs, sizes.memory), (k, digits, k + 1 + alpha, m_k));
    }
    // The level-2 key of these parameters: 5 of 8 limbs and 2 of 3 digits.
    let two = GaloisKeys::generate_at(&sk, &[(g, 2)], &mut s).unwrap();
    assert_eq!(two.memory_bytes() * 24, full.memory_bytes() * 10);
}

#[test]
fn level_limited_keys_serialise_with_their_level_and_full_keys_keep_version_1() {
    let params = params();
    let mut s = Sampler::from_seed([14; 32]);
    let sk = SecretKey::generate(&params, &mut s).unwrap();
    let n = params.n();
    let g1 = lycaon_math::rotation_galois_element(1, n);
    let g2 = lycaon_math::rotation_galois_element(2, n);
    let mixed = GaloisKeys::generate_at(&sk, &[(g1, 1), (g2, params.max_level())], &mut s).unwrap();
    for bytes in [mixed.to_bytes(), mixed.to_bytes_unseeded()] {
        let back = GaloisKeys::from_bytes(&params, &bytes).unwrap();
        assert_eq!(back.level_of(g1), Some(1));
        assert_eq!(back.level_of(g2), Some(params.max_level()));
        assert_eq!(back.get(g1).unwrap().memory_bytes(), mixed.get(g1).unwrap().memory_bytes());
        // Both encodings carry the same key: re-serialised seeded or not, nothing changes.
        assert_eq!(back.to_bytes_unseeded(), mixed.to_bytes_unseeded());
    }
    assert_eq!(mixed.serialized_len(true), mixed.to_bytes().len());
    assert_eq!(mixed.serialized_len(false), mixed.to_bytes_unseeded().len());
    assert_eq!(mixed.to_bytes()[6], lycaon_rlwe::wire::ObjectKind::GaloisKeysV2 as u8);
    let full = GaloisKeys::generate(&sk, &[g1], &mut s).unwrap();
    assert_eq!(full.to_bytes()[6], lycaon_rlwe::wire::ObjectKind::GaloisKeys as u8);
    assert_eq!(full.serialized_len(true), full.to_bytes().len());
    let rk = RelinKey::generate_at(&sk, 2, &mut s).unwrap();
    let back = RelinKey::from_bytes(&params, &rk.to_bytes()).unwrap();
    assert_eq!(back.level(), 2);
    assert_eq!(back.to_bytes(), rk.to_bytes());
    assert_eq!(rk.serialized_len(true), rk.to_bytes().len());
    let ksk = KeySwitchKey::from_bytes(&params, &rk.key().to_bytes_unseeded()).unwrap();
    assert_eq!(ksk.level(), 2);
    // A level-2 key claiming the digits of another level is refused.
    let mut bytes = rk.key().to_bytes();
    let payload = lycaon_rlwe::wire::HEADER_LEN;
    bytes[payload..payload + 4].copy_from_slice(&5u32.to_le_bytes());
    let body_end = bytes.len() - lycaon_rlwe::wire::CHECKSUM_LEN;
    let sum = blake3::hash(&bytes[..body_end]);
    bytes[body_end..].copy_from_slice(&sum.as_bytes()[..lycaon_rlwe::wire::CHECKSUM_LEN]);
    let err = KeySwitchKey::from_bytes(&params, &bytes).unwrap_err();
    assert!(err.to_string().contains("digits"), "{err}");
}

#[test]
fn composed_rotations_match_direct_keys_and_respect_levels() {
    let params = params();
    let n = params.n();
    let half = n as i64 / 2;
    let mut s = Sampler::from_seed([15; 32]);
    let sk = SecretKey::generate(&params, &mut s).unwrap();
    // Powers of two up to level 3, step 3 directly up to level 1, step 64 only up to level 0.
    let mut steps: Vec<(i64, usize)> = (0..7).map(|i| (1i64 << i, 3)).collect();
    steps.retain(|&(st, _)| st != 64);
    steps.push((3, 1));
    steps.push((64, 0));
    let keyset = RotationKeyset::generate(&sk, &steps, &mut s).unwrap();
    assert_eq!(keyset.plan(3, 1).unwrap(), vec![3]);
    assert_eq!(keyset.plan(3, 2).unwrap().len(), 2, "1 + 2 above the direct key's level");
    assert_eq!(keyset.plan(7, 3).unwrap().len(), 3);
    assert_eq!(keyset.plan(0, 3).unwrap(), Vec::<usize>::new());
    assert_eq!(keyset.plan(half + 5, 3).unwrap().iter().sum::<usize>() % half as usize, 5);
    let m = message(n, 3);
    for (step, level) in [(7i64, 3usize), (3, 2), (-1, 3), (100, 3), (64, 0), (64, 2)] {
        let ct = encrypt(&sk, &m, level, &mut s);
        let out = keyset.rotate(&params, &ct, step).unwrap();
        let want = rotated(&m, keyset.galois_element(step));
        let e = error(&sk, &out, &want);
        assert!(e < 1 << 14, "step {step} level {level}: error {e}");
        // A direct key for the same step gives the same message.
        let direct = GaloisKeys::generate_at(&sk, &[(keyset.galois_element(step), level)], &mut s).unwrap();
        let d = automorphism(&params, &ct, keyset.galois_element(step), &direct).unwrap();
        assert!(error(&sk, &d, &want) < 1 << 12);
    }
    // Hoisted: direct and composed steps together.
    let ct = encrypt(&sk, &m, 1, &mut s);
    let outs = keyset.rotate_hoisted(&params, &ct, &[1, 3, 5, 0, 12]).unwrap();
    for (out, step) in outs.iter().zip([1i64, 3, 5, 0, 12]) {
        assert!(error(&sk, out, &rotated(&m, keyset.galois_element(step))) < 1 << 14, "step {step}");
    }
    // Above level 3 only nothing is left; odd steps are impossible from even keys alone.
    let ct = encrypt(&sk, &m, 4, &mut s);
    assert_eq!(keyset.rotate(&params, &ct, 1).unwrap_err(), RlweError::RotationImpossible { step: 1, level: 4 });
    let even = RotationKeyset::generate(&sk, &[(2, 3), (4, 3)], &mut s).unwrap();
    let err = even.plan(3, 0).unwrap_err();
    assert_eq!(err, RlweError::RotationImpossible { step: 3, level: 0 });
    assert!(err.to_string().contains("impossible"), "{err}");
    // Power-of-two keysets reach every step within log2(n/2) key switches.
    let p2 = RotationKeyset::power_of_two(&sk, 0, &mut s).unwrap();
    let worst = (0..half).map(|st| p2.cost(st, 0).unwrap()).max().unwrap();
    assert!(worst <= (half.trailing_zeros() as usize) / 2 + 1, "worst {worst}");
    assert_eq!(p2.byte_sizes().len(), p2.galois_keys().len());
}

#[test]
fn keys_generated_straight_into_bytes_are_the_keys_generate_at_makes() {
    // Streaming (each key written and dropped before the next) gives the same keys for the same
    // sampler, in both layouts (mixed levels: version 2; all full: version 1), inside a buffer
    // that already holds other bytes; an invalid element is refused before anything is written.
    let params = params();
    let mut s = Sampler::from_seed([15; 32]);
    let sk = SecretKey::generate(&params, &mut s).unwrap();
    let n = params.n();
    let (g1, g2, g3) = (lycaon_math::rotation_galois_element(1, n), lycaon_math::rotation_galois_element(3, n), lycaon_math::rotation_galois_element(-2, n));
    let top = params.max_level();
    for pairs in [vec![(g2, 1), (g1, top), (g3, 2), (g2, 3)], vec![(g3, top), (g1, top)]] {
        let made = GaloisKeys::generate_at(&sk, &pairs, &mut Sampler::from_seed([16; 32])).unwrap();
        let mut out = b"prefix".to_vec();
        GaloisKeys::generate_serialized_into(&sk, &pairs, &mut Sampler::from_seed([16; 32]), &mut out).unwrap();
        assert_eq!(&out[..6], b"prefix");
        let back = GaloisKeys::from_bytes(&params, &out[6..]).unwrap();
        assert_eq!(back.to_bytes(), made.to_bytes());
        assert_eq!(out.len() - 6, made.serialized_len(true));
    }
    let mut out = Vec::new();
    assert!(GaloisKeys::generate_serialized_into(&sk, &[(g1, top), (2, top)], &mut s, &mut out).is_err());
    assert!(out.is_empty());
}
