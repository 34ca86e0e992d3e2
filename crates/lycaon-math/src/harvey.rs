//! A plain negacyclic NTT (Harvey 2014: Shoup multiplications, lazy butterflies in [0, 4q)),
//! kept as an independent oracle for tests and as the yardstick that justified using tfhe-ntt
//! (implementation_notes/ntt-choice.md). Output is in bit-reversed order, like the fast plan's.

use crate::{bit_reverse, MathError, Modulus};

#[derive(Clone, Debug)]
pub struct HarveyNtt {
    q: Modulus,
    n: usize,
    /// psi^brv(i) and their Shoup constants, for the forward transform.
    roots: Vec<u64>,
    roots_shoup: Vec<u64>,
    /// psi^-brv(i) for the inverse, and n^{-1}.
    inv_roots: Vec<u64>,
    inv_roots_shoup: Vec<u64>,
    n_inv: u64,
    n_inv_shoup: u64,
}

impl HarveyNtt {
    /// Needs q prime, q = 1 mod 2n, q < 2^62.
    pub fn new(n: usize, q: Modulus) -> Result<Self, MathError> {
        let qv = q.value();
        if !n.is_power_of_two() || n < 2 || qv % (2 * n as u64) != 1 || !crate::is_prime(qv) {
            return Err(MathError::NotNttFriendly { modulus: qv, n });
        }
        // A primitive 2n-th root: g^((q-1)/2n) for a g whose power has order exactly 2n.
        let psi = (2..qv)
            .map(|g| q.pow(g, (qv - 1) / (2 * n as u64)))
            .find(|&r| q.pow(r, n as u64) == qv - 1)
            .ok_or(MathError::NotNttFriendly { modulus: qv, n })?;
        let psi_inv = q.inv(psi)?;
        let log_n = n.trailing_zeros();
        let table = |base: u64| -> Vec<u64> { (0..n).map(|i| q.pow(base, bit_reverse(i, log_n) as u64)).collect() };
        let roots = table(psi);
        let inv_roots = table(psi_inv);
        let n_inv = q.inv(n as u64)?;
        Ok(Self {
            roots_shoup: roots.iter().map(|&r| q.shoup(r)).collect(),
            inv_roots_shoup: inv_roots.iter().map(|&r| q.shoup(r)).collect(),
            roots,
            inv_roots,
            n_inv,
            n_inv_shoup: q.shoup(n_inv),
            q,
            n,
        })
    }

    /// a * w mod q lazily: result in [0, 2q).
    #[inline]
    fn mul_lazy(&self, a: u64, w: u64, ws: u64) -> u64 {
        let qh = ((a as u128 * ws as u128) >> 64) as u64;
        a.wrapping_mul(w).wrapping_sub(qh.wrapping_mul(self.q.value()))
    }

    pub fn forward(&self, a: &mut [u64]) {
        let q = self.q.value();
        let two_q = 2 * q;
        let mut t = self.n;
        let mut m = 1;
        while m < self.n {
            t /= 2;
            for i in 0..m {
                let (w, ws) = (self.roots[m + i], self.roots_shoup[m + i]);
                let (lo, hi) = a[2 * i * t..2 * i * t + 2 * t].split_at_mut(t);
                for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                    let mut u = *x;
                    if u >= two_q {
                        u -= two_q;
                    }
                    let v = self.mul_lazy(*y, w, ws);
                    *x = u + v;
                    *y = u + two_q - v;
                }
            }
            m *= 2;
        }
        for x in a.iter_mut() {
            let mut v = *x;
            if v >= two_q {
                v -= two_q;
            }
            if v >= q {
                v -= q;
            }
            *x = v;
        }
    }

    pub fn inverse(&self, a: &mut [u64]) {
        let q = self.q.value();
        let two_q = 2 * q;
        let mut t = 1;
        let mut m = self.n;
        while m > 1 {
            let h = m / 2;
            for i in 0..h {
                let (w, ws) = (self.inv_roots[h + i], self.inv_roots_shoup[h + i]);
                let (lo, hi) = a[2 * i * t..2 * i * t + 2 * t].split_at_mut(t);
                for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                    let (u, v) = (*x, *y);
                    let mut s = u + v;
                    if s >= two_q {
                        s -= two_q;
                    }
                    *x = s;
                    *y = self.mul_lazy(u + two_q - v, w, ws);
                }
            }
            t *= 2;
            m = h;
        }
        for x in a.iter_mut() {
            let v = self.mul_lazy(*x, self.n_inv, self.n_inv_shoup);
            *x = if v >= q { v - q } else { v };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ntt_primes, NttPlan};

    #[test]
    fn agrees_with_the_fast_plan_on_products() {
        for (n, bits) in [(16usize, 30u32), (1024, 50), (4096, 60)] {
            let q = Modulus::new(ntt_primes(bits, n, 1, &[]).unwrap()[0]).unwrap();
            let (h, fast) = (HarveyNtt::new(n, q).unwrap(), NttPlan::new(n, q).unwrap());
            let a: Vec<u64> = (0..n as u64).map(|i| q.reduce(i.wrapping_mul(0x9E3779B97F4A7C15))).collect();
            let b: Vec<u64> = (0..n as u64).map(|i| q.reduce(i * i + 3)).collect();
            let product = |fwd: &dyn Fn(&mut [u64]), inv: &dyn Fn(&mut [u64])| {
                let (mut x, mut y) = (a.clone(), b.clone());
                fwd(&mut x);
                fwd(&mut y);
                let mut z: Vec<u64> = x.iter().zip(&y).map(|(&u, &v)| q.mul(u, v)).collect();
                inv(&mut z);
                z
            };
            let slow = product(&|v| h.forward(v), &|v| h.inverse(v));
            let quick = product(&|v| fast.forward(v), &|v| fast.inverse(v));
            assert_eq!(slow, quick, "n={n} bits={bits}");
            let mut r = a.clone();
            h.forward(&mut r);
            h.inverse(&mut r);
            assert_eq!(r, a);
        }
    }
}
