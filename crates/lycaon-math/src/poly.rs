//! Polynomials in R_Q = Z_Q[X]/(X^n + 1) in RNS form, limb-major; the representation (coefficient
//! or NTT) is a type parameter, and every stored residue is in [0, q_i).

use std::marker::PhantomData;
use std::sync::Arc;

use crate::{Automorphism, MathError, RnsBasis};

mod sealed {
    pub trait Sealed {}
}

/// Coefficient or evaluation (NTT) form.
pub trait Representation: sealed::Sealed + Clone + Copy + std::fmt::Debug + Send + Sync + 'static {
    const IS_NTT: bool;
    const NAME: &'static str;
}

/// Coefficient form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coeff;
/// Evaluation (NTT) form, slots in the NTT plan's bit-reversed order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ntt;

impl sealed::Sealed for Coeff {}
impl sealed::Sealed for Ntt {}
impl Representation for Coeff {
    const IS_NTT: bool = false;
    const NAME: &'static str = "coefficient";
}
impl Representation for Ntt {
    const IS_NTT: bool = true;
    const NAME: &'static str = "NTT";
}

/// An RNS polynomial: `basis.len()` limbs of n residues each.
#[derive(Clone, Debug)]
pub struct Poly<R: Representation> {
    basis: Arc<RnsBasis>,
    data: Vec<u64>,
    _repr: PhantomData<R>,
}

impl<R: Representation> PartialEq for Poly<R> {
    fn eq(&self, other: &Self) -> bool {
        self.basis.same_primes(&other.basis) && self.data == other.data
    }
}
impl<R: Representation> Eq for Poly<R> {}

impl<R: Representation> Poly<R> {
    pub fn zero(basis: &Arc<RnsBasis>) -> Self {
        Self { basis: basis.clone(), data: vec![0; basis.len() * basis.n()], _repr: PhantomData }
    }

    /// Wraps limb-major residues; errors on a wrong length or a residue >= its modulus.
    pub fn from_data(basis: &Arc<RnsBasis>, data: Vec<u64>) -> Result<Self, MathError> {
        let n = basis.n();
        if data.len() != basis.len() * n {
            return Err(MathError::LimbCount { expected: basis.len(), found: data.len() / n });
        }
        for (limb, q) in data.chunks_exact(n).zip(basis.moduli()) {
            if let Some(&bad) = limb.iter().find(|&&x| x >= q.value()) {
                return Err(MathError::ResidueOutOfRange { value: bad, modulus: q.value() });
            }
        }
        Ok(Self { basis: basis.clone(), data, _repr: PhantomData })
    }

    /// Wraps residues already known to be reduced (internal fast path).
    pub(crate) fn from_reduced(basis: &Arc<RnsBasis>, data: Vec<u64>) -> Self {
        debug_assert_eq!(data.len(), basis.len() * basis.n());
        Self { basis: basis.clone(), data, _repr: PhantomData }
    }

    /// Reinterprets data produced by a kernel that guarantees reduced residues of this basis.
    pub fn from_kernel_output(basis: &Arc<RnsBasis>, data: Vec<u64>) -> Self {
        assert_eq!(data.len(), basis.len() * basis.n(), "kernel output length");
        Self::from_reduced(basis, data)
    }

    pub fn basis(&self) -> &Arc<RnsBasis> {
        &self.basis
    }

    pub fn n(&self) -> usize {
        self.basis.n()
    }

    pub fn num_limbs(&self) -> usize {
        self.basis.len()
    }

    pub fn data(&self) -> &[u64] {
        &self.data
    }

    /// Mutable residues; callers must keep every residue below its modulus.
    pub fn data_mut(&mut self) -> &mut [u64] {
        &mut self.data
    }

    pub fn into_data(self) -> Vec<u64> {
        self.data
    }

    pub fn limb(&self, i: usize) -> &[u64] {
        let n = self.n();
        &self.data[i * n..(i + 1) * n]
    }

