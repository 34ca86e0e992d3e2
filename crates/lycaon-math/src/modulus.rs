//! Word-size moduli q < 2^62 with Barrett and Shoup constants: every value handed out is in [0, q).

use crate::MathError;

/// Largest modulus accepted: leaves two spare bits so lazy sums of a few residues never overflow.
pub const MAX_MODULUS_BITS: u32 = 62;

/// A modulus q with its Barrett constant floor(2^128 / q).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Modulus {
    value: u64,
    /// floor(2^128 / q), high and low words.
    ratio_hi: u64,
    ratio_lo: u64,
}

impl Modulus {
    /// Builds a modulus; errors unless 2 <= q < 2^62.
    pub fn new(value: u64) -> Result<Self, MathError> {
        if value < 2 || value >> MAX_MODULUS_BITS != 0 {
            return Err(MathError::InvalidModulus { value, reason: "must satisfy 2 <= q < 2^62" });
        }
        // floor(2^128 / q) = floor((2^128 - 1) / q) unless q divides 2^128 (q a power of two).
        let ratio = if value.is_power_of_two() { 1u128 << (128 - value.trailing_zeros()) } else { u128::MAX / value as u128 };
        Ok(Self { value, ratio_hi: (ratio >> 64) as u64, ratio_lo: ratio as u64 })
    }

    #[inline]
    pub fn value(&self) -> u64 {
        self.value
    }

    /// Number of bits of q.
    pub fn bits(&self) -> u32 {
        64 - self.value.leading_zeros()
    }

    /// a mod q for any u64 a.
    #[inline]
    pub fn reduce(&self, a: u64) -> u64 {
        let q_hat = ((a as u128 * self.ratio_hi as u128) >> 64) as u64;
        let r = a.wrapping_sub(q_hat.wrapping_mul(self.value));
        if r >= self.value { r - self.value } else { r }
    }

    /// a mod q for any u128 a (Barrett with the 128-bit ratio; the quotient estimate is off by at most 2).
    #[inline]
    pub fn reduce_u128(&self, a: u128) -> u64 {
        let x0 = a as u64;
        let x1 = (a >> 64) as u64;
        let lo_lo = (x0 as u128 * self.ratio_lo as u128) >> 64;
        let lo_hi = x0 as u128 * self.ratio_hi as u128;
        let hi_lo = x1 as u128 * self.ratio_lo as u128;
        let mid = lo_lo + (lo_hi as u64 as u128) + (hi_lo as u64 as u128);
        let q_hat = (x1 as u128 * self.ratio_hi as u128) + (lo_hi >> 64) + (hi_lo >> 64) + (mid >> 64);
        let mut r = x0.wrapping_sub((q_hat as u64).wrapping_mul(self.value));
        if r >= self.value {
            r -= self.value;
        }
        if r >= self.value {
            r -= self.value;
        }
        r
    }

    /// Reduces a signed integer into [0, q).
    #[inline]
    pub fn reduce_i64(&self, a: i64) -> u64 {
        let r = self.reduce(a.unsigned_abs());
        if a < 0 && r != 0 { self.value - r } else { r }
    }

    /// The representative of a in (-q/2, q/2].
    #[inline]
    pub fn center(&self, a: u64) -> i64 {
        if a > self.value / 2 { a as i64 - self.value as i64 } else { a as i64 }
    }

    #[inline]
    pub fn add(&self, a: u64, b: u64) -> u64 {
        let s = a + b;
        if s >= self.value { s - self.value } else { s }
    }

    #[inline]
    pub fn sub(&self, a: u64, b: u64) -> u64 {
        if a >= b { a - b } else { a + self.value - b }
    }

    #[inline]
    pub fn neg(&self, a: u64) -> u64 {
        if a == 0 { 0 } else { self.value - a }
    }

    #[inline]
    pub fn mul(&self, a: u64, b: u64) -> u64 {
        self.reduce_u128(a as u128 * b as u128)
    }

