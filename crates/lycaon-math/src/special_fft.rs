//! The special FFT of CKKS's canonical embedding (HEAAN's fftSpecial): between the n/2 (or
//! fewer) complex slot values of a message and its coefficients. The encoders of lycaon-ckks and
//! of the resident backends run this one implementation (or, on a device, its exact operations
//! in the same order).

use num_complex::Complex64;

/// The special FFT of the canonical embedding (Cheon et al.; HEAAN's fftSpecial): slot j of an
/// s-slot message is m(zeta^(5^j)) for zeta = exp(2 pi i / 4s) acting on Y = X^(n / 2s).
#[derive(Debug)]
pub struct SpecialFft {
    /// 2n.
    m: usize,
    /// 5^j mod 2n for j < n/2.
    rot_group: Vec<usize>,
    /// exp(2 pi i k / 2n) for k in 0..=2n.
    ksi: Vec<Complex64>,
}

impl SpecialFft {
    /// 2n: the roots' order.
    pub fn m(&self) -> usize {
        self.m
    }

    /// 5^j mod 2n for j < n/2.
    pub fn rot_group(&self) -> &[usize] {
        &self.rot_group
    }

    /// exp(2 pi i k / 2n) for k in 0..=2n.
    pub fn roots(&self) -> &[Complex64] {
        &self.ksi
    }

    /// The transform for ring degree n (slots up to n/2).
    pub fn new(n: usize) -> Self {
        let m = 2 * n;
        let mut rot_group = Vec::with_capacity(n / 2);
        let mut g = 1usize;
        for _ in 0..n / 2 {
            rot_group.push(g);
            g = g * 5 % m;
        }
        // Each root computed directly (no repeated products) for full double precision.
        let ksi = (0..=m).map(|k| Complex64::from_polar(1.0, 2.0 * std::f64::consts::PI * k as f64 / m as f64)).collect();
        Self { m, rot_group, ksi }
    }

    fn bit_reverse(values: &mut [Complex64]) {
        let n = values.len();
        let mut j = 0usize;
        for i in 1..n {
            let mut bit = n >> 1;
            while j & bit != 0 {
                j ^= bit;
                bit >>= 1;
            }
            j ^= bit;
            if i < j {
                values.swap(i, j);
            }
        }
    }

    /// Coefficients (as n/2 complex values, or s of them for sparse slots) to slot values.
    pub fn forward(&self, values: &mut [Complex64]) {
        let size = values.len();
        Self::bit_reverse(values);
        let mut len = 2;
        while len <= size {
            let (lenh, lenq) = (len / 2, 4 * len);
            let step = self.m / lenq;
            for chunk in values.chunks_exact_mut(len) {
                let (lo, hi) = chunk.split_at_mut(lenh);
                for j in 0..lenh {
                    let idx = (self.rot_group[j] % lenq) * step;
                    let u = lo[j];
                    let v = hi[j] * self.ksi[idx];
                    lo[j] = u + v;
                    hi[j] = u - v;
                }
            }
            len *= 2;
        }
    }

    /// Slot values to coefficients: the inverse of [`Self::forward`], including the 1/size.
    pub fn inverse(&self, values: &mut [Complex64]) {
        let size = values.len();
        let mut len = size;
        while len >= 2 {
            let (lenh, lenq) = (len / 2, 4 * len);
            let step = self.m / lenq;
            for chunk in values.chunks_exact_mut(len) {
                let (lo, hi) = chunk.split_at_mut(lenh);
                for j in 0..lenh {
                    let idx = (lenq - self.rot_group[j] % lenq) * step;
                    let u = lo[j] + hi[j];
                    let v = (lo[j] - hi[j]) * self.ksi[idx];
                    lo[j] = u;
                    hi[j] = v;
                }
            }
            len /= 2;
        }
        Self::bit_reverse(values);
        let inv = 1.0 / size as f64;
        values.iter_mut().for_each(|v| *v *= inv);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_fft_matches_the_canonical_embedding() {
        // Full slots: slot j = sum_k v_k zeta^(5^j k) with zeta = exp(2 pi i / 2n).
        let n = 64;
        let fft = SpecialFft::new(n);
        let v: Vec<Complex64> = (0..n / 2).map(|k| Complex64::new(k as f64 * 0.1 - 1.0, (k * k) as f64 * 0.01)).collect();
        let mut got = v.clone();
        fft.forward(&mut got);
        for (j, slot) in got.iter().enumerate() {
            let root = fft.roots()[fft.rot_group()[j]];
            let mut want = Complex64::new(0.0, 0.0);
            let mut pw = Complex64::new(1.0, 0.0);
            for x in &v {
                want += x * pw;
                pw *= root;
            }
            assert!((want - slot).norm() < 1e-9, "slot {j}");
        }
        fft.inverse(&mut got);
        for (a, b) in got.iter().zip(&v) {
            assert!((a - b).norm() < 1e-12);
        }
    }
}
