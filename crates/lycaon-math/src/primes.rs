//! NTT-friendly primes: q prime with q = 1 mod 2n, so Z_q holds a primitive 2n-th root of unity.

use crate::{MathError, Modulus};

/// Deterministic Miller-Rabin for all u64 (these 12 bases suffice below 3.3e24).
pub fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    const BASES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    for p in BASES {
        if n.is_multiple_of(p) {
            return n == p;
        }
    }
    let (mut d, mut s) = (n - 1, 0);
    while d % 2 == 0 {
        d /= 2;
        s += 1;
    }
    let mulmod = |a: u64, b: u64| ((a as u128 * b as u128) % n as u128) as u64;
    let powmod = |mut b: u64, mut e: u64| {
        let mut r = 1u64;
        while e > 0 {
            if e & 1 == 1 {
                r = mulmod(r, b);
            }
            b = mulmod(b, b);
            e >>= 1;
        }
        r
    };
    'witness: for a in BASES {
        let mut x = powmod(a, d);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mulmod(x, x);
            if x == n - 1 {
                continue 'witness;
            }
        }
        return false;
    }
    true
}

/// The `count` largest primes q < 2^bits with q = 1 mod 2n, skipping those in `exclude`,
/// in descending order (the same choice as SEAL's `CoeffModulus::Create` for one bit size).
pub fn ntt_primes(bits: u32, n: usize, count: usize, exclude: &[u64]) -> Result<Vec<u64>, MathError> {
    let two_n = 2 * n as u64;
    if !(2..=crate::modulus::MAX_MODULUS_BITS).contains(&bits) || !n.is_power_of_two() || two_n >= 1 << bits {
        return Err(MathError::NoPrimes { bits, n, count });
    }
    let mut found = Vec::with_capacity(count);
    // Largest candidate of the form k * 2n + 1 below 2^bits.
    let mut candidate = ((1u64 << bits) - 1) / two_n * two_n + 1;
    if candidate >= 1 << bits {
        candidate -= two_n;
    }
    while found.len() < count {
        if candidate <= two_n || candidate >> (bits - 1) == 0 {
            return Err(MathError::NoPrimes { bits, n, count });
        }
        if is_prime(candidate) && !exclude.contains(&candidate) {
            found.push(candidate);
        }
        candidate -= two_n;
    }
    Ok(found)
}

/// Builds moduli for primes of the given bit sizes (one prime per entry), all distinct.
pub fn ntt_moduli(bit_sizes: &[u32], n: usize, exclude: &[u64]) -> Result<Vec<Modulus>, MathError> {
    let mut taken: Vec<u64> = exclude.to_vec();
    let mut out = Vec::with_capacity(bit_sizes.len());
    for &bits in bit_sizes {
        let q = ntt_primes(bits, n, 1, &taken)?[0];
        taken.push(q);
        out.push(Modulus::new(q)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primality_of_known_values() {
        assert!(is_prime(2) && is_prime(65537) && is_prime((1 << 61) - 1) && is_prime(1032193));
        assert!(!is_prime(1) && !is_prime(561) && !is_prime(3215031751) && !is_prime(u64::MAX));
    }

    #[test]
    fn seal_compatible_primes() {
        // SEAL's PlainModulus::Batching(8192, 20) is 1032193; CoeffModulus::Create(4096, {36,36,37})
        // starts 68719403009, 68719230977, 137438822401.
        assert_eq!(ntt_primes(20, 8192, 1, &[]).unwrap(), vec![1032193]);
        assert_eq!(ntt_primes(36, 4096, 2, &[]).unwrap(), vec![68719403009, 68719230977]);
        assert_eq!(ntt_primes(37, 4096, 1, &[]).unwrap(), vec![137438822401]);
        let qs = ntt_primes(50, 1 << 16, 8, &[]).unwrap();
        assert!(qs.iter().all(|&q| is_prime(q) && q % (1 << 17) == 1 && q >> 49 == 1));
        assert!(ntt_primes(10, 1024, 1, &[]).is_err());
    }
}