    pub fn limb_mut(&mut self, i: usize) -> &mut [u64] {
        let n = self.n();
        &mut self.data[i * n..(i + 1) * n]
    }

    fn check_same_basis(&self, other: &Self) -> Result<(), MathError> {
        if !Arc::ptr_eq(&self.basis, &other.basis) && !self.basis.same_primes(&other.basis) {
            return Err(MathError::BasisMismatch { lhs: self.num_limbs(), rhs: other.num_limbs() });
        }
        Ok(())
    }

    fn zip_limbs(&mut self, other: &Self, f: impl Fn(&crate::Modulus, u64, u64) -> u64) -> Result<(), MathError> {
        self.check_same_basis(other)?;
        let n = self.n();
        for ((a, b), q) in self.data.chunks_exact_mut(n).zip(other.data.chunks_exact(n)).zip(self.basis.moduli()) {
            a.iter_mut().zip(b).for_each(|(x, &y)| *x = f(q, *x, y));
        }
        Ok(())
    }

    pub fn add_assign(&mut self, other: &Self) -> Result<(), MathError> {
        self.zip_limbs(other, |q, a, b| q.add(a, b))
    }

    pub fn sub_assign(&mut self, other: &Self) -> Result<(), MathError> {
        self.zip_limbs(other, |q, a, b| q.sub(a, b))
    }

    pub fn neg_assign(&mut self) {
        let n = self.n();
        for (limb, q) in self.data.chunks_exact_mut(n).zip(self.basis.moduli()) {
            limb.iter_mut().for_each(|x| *x = q.neg(*x));
        }
    }

    /// Multiplies every coefficient by an integer scalar (reduced per limb).
    pub fn mul_scalar_assign(&mut self, scalar: u64) {
        let n = self.n();
        for (limb, q) in self.data.chunks_exact_mut(n).zip(self.basis.moduli()) {
            let c = crate::ShoupConstant::new(scalar, q);
            limb.iter_mut().for_each(|x| *x = q.mul_shoup(*x, c.value, c.shoup));
        }
    }

    /// Multiplies limb i by its own constant `scalars[i]` (already reduced mod q_i).
    pub fn mul_limb_scalars_assign(&mut self, scalars: &[u64]) {
        let n = self.n();
        for ((limb, q), &s) in self.data.chunks_exact_mut(n).zip(self.basis.moduli()).zip(scalars) {
            let c = crate::ShoupConstant::new(s, q);
            limb.iter_mut().for_each(|x| *x = q.mul_shoup(*x, c.value, c.shoup));
        }
    }

    /// A new polynomial with limb i multiplied by `scalars[i]` (reduced mod q_i), in one pass.
    pub fn mul_limb_scalars(&self, scalars: &[u64]) -> Self {
        let n = self.n();
        let mut data = Vec::with_capacity(self.data.len());
        for ((limb, q), &s) in self.data.chunks_exact(n).zip(self.basis.moduli()).zip(scalars) {
            let c = crate::ShoupConstant::new(s, q);
            data.extend(limb.iter().map(|&x| q.mul_shoup(x, c.value, c.shoup)));
        }
        Self::from_reduced(&self.basis, data)
    }

    /// Keeps the first `count` limbs, moving to the given prefix basis of the current one.
    pub fn truncate_to(&mut self, basis: &Arc<RnsBasis>) -> Result<(), MathError> {
        let count = basis.len();
        if count > self.num_limbs() || self.basis.moduli()[..count] != *basis.moduli() {
            return Err(MathError::BasisMismatch { lhs: self.num_limbs(), rhs: count });
        }
        self.data.truncate(count * self.n());
        self.basis = basis.clone();
        Ok(())
    }

    /// The image under X -> X^g, in the same representation.
    pub fn automorphism(&self, auto: &Automorphism) -> Result<Self, MathError> {
        if auto.n() != self.n() {
            return Err(MathError::InvalidGaloisElement { galois_element: auto.galois_element(), n: self.n() });
        }
        let mut out = Self::zero(&self.basis);
        let n = self.n();
        for ((src, dst), q) in self.data.chunks_exact(n).zip(out.data.chunks_exact_mut(n)).zip(self.basis.moduli()) {
            if R::IS_NTT {
                auto.apply_ntt(src, dst);
            } else {
                auto.apply_coeff(src, dst, q.value());
            }
        }
        Ok(out)
    }
}

