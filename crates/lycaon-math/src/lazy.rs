//! Lazy accumulation: sums of products of residues kept in u128 and reduced once at the end.
//! With q < 2^62 each product is below 2^124, so at least 16 products fit before any reduction;
//! with the < 2^52 primes Lycaon prefers, more than 2^24.

use crate::Modulus;

/// How many products of residues below `q` fit in a u128 accumulator without overflow.
pub fn lazy_capacity(q: &Modulus) -> u64 {
    let max = (q.value() - 1) as u128;
    (u128::MAX / (max * max).max(1)).min(u64::MAX as u128) as u64
}

/// acc[k] += a[k] * b[k] without reduction.
#[inline]
pub fn mul_accumulate_lazy(acc: &mut [u128], a: &[u64], b: &[u64]) {
    for ((s, &x), &y) in acc.iter_mut().zip(a).zip(b) {
        *s += x as u128 * y as u128;
    }
}

/// out[k] = acc[k] mod q.
#[inline]
pub fn reduce_lazy(acc: &[u128], out: &mut [u64], q: &Modulus) {
    for (o, &s) in out.iter_mut().zip(acc) {
        *o = q.reduce_u128(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reduction_matches_stepwise() {
        let q = Modulus::new((1 << 50) - 27).unwrap();
        assert!(lazy_capacity(&q) > 1 << 24);
        let terms = 1000;
        let a: Vec<Vec<u64>> = (0..terms).map(|t| (0..8).map(|k| q.reduce((t * 7919 + k) as u64 * 0x9E3779B97F4A7C15)).collect()).collect();
        let mut acc = vec![0u128; 8];
        let mut want = vec![0u64; 8];
        for t in 0..terms {
            mul_accumulate_lazy(&mut acc, &a[t], &a[(t + 1) % terms]);
            for k in 0..8 {
                want[k] = q.add(want[k], q.mul(a[t][k], a[(t + 1) % terms][k]));
            }
        }
        let mut got = vec![0u64; 8];
        reduce_lazy(&acc, &mut got, &q);
        assert_eq!(got, want);
    }
}
