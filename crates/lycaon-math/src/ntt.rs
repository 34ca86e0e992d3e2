//! Negacyclic NTT over Z_q[X]/(X^n + 1), n = 16..65536, backed by tfhe-ntt.
//!
//! The evaluation vector is in bit-reversed order: slot k holds a(psi^(2*brv(k)+1)) for a primitive
//! 2n-th root psi chosen by the plan. tfhe-ntt was measured here against a plain Harvey/Shoup NTT
//! (implementation_notes/ntt-choice.md): 2x-7x faster, and it uses AVX-512 IFMA for primes < 2^52.

use crate::{MathError, Modulus};

/// Forward and inverse negacyclic NTT for one prime and one ring degree.
#[derive(Clone)]
pub struct NttPlan {
    plan: tfhe_ntt::prime64::Plan,
    modulus: Modulus,
}

impl std::fmt::Debug for NttPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NttPlan(n={}, q={}, ifma={})", self.n(), self.modulus.value(), self.plan.use_ifma())
    }
}

impl NttPlan {
    /// Errors unless n is a power of two in 16..=65536 and q is a prime with q = 1 mod 2n.
    pub fn new(n: usize, modulus: Modulus) -> Result<Self, MathError> {
        if !(16..=1 << 16).contains(&n) || !n.is_power_of_two() {
            return Err(MathError::InvalidDegree { n });
        }
        let q = modulus.value();
        if q % (2 * n as u64) != 1 || !crate::is_prime(q) {
            return Err(MathError::NotNttFriendly { modulus: q, n });
        }
        let plan = tfhe_ntt::prime64::Plan::try_new(n, q).ok_or(MathError::NotNttFriendly { modulus: q, n })?;
        Ok(Self { plan, modulus })
    }

    pub fn n(&self) -> usize {
        self.plan.ntt_size()
    }

    pub fn modulus(&self) -> &Modulus {
        &self.modulus
    }

    /// Whether the AVX-512 IFMA path (primes < 2^52) is in use.
    pub fn uses_ifma(&self) -> bool {
        self.plan.use_ifma()
    }

    /// Coefficients (standard order, values in [0, q)) to evaluations (bit-reversed order).
    #[inline]
    pub fn forward(&self, values: &mut [u64]) {
        let _t = crate::profile::time(crate::profile::Kernel::Ntt);
        self.plan.fwd(values);
    }

    /// Evaluations back to coefficients, including the 1/n scaling.
    #[inline]
    pub fn inverse(&self, values: &mut [u64]) {
        let _t = crate::profile::time(crate::profile::Kernel::Ntt);
        self.plan.inv(values);
        self.plan.normalize(values);
    }

    /// Evaluations back to coefficients times n (no 1/n scaling), for callers that fold the 1/n
    /// into a later constant multiplication.
    #[inline]
    pub fn inverse_unnormalized(&self, values: &mut [u64]) {
        let _t = crate::profile::time(crate::profile::Kernel::Ntt);
        self.plan.inv(values);
    }
}

/// Reverses the low `bits` bits of k.
#[inline]
pub fn bit_reverse(k: usize, bits: u32) -> usize {
    if bits == 0 { 0 } else { k.reverse_bits() >> (usize::BITS - bits) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primes::ntt_primes;

    fn negacyclic_schoolbook(a: &[u64], b: &[u64], q: &Modulus) -> Vec<u64> {
        let n = a.len();
        let mut out = vec![0u64; n];
        for i in 0..n {
            for j in 0..n {
                let prod = q.mul(a[i], b[j]);
                let k = i + j;
                if k < n { out[k] = q.add(out[k], prod) } else { out[k - n] = q.sub(out[k - n], prod) }
            }
        }
        out
    }

    #[test]
    fn ntt_multiplies_negacyclically_and_inverts() {
        for n in [16usize, 256, 1024] {
            for bits in [30u32, 50, 60] {
                let q = Modulus::new(ntt_primes(bits, n, 1, &[]).unwrap()[0]).unwrap();
                let plan = NttPlan::new(n, q).unwrap();
                let a: Vec<u64> = (0..n as u64).map(|i| q.reduce(i * 7919 + 13)).collect();
                let b: Vec<u64> = (0..n as u64).map(|i| q.reduce(i * i * 104729 + 5)).collect();
                let (mut fa, mut fb) = (a.clone(), b.clone());
                plan.forward(&mut fa);
                plan.forward(&mut fb);
                let mut prod: Vec<u64> = fa.iter().zip(&fb).map(|(&x, &y)| q.mul(x, y)).collect();
                plan.inverse(&mut prod);
                assert_eq!(prod, negacyclic_schoolbook(&a, &b, &q), "n={n} bits={bits}");
                plan.inverse(&mut fa);
                assert_eq!(fa, a);
            }
        }
    }

    #[test]
    fn evaluation_order_is_bit_reversed_odd_powers() {
        // NTT(X) lists the evaluation points; slot k must be psi^(2 brv(k) + 1) with psi = slot 0.
        let n = 64;
        let q = Modulus::new(ntt_primes(40, n, 1, &[]).unwrap()[0]).unwrap();
        let plan = NttPlan::new(n, q).unwrap();
        let mut x = vec![0u64; n];
        x[1] = 1;
        plan.forward(&mut x);
        for k in 0..n {
            assert_eq!(x[k], q.pow(x[0], 2 * bit_reverse(k, 6) as u64 + 1));
        }
    }

    #[test]
    fn rejects_bad_inputs() {
        let q = Modulus::new(ntt_primes(40, 1024, 1, &[]).unwrap()[0]).unwrap();
        assert!(NttPlan::new(1000, q).is_err());
        assert!(NttPlan::new(1 << 17, q).is_err());
        assert!(NttPlan::new(1024, Modulus::new(65539).unwrap()).is_err());
    }
}
