//! The rings additive shares live in: Z_{2^l} (l <= 64, the fixed-point ring of 2PC frameworks)
//! and Z_p for an odd prime p (the BFV plaintext modulus of the hybrid mode, so a linear layer's
//! decrypted output is already a share). Values are u64 in [0, M); a value at or above M/2
//! stands for a negative number (for odd p: above (p - 1) / 2).

use lycaon_math::{is_prime, Modulus};

use crate::{MpcError, Result};

/// The modulus M of a share ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareRing {
    /// Z_{2^bits}, 1 <= bits <= 64.
    PowerOfTwo { bits: u32 },
    /// Z_p, p an odd prime below 2^62.
    Prime(Modulus),
}

impl ShareRing {
    pub fn power_of_two(bits: u32) -> Result<Self> {
        if !(1..=64).contains(&bits) {
            return Err(MpcError::InvalidArgument(format!("a ring Z_2^l needs 1 <= l <= 64, not l = {bits}")));
        }
        Ok(ShareRing::PowerOfTwo { bits })
    }

    pub fn prime(p: u64) -> Result<Self> {
        if p < 3 || !is_prime(p) || p >> 62 != 0 {
            return Err(MpcError::InvalidArgument(format!("a prime share ring needs an odd prime below 2^62, not {p}")));
        }
        Ok(ShareRing::Prime(Modulus::new(p).map_err(|e| MpcError::InvalidArgument(e.to_string()))?))
    }

    /// Bits needed to write any value in [0, M): the size of one share on the wire.
    pub fn bits(&self) -> u32 {
        match self {
            ShareRing::PowerOfTwo { bits } => *bits,
            ShareRing::Prime(p) => p.bits(),
        }
    }

    /// M as a 128-bit integer (2^64 fits).
    pub fn modulus(&self) -> u128 {
        match self {
            ShareRing::PowerOfTwo { bits } => 1u128 << bits,
            ShareRing::Prime(p) => p.value() as u128,
        }
    }

    /// The largest non-negative value: M/2 - 1 for 2^l, (p - 1)/2 for p.
    pub fn max_positive(&self) -> u64 {
        match self {
            ShareRing::PowerOfTwo { bits } => ((1u128 << (bits - 1)) - 1) as u64,
            ShareRing::Prime(p) => (p.value() - 1) / 2,
        }
    }

    fn mask(bits: u32) -> u64 {
        if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        }
    }

    #[inline]
    pub fn reduce(&self, x: u64) -> u64 {
        match self {
            ShareRing::PowerOfTwo { bits } => x & Self::mask(*bits),
            ShareRing::Prime(p) => p.reduce(x),
        }
    }

    #[inline]
    pub fn add(&self, a: u64, b: u64) -> u64 {
        match self {
            ShareRing::PowerOfTwo { bits } => a.wrapping_add(b) & Self::mask(*bits),
            ShareRing::Prime(p) => p.add(a, b),
        }
    }

    #[inline]
    pub fn sub(&self, a: u64, b: u64) -> u64 {
        match self {
            ShareRing::PowerOfTwo { bits } => a.wrapping_sub(b) & Self::mask(*bits),
            ShareRing::Prime(p) => p.sub(a, b),
        }
    }

    #[inline]
    pub fn neg(&self, a: u64) -> u64 {
        self.sub(0, a)
    }

    #[inline]
    pub fn mul(&self, a: u64, b: u64) -> u64 {
        match self {
            ShareRing::PowerOfTwo { bits } => a.wrapping_mul(b) & Self::mask(*bits),
            ShareRing::Prime(p) => p.mul(a, b),
        }
    }

    /// A signed integer as a ring element (two's complement for 2^l, x mod p for p).
    pub fn from_signed(&self, x: i64) -> u64 {
        match self {
            ShareRing::PowerOfTwo { bits } => (x as u64) & Self::mask(*bits),
            ShareRing::Prime(p) => p.reduce_i64(x),
        }
    }

    /// A ring element as the signed integer it stands for, in [-M/2, M/2).
    pub fn to_signed(&self, x: u64) -> i64 {
        if x <= self.max_positive() {
            x as i64
        } else {
            (x as i128 - self.modulus() as i128) as i64
        }
    }

    /// A uniformly random ring element from 64 (or 128 for primes) random bits.
    #[inline]
    pub fn from_random(&self, r: u128) -> u64 {
        match self {
            ShareRing::PowerOfTwo { bits } => (r as u64) & Self::mask(*bits),
            ShareRing::Prime(p) => (r % p.value() as u128) as u64,
        }
    }

    /// Checks that every value of a share vector is in [0, M).
    pub fn check(&self, what: &str, values: &[u64]) -> Result<()> {
        if let Some(i) = values.iter().position(|&v| v as u128 >= self.modulus()) {
            // The value itself is not printed: it may be a share.
            return Err(MpcError::InvalidArgument(format!("{what} at index {i} is not below the ring modulus {}", self.modulus())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_and_signs() {
        let r = ShareRing::power_of_two(8).unwrap();
        assert_eq!(r.add(200, 100), 44);
        assert_eq!(r.to_signed(255), -1);
        assert_eq!(r.to_signed(127), 127);
        assert_eq!(r.to_signed(128), -128);
        assert_eq!(r.from_signed(-3), 253);
        let r64 = ShareRing::power_of_two(64).unwrap();
        assert_eq!(r64.sub(0, 1), u64::MAX);
        assert_eq!(r64.to_signed(u64::MAX), -1);
        let p = ShareRing::prime(1_048_571).unwrap();
        assert_eq!(p.max_positive(), 524_285);
        assert_eq!(p.to_signed(524_286), -524_285);
        assert_eq!(p.from_signed(-1), 1_048_570);
        assert_eq!(p.bits(), 20);
        assert!(ShareRing::prime(1 << 20).is_err());
        assert!(ShareRing::power_of_two(65).is_err());
        assert!(p.check("x", &[1_048_571]).is_err());
    }
}
