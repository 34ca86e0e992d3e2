//! RNS bases Q = q_0 ... q_{L-1} of NTT-friendly primes: CRT composition and base conversion.
//!
//! Fast base conversion (Bajard et al. 2016) maps x mod Q to x + u Q mod P with 0 <= u < L; the
//! exact variant (Halevi-Polyakov-Shoup 2019) corrects u with a floating-point estimate and
//! returns the centred lift of x, which is exact unless x lies within about L 2^-53 Q of Q/2.

use std::sync::Arc;

use num_bigint::{BigInt, BigUint};
use num_traits::{One, ToPrimitive, Zero};

use crate::{MathError, Modulus, NttPlan, ShoupConstant};

/// An RNS basis at one ring degree, with NTT plans shared between bases that have a prime in common.
#[derive(Debug)]
pub struct RnsBasis {
    n: usize,
    plans: Vec<Arc<NttPlan>>,
    moduli: Vec<Modulus>,
    product: BigUint,
    /// (Q/q_i)^{-1} mod q_i.
    punctured_inv: Vec<ShoupConstant>,
}

impl RnsBasis {
    /// Errors if the list is empty, a prime repeats, or a prime is not NTT-friendly for n.
    pub fn new(n: usize, moduli: &[Modulus]) -> Result<Arc<Self>, MathError> {
        let plans = moduli.iter().map(|&q| NttPlan::new(n, q).map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
        Self::from_plans(plans)
    }

    /// Builds a basis from existing plans (sharing their twiddle tables).
    pub fn from_plans(plans: Vec<Arc<NttPlan>>) -> Result<Arc<Self>, MathError> {
        let Some(first) = plans.first() else { return Err(MathError::EmptyBasis) };
        let n = first.n();
        let moduli: Vec<Modulus> = plans.iter().map(|p| *p.modulus()).collect();
        for (i, p) in plans.iter().enumerate() {
            if p.n() != n {
                return Err(MathError::InvalidDegree { n: p.n() });
            }
            if moduli[..i].contains(&moduli[i]) {
                return Err(MathError::RepeatedModulus { modulus: moduli[i].value() });
            }
        }
        let product = moduli.iter().fold(BigUint::one(), |acc, q| acc * q.value());
        let punctured_inv = moduli
            .iter()
            .map(|q| {
                let punctured = ((&product / q.value()) % q.value()).to_u64().unwrap_or(0);
                q.inv(punctured).map(|inv| ShoupConstant::new(inv, q))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(Self { n, plans, moduli, product, punctured_inv }))
    }

    pub fn n(&self) -> usize {
        self.n
    }

    pub fn len(&self) -> usize {
        self.moduli.len()
    }

    pub fn is_empty(&self) -> bool {
        self.moduli.is_empty()
    }

    pub fn moduli(&self) -> &[Modulus] {
        &self.moduli
    }

    pub fn plans(&self) -> &[Arc<NttPlan>] {
        &self.plans
    }

    /// Q as a big integer.
    pub fn product(&self) -> &BigUint {
        &self.product
    }

    /// log2(Q).
    pub fn log2_product(&self) -> f64 {
        self.moduli.iter().map(|q| (q.value() as f64).log2()).sum()
    }

    /// (Q/q_i)^{-1} mod q_i with its Shoup constant.
    pub fn punctured_inverse(&self, i: usize) -> ShoupConstant {
        self.punctured_inv[i]
    }

    /// The basis of the first `count` primes (count >= 1), sharing plans.
    pub fn prefix(&self, count: usize) -> Result<Arc<Self>, MathError> {
        if count == 0 || count > self.len() {
            return Err(MathError::LimbCount { expected: self.len(), found: count });
        }
        Self::from_plans(self.plans[..count].to_vec())
    }

    /// This basis followed by `other`'s primes (which must be new), sharing plans.
    pub fn concat(&self, other: &RnsBasis) -> Result<Arc<Self>, MathError> {
        Self::from_plans(self.plans.iter().chain(other.plans.iter()).cloned().collect())
    }

    /// Whether both bases hold the same primes in the same order.
    pub fn same_primes(&self, other: &RnsBasis) -> bool {
        self.n == other.n && self.moduli == other.moduli
    }

    /// CRT: the unique x in [0, Q) with the given residues.
    pub fn compose(&self, residues: &[u64]) -> BigUint {
        let mut x = BigUint::zero();
        for (i, (&r, q)) in residues.iter().zip(&self.moduli).enumerate() {
            let y = q.mul_shoup(r, self.punctured_inv[i].value, self.punctured_inv[i].shoup);
            x += (&self.product / q.value()) * y;
        }
        x % &self.product
    }

    /// CRT composition into the centred range (-Q/2, Q/2].
    pub fn compose_centered(&self, residues: &[u64]) -> BigInt {
        let x = BigInt::from(self.compose(residues));
        let q = BigInt::from(self.product.clone());
        if &x + &x > q { x - q } else { x }
    }

    /// Residues of a (possibly negative) big integer.
    pub fn decompose(&self, x: &BigInt) -> Vec<u64> {
        self.moduli
            .iter()
            .map(|q| {
                let m = BigInt::from(q.value());
                let r = ((x % &m) + &m) % &m;
                r.to_u64().unwrap_or(0)
            })
            .collect()
    }
}

/// Conversion of polynomials in coefficient form from basis Q to basis P.
#[derive(Debug)]
pub struct BaseConverter {
    from: Arc<RnsBasis>,
    to: Arc<RnsBasis>,
    /// (Q/q_i) mod p_j, indexed [j][i].
    punctured_mod_to: Vec<Vec<u64>>,
    /// Q mod p_j.
    product_mod_to: Vec<u64>,
    inv_moduli_f64: Vec<f64>,
}

impl BaseConverter {
    pub fn new(from: Arc<RnsBasis>, to: Arc<RnsBasis>) -> Result<Self, MathError> {
        if from.n() != to.n() {
            return Err(MathError::InvalidDegree { n: to.n() });
        }
        let punctured_mod_to = to
            .moduli()
            .iter()
            .map(|p| from.moduli().iter().map(|q| ((from.product() / q.value()) % p.value()).to_u64().unwrap_or(0)).collect())
            .collect();
        let product_mod_to = to.moduli().iter().map(|p| (from.product() % p.value()).to_u64().unwrap_or(0)).collect();
        let inv_moduli_f64 = from.moduli().iter().map(|q| 1.0 / q.value() as f64).collect();
        Ok(Self { from, to, punctured_mod_to, product_mod_to, inv_moduli_f64 })
    }

    pub fn from_basis(&self) -> &Arc<RnsBasis> {
        &self.from
    }

    pub fn to_basis(&self) -> &Arc<RnsBasis> {
        &self.to
    }

    /// y_i = x_i (Q/q_i)^{-1} mod q_i, limb-major, written into `scaled`.
    fn scale_inputs(&self, input: &[u64], scaled: &mut [u64]) {
        let n = self.from.n();
        for (i, q) in self.from.moduli().iter().enumerate() {
            let c = self.from.punctured_inverse(i);
            for (y, &x) in scaled[i * n..(i + 1) * n].iter_mut().zip(&input[i * n..(i + 1) * n]) {
                *y = q.mul_shoup(x, c.value, c.shoup);
            }
        }
    }

    fn accumulate(&self, scaled: &[u64], output: &mut [u64], correction: Option<&[u64]>) {
        let n = self.from.n();
        let mut acc = vec![0u128; n];
        for (j, p) in self.to.moduli().iter().enumerate() {
            acc.iter_mut().for_each(|a| *a = 0);
            for (i, &m) in self.punctured_mod_to[j].iter().enumerate() {
                for (a, &y) in acc.iter_mut().zip(&scaled[i * n..(i + 1) * n]) {
                    *a += y as u128 * m as u128;
                }
            }
            let out = &mut output[j * n..(j + 1) * n];
            match correction {
                None => out.iter_mut().zip(&acc).for_each(|(o, &a)| *o = p.reduce_u128(a)),
                Some(v) => {
                    let qp = self.product_mod_to[j];
                    for ((o, &a), &vk) in out.iter_mut().zip(&acc).zip(v) {
                        *o = p.sub(p.reduce_u128(a), p.mul(vk, qp));
                    }
                }
            }
        }
    }

    fn check_lengths(&self, input: &[u64], output: &[u64]) -> Result<(), MathError> {
        let n = self.from.n();
        if input.len() != self.from.len() * n {
            return Err(MathError::LimbCount { expected: self.from.len(), found: input.len() / n.max(1) });
        }
        if output.len() != self.to.len() * n {
            return Err(MathError::LimbCount { expected: self.to.len(), found: output.len() / n.max(1) });
        }
        Ok(())
    }

    /// Fast conversion: writes x + u Q mod p_j for some 0 <= u < L (Bajard et al.).
    pub fn convert_approximate(&self, input: &[u64], output: &mut [u64]) -> Result<(), MathError> {
        self.check_lengths(input, output)?;
        if self.from.len() == 1 {
            // One source prime: x itself is the representative (u = 0), so reduce it per target.
            let n = self.from.n();
            for (out, p) in output.chunks_exact_mut(n).zip(self.to.moduli()) {
                out.iter_mut().zip(input).for_each(|(o, &x)| *o = p.reduce(x));
            }
            return Ok(());
        }
        let mut scaled = vec![0u64; input.len()];
        self.scale_inputs(input, &mut scaled);
        self.accumulate(&scaled, output, None);
        Ok(())
    }

    /// Exact conversion of the centred lift of x (Halevi-Polyakov-Shoup): writes x' mod p_j with
    /// x' = x mod Q and x' in (-Q/2, Q/2].
    pub fn convert_centered(&self, input: &[u64], output: &mut [u64]) -> Result<(), MathError> {
        self.check_lengths(input, output)?;
        let n = self.from.n();
        let mut scaled = vec![0u64; input.len()];
        self.scale_inputs(input, &mut scaled);
        let mut fraction_sum = vec![0f64; n];
        for (i, &inv_q) in self.inv_moduli_f64.iter().enumerate() {
            for (s, &y) in fraction_sum.iter_mut().zip(&scaled[i * n..(i + 1) * n]) {
                *s += y as f64 * inv_q;
            }
        }
        let v: Vec<u64> = fraction_sum.iter().map(|&s| s.round() as u64).collect();
        self.accumulate(&scaled, output, Some(&v));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ntt_moduli;

    fn bases(n: usize) -> (Arc<RnsBasis>, Arc<RnsBasis>) {
        let q = ntt_moduli(&[50, 50, 49], n, &[]).unwrap();
        let taken: Vec<u64> = q.iter().map(|m| m.value()).collect();
        let p = ntt_moduli(&[51, 51, 51, 40], n, &taken).unwrap();
        (RnsBasis::new(n, &q).unwrap(), RnsBasis::new(n, &p).unwrap())
    }

    #[test]
    fn crt_round_trip() {
        let (q, _) = bases(16);
        for x in [BigInt::from(0), BigInt::from(-1), BigInt::from(123456789u64) * BigInt::from(u64::MAX), BigInt::from(-77)] {
            let r = q.decompose(&x);
            assert_eq!(q.compose_centered(&r), x);
        }
    }

    #[test]
    fn conversions_match_big_integer_arithmetic() {
        let n = 16;
        let (q, p) = bases(n);
        let conv = BaseConverter::new(q.clone(), p.clone()).unwrap();
        // Coefficients spread over (-Q/2, Q/2], including values near the ends.
        let big_q = BigInt::from(q.product().clone());
        let xs: Vec<BigInt> = (0..n as i64)
            .map(|k| (&big_q * BigInt::from(2 * k - n as i64 + 1)) / BigInt::from(2 * n as i64) + BigInt::from(k * 1000 - 7))
            .collect();
        let mut input = vec![0u64; q.len() * n];
        for (k, x) in xs.iter().enumerate() {
            for (i, r) in q.decompose(x).into_iter().enumerate() {
                input[i * n + k] = r;
            }
        }
        let mut exact = vec![0u64; p.len() * n];
        conv.convert_centered(&input, &mut exact).unwrap();
        let mut approx = vec![0u64; p.len() * n];
        conv.convert_approximate(&input, &mut approx).unwrap();
        for (k, x) in xs.iter().enumerate() {
            let want = p.decompose(x);
            let got: Vec<u64> = (0..p.len()).map(|j| exact[j * n + k]).collect();
            assert_eq!(got, want, "coefficient {k}");
            // The approximate result differs from x by a multiple u Q with 0 <= u <= L.
            let got_approx = p.compose_centered(&(0..p.len()).map(|j| approx[j * n + k]).collect::<Vec<_>>());
            let x_pos = if x.sign() == num_bigint::Sign::Minus { x + &big_q } else { x.clone() };
            let u = (&got_approx - &x_pos) / &big_q;
            assert!(u >= BigInt::from(0) && u <= BigInt::from(q.len() as i64), "u = {u}");
            assert_eq!(&got_approx - &x_pos - &u * &big_q, BigInt::from(0));
        }
    }
}