impl Poly<Coeff> {
    /// Residues of small signed integer coefficients (one value per coefficient).
    pub fn from_signed(basis: &Arc<RnsBasis>, coeffs: &[i64]) -> Result<Self, MathError> {
        let n = basis.n();
        if coeffs.len() != n {
            return Err(MathError::LimbCount { expected: n, found: coeffs.len() });
        }
        let mut data = vec![0u64; basis.len() * n];
        for (limb, q) in data.chunks_exact_mut(n).zip(basis.moduli()) {
            limb.iter_mut().zip(coeffs).for_each(|(x, &c)| *x = q.reduce_i64(c));
        }
        Ok(Self::from_reduced(basis, data))
    }

    /// Forward NTT of every limb.
    pub fn ntt(mut self) -> Poly<Ntt> {
        let n = self.n();
        for (limb, plan) in self.data.chunks_exact_mut(n).zip(self.basis.plans()) {
            plan.forward(limb);
        }
        Poly { basis: self.basis, data: self.data, _repr: PhantomData }
    }
}

impl Poly<Ntt> {
    /// Inverse NTT of every limb.
    pub fn intt(mut self) -> Poly<Coeff> {
        let n = self.n();
        for (limb, plan) in self.data.chunks_exact_mut(n).zip(self.basis.plans()) {
            plan.inverse(limb);
        }
        Poly { basis: self.basis, data: self.data, _repr: PhantomData }
    }

    /// Point-wise product (negacyclic convolution of the coefficient forms).
    pub fn mul_assign(&mut self, other: &Self) -> Result<(), MathError> {
        self.zip_limbs(other, |q, a, b| q.mul(a, b))
    }

    /// self += a * b point-wise.
    pub fn mul_add_assign(&mut self, a: &Self, b: &Self) -> Result<(), MathError> {
        a.check_same_basis(b)?;
        self.check_same_basis(a)?;
        let n = self.n();
        for (((acc, x), y), q) in
            self.data.chunks_exact_mut(n).zip(a.data.chunks_exact(n)).zip(b.data.chunks_exact(n)).zip(self.basis.moduli())
        {
            for ((s, &u), &v) in acc.iter_mut().zip(x).zip(y) {
                *s = q.reduce_u128(*s as u128 + u as u128 * v as u128);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ntt_moduli, rotation_galois_element};

    #[test]
    fn representation_round_trip_and_product() {
        let n = 64;
        let basis = RnsBasis::new(n, &ntt_moduli(&[40, 45, 50], n, &[]).unwrap()).unwrap();
        let a = Poly::from_signed(&basis, &(0..n as i64).map(|i| i - 20).collect::<Vec<_>>()).unwrap();
        let mut x_pow = vec![0i64; n];
        x_pow[1] = 1;
        let x = Poly::from_signed(&basis, &x_pow).unwrap();
        let mut prod = a.clone().ntt();
        prod.mul_assign(&x.ntt()).unwrap();
        let prod = prod.intt();
        // a * X shifts coefficients up by one and wraps the top one with a sign flip.
        let mut want = vec![0i64; n];
        want[0] = -(n as i64 - 1 - 20);
        for i in 1..n {
            want[i] = i as i64 - 1 - 20;
        }
        assert_eq!(prod, Poly::from_signed(&basis, &want).unwrap());
        assert_eq!(a.clone().ntt().intt(), a);
        let auto = Automorphism::new(rotation_galois_element(3, n), n).unwrap();
        assert_eq!(a.automorphism(&auto).unwrap().ntt(), a.clone().ntt().automorphism(&auto).unwrap());
        assert!(Poly::<Coeff>::from_data(&basis, vec![u64::MAX; 3 * n]).is_err());
    }
}