    /// Shoup's precomputed constant floor(w * 2^64 / q) for a fixed multiplicand w < q.
    #[inline]
    pub fn shoup(&self, w: u64) -> u64 {
        (((w as u128) << 64) / self.value as u128) as u64
    }

    /// a * w mod q with w's Shoup constant; a may be any u64.
    #[inline]
    pub fn mul_shoup(&self, a: u64, w: u64, w_shoup: u64) -> u64 {
        let q_hat = ((a as u128 * w_shoup as u128) >> 64) as u64;
        let r = a.wrapping_mul(w).wrapping_sub(q_hat.wrapping_mul(self.value));
        if r >= self.value { r - self.value } else { r }
    }

    pub fn pow(&self, base: u64, mut exp: u64) -> u64 {
        let mut result = 1 % self.value;
        let mut b = self.reduce(base);
        while exp > 0 {
            if exp & 1 == 1 {
                result = self.mul(result, b);
            }
            b = self.mul(b, b);
            exp >>= 1;
        }
        result
    }

    /// Multiplicative inverse by the extended Euclidean algorithm; errors when gcd(a, q) != 1.
    pub fn inv(&self, a: u64) -> Result<u64, MathError> {
        let (mut r0, mut r1) = (self.value as i128, self.reduce(a) as i128);
        let (mut t0, mut t1) = (0i128, 1i128);
        while r1 != 0 {
            let quot = r0 / r1;
            (r0, r1) = (r1, r0 - quot * r1);
            (t0, t1) = (t1, t0 - quot * t1);
        }
        if r0 != 1 {
            return Err(MathError::NotInvertible { value: a, modulus: self.value });
        }
        Ok(t0.rem_euclid(self.value as i128) as u64)
    }
}

/// A constant multiplicand with its Shoup constant, for loops that multiply many values by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShoupConstant {
    pub value: u64,
    pub shoup: u64,
}

impl ShoupConstant {
    pub fn new(value: u64, modulus: &Modulus) -> Self {
        let value = modulus.reduce(value);
        Self { value, shoup: modulus.shoup(value) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const QS: [u64; 5] = [3, 65537, (1 << 50) - 27, (1 << 61) - 1, 0x3fff_ffff_fffc_0001];

    proptest! {
        #[test]
        fn reductions_match_u128_remainder(a in any::<u128>(), b in any::<u64>(), qi in 0usize..5) {
            let q = Modulus::new(QS[qi]).unwrap();
            prop_assert_eq!(q.reduce_u128(a) as u128, a % QS[qi] as u128);
            prop_assert_eq!(q.reduce(b), b % QS[qi]);
            let (x, y) = (q.reduce(b), q.reduce((a >> 64) as u64));
            prop_assert_eq!(q.mul(x, y) as u128, (x as u128 * y as u128) % QS[qi] as u128);
            prop_assert_eq!(q.mul_shoup(b, y, q.shoup(y)) as u128, (b as u128 * y as u128) % QS[qi] as u128);
            prop_assert_eq!(q.add(x, y) as u128, (x as u128 + y as u128) % QS[qi] as u128);
            prop_assert_eq!(q.add(q.sub(x, y), y), x);
            let s = b as i64;
            prop_assert_eq!(q.reduce_i64(s) as i128, (s as i128).rem_euclid(QS[qi] as i128));
        }
    }

    #[test]
    fn inverse_and_pow() {
        let q = Modulus::new((1 << 50) - 27).unwrap();
        for a in [1u64, 2, 12345, (1 << 49) + 17] {
            let inv = q.inv(a).unwrap();
            assert_eq!(q.mul(a, inv), 1);
            assert_eq!(q.pow(a, q.value() - 2), inv, "Fermat: q is prime");
        }
        assert!(Modulus::new(1).is_err() && Modulus::new(1 << 62).is_err());
        assert!(Modulus::new(12).unwrap().inv(4).is_err());
    }
}
