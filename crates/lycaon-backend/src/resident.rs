//! Polynomials that stay in a backend's memory between operations (a GPU's, for the CUDA backend):
//! uploaded once at a session's boundary, computed on where they live, downloaded once. The
//! [`Backend`](crate::Backend) trait moves every operand in and out per call; this one never does.
//!
//! The operations are those a CKKS evaluator needs between two boundaries: element-wise
//! arithmetic, NTTs, rescaling, and the three steps of hybrid key switching (ModUp, the inner
//! product with a resident key, ModDown), so that a scheme built on top keeps its ciphertexts,
//! plaintexts and keys resident. Each operation works on whole RNS polynomials whose basis the
//! caller names; a backend checks every length against it and errs (never panics) on a mismatch.
//!
//! [`CpuBackend`] implements the trait over host vectors with the math layer's kernels; it is
//! the reference every other resident backend must equal bit for bit, as for [`Backend`](crate::Backend).

use lycaon_math::{mul_accumulate_lazy, reduce_lazy, Automorphism, BaseConverter, MathError, Modulus, RnsBasis, ShoupConstant, SpecialFft};
use std::ops::Range;

use crate::CpuBackend;

/// One constant per limb for [`ResidentBackend::mul_constants_assign`] and
/// [`ResidentBackend::add_constants_assign`]: limb i uses real_i + imag_i w_i, where w is the
/// NTT form of X^(n/2) (the imaginary unit of CKKS slots); `imag_i = 0` everywhere needs no w.
pub type LimbConstant = (u64, u64);

/// How a key-switching key lies in resident memory: per output o (2) and digit j, its polynomial
/// over the key's extended basis, `limbs` limbs each: word ((o digits + j) limbs + l) n + k.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyLayout {
    pub digits: usize,
    pub limbs: usize,
}

/// Whole-polynomial operations on memory the backend owns. `Mem` is one buffer of 64-bit words
/// (`limbs * n` for a polynomial, limb-major). Inputs are reduced residues; outputs are too.
pub trait ResidentBackend: Send + Sync + std::fmt::Debug {
    type Mem: Send + Sync;

    /// A short name for logs and errors ("cpu", "cuda:0").
    fn name(&self) -> &str;

    /// Waits until every operation issued so far has finished (a device runs them
    /// asynchronously; timings need this).
    fn synchronize(&self) -> Result<(), MathError>;

    /// Buffers obtained from the device so far, for a backend that pools its memory (`None`
    /// otherwise): a count that stops growing once a session's operations reuse memory.
    fn allocations(&self) -> Option<usize> {
        None
    }

    fn upload(&self, words: &[u64]) -> Result<Self::Mem, MathError>;
    fn download(&self, mem: &Self::Mem) -> Result<Vec<u64>, MathError>;
    /// A buffer of `words` words whose contents are unspecified: callers write every word they
    /// later read (a device's pool hands out reused memory).
    fn alloc(&self, words: usize) -> Result<Self::Mem, MathError>;
    /// The buffer's length in words.
    fn len(&self, mem: &Self::Mem) -> usize;
    /// mem[at..at + len] = 0.
    fn zero_words(&self, mem: &mut Self::Mem, at: usize, len: usize) -> Result<(), MathError>;
    /// dst[dst_at..dst_at + len] = src[src_at..src_at + len].
    fn copy_words(&self, dst: &mut Self::Mem, dst_at: usize, src: &Self::Mem, src_at: usize, len: usize) -> Result<(), MathError>;

    fn ntt_assign(&self, a: &mut Self::Mem, basis: &RnsBasis) -> Result<(), MathError>;
    fn intt_assign(&self, a: &mut Self::Mem, basis: &RnsBasis) -> Result<(), MathError>;

    fn add_assign(&self, a: &mut Self::Mem, b: &Self::Mem, basis: &RnsBasis) -> Result<(), MathError>;
    fn sub_assign(&self, a: &mut Self::Mem, b: &Self::Mem, basis: &RnsBasis) -> Result<(), MathError>;
    fn neg_assign(&self, a: &mut Self::Mem, basis: &RnsBasis) -> Result<(), MathError>;
    /// a *= b point-wise (NTT form).
    fn mul_assign(&self, a: &mut Self::Mem, b: &Self::Mem, basis: &RnsBasis) -> Result<(), MathError>;
    /// acc += a * b point-wise (NTT form).
    fn mul_add_assign(&self, acc: &mut Self::Mem, a: &Self::Mem, b: &Self::Mem, basis: &RnsBasis) -> Result<(), MathError>;
    /// Limb i of a times (real_i + imag_i w_i); `imag_unit` is w over a basis starting with
    /// `basis` (needed only when some imag_i is not zero).
    fn mul_constants_assign(&self, a: &mut Self::Mem, constants: &[LimbConstant], imag_unit: Option<&Self::Mem>, basis: &RnsBasis) -> Result<(), MathError>;
    /// Limb i of a plus (real_i + imag_i w_i); see [`Self::mul_constants_assign`].
    fn add_constants_assign(&self, a: &mut Self::Mem, constants: &[LimbConstant], imag_unit: Option<&Self::Mem>, basis: &RnsBasis) -> Result<(), MathError>;
    /// (a0 b0, a0 b1 + a1 b0, a1 b1) point-wise, the middle term reduced once.
    fn tensor(&self, a: [&Self::Mem; 2], b: [&Self::Mem; 2], basis: &RnsBasis) -> Result<[Self::Mem; 3], MathError>;

    /// Divides an NTT-form polynomial over `basis` (l + 1 primes) by its last prime with rounding:
    /// (x - [x]_{q_l}) / q_l over the first l primes, the centred remainder taken limb by limb.
    fn rescale(&self, x: &Self::Mem, basis: &RnsBasis) -> Result<Self::Mem, MathError>;

    /// The centred residues (in (-q/2, q/2]) of a one-prime coefficient-form polynomial over
    /// `from`, as residues of every prime of `to`, in coefficient form: bootstrapping's raise of
    /// a level-0 ciphertext to the top modulus.
    fn lift_centred(&self, x: &Self::Mem, from: &RnsBasis, to: &RnsBasis) -> Result<Self::Mem, MathError>;

    /// CKKS encoding where the polynomial lives: the `re.len()` complex slot values (re, im),
    /// inverse special FFT, times `scale`, rounded, placed at coefficients k gap (real parts)
    /// and n/2 + k gap (imaginary parts) with gap = n / (2 slots), as residues over `basis` in
    /// NTT form; only the values cross to the device. Returns the largest |coefficient| of the
    /// FFT's output with the polynomial, or with `None` when that times `scale` reaches 2^62
    /// (the caller encodes such a plaintext on the host).
    fn encode_slots(&self, re: &[f64], im: &[f64], fft: &SpecialFft, scale: f64, basis: &RnsBasis) -> Result<(Option<Self::Mem>, f64), MathError>;

    /// ModUp: the digits of c (NTT form over `q`), each lifted to `qp` (Q_l followed by P) and in
    /// NTT form, one after the other in one buffer (digit d at word d |qp| n). Digit d owns
    /// primes `digits[d]` of Q_l; `mod_up[d]` converts its primes to the other primes of `qp`,
    /// in `qp`'s order.
    fn mod_up(&self, c: &Self::Mem, q: &RnsBasis, digits: &[Range<usize>], mod_up: &[BaseConverter], qp: &RnsBasis) -> Result<Self::Mem, MathError>;

    /// The key-switching inner product of `count` digits (over `qp`, as [`Self::mod_up`] lays
    /// them out) with a resident key: output o is sum_j digit_j key[o][j], reading key limb
    /// `key_limbs[i]` for limb i of `qp`.
    fn key_inner_product(
        &self,
        digits: &Self::Mem,
        count: usize,
        key: &Self::Mem,
        layout: KeyLayout,
        key_limbs: &[usize],
        qp: &RnsBasis,
    ) -> Result<[Self::Mem; 2], MathError>;

    /// Key switching's last two steps: [`Self::key_inner_product`], then [`Self::mod_down`] of both
    /// outputs by `conv` (P -> Q_l): (k_0, k_1) over Q_l. A device fuses the inner product on the
    /// special primes with their inverse NTT.
    #[allow(clippy::too_many_arguments)]
    fn key_switch(&self, digits: &Self::Mem, count: usize, key: &Self::Mem, layout: KeyLayout, key_limbs: &[usize], qp: &RnsBasis, conv: &BaseConverter) -> Result<[Self::Mem; 2], MathError> {
        let [u0, u1] = self.key_inner_product(digits, count, key, layout, key_limbs, qp)?;
        Ok([self.mod_down(&u0, conv)?, self.mod_down(&u1, conv)?])
    }

    /// ModDown: (x_Q - Conv_{P->Q}(x_P)) P^-1 over Q_l, for x in NTT form over Q_l P (the Q_l
    /// primes first, then `conv`'s source primes P). `conv` converts P to Q_l.
    fn mod_down(&self, x: &Self::Mem, conv: &BaseConverter) -> Result<Self::Mem, MathError>;

    /// X -> X^g on an NTT-form polynomial over `basis`.
    fn automorphism(&self, a: &Self::Mem, galois_element: u64, basis: &RnsBasis) -> Result<Self::Mem, MathError>;
}

/// An error unless `mem` holds exactly one polynomial over `basis`.
pub fn check_len(what: &str, words: usize, basis: &RnsBasis) -> Result<(), MathError> {
    let expected = basis.len() * basis.n();
    if words != expected {
        return Err(MathError::Device {
            device: "resident".into(),
            operation: what.into(),
            message: format!("operand has {words} words, its basis needs {expected}"),
        });
    }
    Ok(())
}

/// q_l^-1 mod q_i and q_l mod q_i for i < l: the constants of a rescale by the last prime.
pub fn rescale_constants(basis: &RnsBasis) -> Result<(Vec<ShoupConstant>, Vec<u64>), MathError> {
    let (last, rest) = basis.moduli().split_last().ok_or(MathError::EmptyBasis)?;
    let inverses = rest.iter().map(|q| Ok(ShoupConstant::new(q.inv(q.reduce(last.value()))?, q))).collect::<Result<_, MathError>>()?;
    Ok((inverses, rest.iter().map(|q| q.reduce(last.value())).collect()))
}

/// P^-1 mod q_i for each target prime of a P -> Q conversion (ModDown's final factor).
pub fn mod_down_constants(conv: &BaseConverter) -> Result<Vec<ShoupConstant>, MathError> {
    conv.to_basis()
        .moduli()
        .iter()
        .map(|q| {
            let p = conv.from_basis().moduli().iter().fold(1u64, |acc, pj| q.mul(acc, q.reduce(pj.value())));
            Ok(ShoupConstant::new(q.inv(p)?, q))
        })
        .collect()
}

/// The centred remainder x mod q_l (given in [0, q_l)) as a residue mod q: x, or x - q_l when
/// x > q_l / 2 (`last_mod` = q_l mod q).
pub fn centred_residue(x: u64, half: u64, q: &Modulus, last_mod: u64) -> u64 {
    if x > half {
        q.sub(q.reduce(x), last_mod)
    } else {
        q.reduce(x)
    }
}

fn limbs(data: &[u64], n: usize) -> impl Iterator<Item = &[u64]> {
    data.chunks_exact(n)
}

fn constant_words(c: LimbConstant, w: Option<&[u64]>, q: &Modulus, k: usize) -> Result<u64, MathError> {
    Ok(match (c.1, w) {
        (0, _) => c.0,
        (b, Some(w)) => q.add(c.0, q.mul(b, w[k])),
        (_, None) => {
            return Err(MathError::Device {
                device: "resident".into(),
                operation: "constant".into(),
                message: "an imaginary part needs the imaginary unit".into(),
            })
        }
    })
}

fn elementwise(a: &mut [u64], b: &[u64], basis: &RnsBasis, op: impl Fn(&Modulus, u64, u64) -> u64) {
    let n = basis.n();
    for ((x, y), q) in a.chunks_exact_mut(n).zip(limbs(b, n)).zip(basis.moduli()) {
        x.iter_mut().zip(y).for_each(|(u, &v)| *u = op(q, *u, v));
    }
}

impl CpuBackend {
    fn check2(what: &str, a: &[u64], b: &[u64], basis: &RnsBasis) -> Result<(), MathError> {
        check_len(what, a.len(), basis)?;
        check_len(what, b.len(), basis)
    }

    fn with_constants(
        a: &mut [u64],
        constants: &[LimbConstant],
        imag_unit: Option<&Vec<u64>>,
        basis: &RnsBasis,
        op: impl Fn(&Modulus, u64, u64) -> u64,
    ) -> Result<(), MathError> {
        let n = basis.n();
        check_len("constants", a.len(), basis)?;
        if constants.len() != basis.len() || imag_unit.is_some_and(|w| w.len() < a.len()) {
            return Err(MathError::LimbCount { expected: basis.len(), found: constants.len() });
        }
        for (i, (limb, q)) in a.chunks_exact_mut(n).zip(basis.moduli()).enumerate() {
            let w = imag_unit.map(|w| &w[i * n..(i + 1) * n]);
            for (k, x) in limb.iter_mut().enumerate() {
                *x = op(q, *x, constant_words(constants[i], w, q, k)?);
            }
        }
        Ok(())
    }
}

impl ResidentBackend for CpuBackend {
    type Mem = Vec<u64>;

    fn name(&self) -> &str {
        "cpu"
    }

    fn synchronize(&self) -> Result<(), MathError> {
        Ok(())
    }

    fn upload(&self, words: &[u64]) -> Result<Vec<u64>, MathError> {
        Ok(words.to_vec())
    }

    fn download(&self, mem: &Vec<u64>) -> Result<Vec<u64>, MathError> {
        Ok(mem.clone())
    }

    fn alloc(&self, words: usize) -> Result<Vec<u64>, MathError> {
        Ok(vec![0; words])
    }

    fn len(&self, mem: &Vec<u64>) -> usize {
        mem.len()
    }

    fn zero_words(&self, mem: &mut Vec<u64>, at: usize, len: usize) -> Result<(), MathError> {
        let total = mem.len();
        let words = mem.get_mut(at..at + len).ok_or_else(|| MathError::Device { device: "cpu".into(), operation: "zero".into(), message: format!("{len} words at {at} of {total}") })?;
        words.fill(0);
        Ok(())
    }

    fn copy_words(&self, dst: &mut Vec<u64>, dst_at: usize, src: &Vec<u64>, src_at: usize, len: usize) -> Result<(), MathError> {
        let (Some(d), Some(s)) = (dst.get_mut(dst_at..dst_at + len), src.get(src_at..src_at + len)) else {
            return Err(MathError::Device {
                device: "cpu".into(),
                operation: "copy".into(),
                message: format!("{len} words at {src_at} -> {dst_at} out of bounds"),
            });
        };
        d.copy_from_slice(s);
        Ok(())
    }

    fn ntt_assign(&self, a: &mut Vec<u64>, basis: &RnsBasis) -> Result<(), MathError> {
        check_len("ntt", a.len(), basis)?;
        a.chunks_exact_mut(basis.n()).zip(basis.plans()).for_each(|(l, p)| p.forward(l));
        Ok(())
    }

    fn intt_assign(&self, a: &mut Vec<u64>, basis: &RnsBasis) -> Result<(), MathError> {
        check_len("intt", a.len(), basis)?;
        a.chunks_exact_mut(basis.n()).zip(basis.plans()).for_each(|(l, p)| p.inverse(l));
        Ok(())
    }

    fn add_assign(&self, a: &mut Vec<u64>, b: &Vec<u64>, basis: &RnsBasis) -> Result<(), MathError> {
        Self::check2("add", a, b, basis)?;
        elementwise(a, b, basis, |q, x, y| q.add(x, y));
        Ok(())
    }

    fn sub_assign(&self, a: &mut Vec<u64>, b: &Vec<u64>, basis: &RnsBasis) -> Result<(), MathError> {
        Self::check2("sub", a, b, basis)?;
        elementwise(a, b, basis, |q, x, y| q.sub(x, y));
        Ok(())
    }

    fn neg_assign(&self, a: &mut Vec<u64>, basis: &RnsBasis) -> Result<(), MathError> {
        check_len("neg", a.len(), basis)?;
        a.chunks_exact_mut(basis.n()).zip(basis.moduli()).for_each(|(l, q)| l.iter_mut().for_each(|x| *x = q.neg(*x)));
        Ok(())
    }

    fn mul_assign(&self, a: &mut Vec<u64>, b: &Vec<u64>, basis: &RnsBasis) -> Result<(), MathError> {
        Self::check2("mul", a, b, basis)?;
        elementwise(a, b, basis, |q, x, y| q.mul(x, y));
        Ok(())
    }

    fn mul_add_assign(&self, acc: &mut Vec<u64>, a: &Vec<u64>, b: &Vec<u64>, basis: &RnsBasis) -> Result<(), MathError> {
        Self::check2("mul_add", a, b, basis)?;
        check_len("mul_add", acc.len(), basis)?;
        let n = basis.n();
        for (((x, y), z), q) in acc.chunks_exact_mut(n).zip(limbs(a, n)).zip(limbs(b, n)).zip(basis.moduli()) {
            x.iter_mut().zip(y).zip(z).for_each(|((u, &v), &w)| *u = q.add(*u, q.mul(v, w)));
        }
        Ok(())
    }

    fn mul_constants_assign(&self, a: &mut Vec<u64>, constants: &[LimbConstant], imag_unit: Option<&Vec<u64>>, basis: &RnsBasis) -> Result<(), MathError> {
        Self::with_constants(a, constants, imag_unit, basis, |q, x, c| q.mul(x, c))
    }

    fn add_constants_assign(&self, a: &mut Vec<u64>, constants: &[LimbConstant], imag_unit: Option<&Vec<u64>>, basis: &RnsBasis) -> Result<(), MathError> {
        Self::with_constants(a, constants, imag_unit, basis, |q, x, c| q.add(x, c))
    }

    fn tensor(&self, a: [&Vec<u64>; 2], b: [&Vec<u64>; 2], basis: &RnsBasis) -> Result<[Vec<u64>; 3], MathError> {
        for x in a.iter().chain(&b) {
            check_len("tensor", x.len(), basis)?;
        }
        let n = basis.n();
        let mut out = [vec![0; a[0].len()], vec![0; a[0].len()], vec![0; a[0].len()]];
        let mut acc = vec![0u128; n];
        for (i, q) in basis.moduli().iter().enumerate() {
            let r = i * n..(i + 1) * n;
            for k in r.clone() {
                out[0][k] = q.mul(a[0][k], b[0][k]);
                out[2][k] = q.mul(a[1][k], b[1][k]);
            }
            acc.iter_mut().for_each(|x| *x = 0);
            mul_accumulate_lazy(&mut acc, &a[0][r.clone()], &b[1][r.clone()]);
            mul_accumulate_lazy(&mut acc, &a[1][r.clone()], &b[0][r.clone()]);
            reduce_lazy(&acc, &mut out[1][r], q);
        }
        Ok(out)
    }

    fn rescale(&self, x: &Vec<u64>, basis: &RnsBasis) -> Result<Vec<u64>, MathError> {
        check_len("rescale", x.len(), basis)?;
        let l = basis.len().checked_sub(1).filter(|&l| l > 0).ok_or(MathError::EmptyBasis)?;
        let n = basis.n();
        let (inverses, last_mod) = rescale_constants(basis)?;
        let q_last = basis.moduli()[l];
        let mut last = x[l * n..].to_vec();
        basis.plans()[l].inverse(&mut last);
        let mut out = x[..l * n].to_vec();
        for (i, limb) in out.chunks_exact_mut(n).enumerate() {
            let q = basis.moduli()[i];
            let mut r: Vec<u64> = last.iter().map(|&v| centred_residue(v, q_last.value() / 2, &q, last_mod[i])).collect();
            basis.plans()[i].forward(&mut r);
            let c = inverses[i];
            limb.iter_mut().zip(&r).for_each(|(v, &y)| *v = q.mul_shoup(q.sub(*v, y), c.value, c.shoup));
        }
        Ok(out)
    }

    fn encode_slots(&self, re: &[f64], im: &[f64], fft: &SpecialFft, scale: f64, basis: &RnsBasis) -> Result<(Option<Vec<u64>>, f64), MathError> {
        let slots = check_slot_values(re, im, basis)?;
        let mut buf: Vec<num_complex::Complex64> = re.iter().zip(im).map(|(&a, &b)| num_complex::Complex64::new(a, b)).collect();
        fft.inverse(&mut buf);
        let max = buf.iter().map(|c| c.re.abs().max(c.im.abs())).fold(0.0, f64::max);
        if max * scale >= NARROW_ENCODING_LIMIT {
            return Ok((None, max));
        }
        let n = basis.n();
        let gap = n / 2 / slots;
        let mut out = vec![0u64; basis.len() * n];
        for (limb, (q, plan)) in out.chunks_exact_mut(n).zip(basis.moduli().iter().zip(basis.plans())) {
            for (k, c) in buf.iter().enumerate() {
                for (at, x) in [(k * gap, c.re), (n / 2 + k * gap, c.im)] {
                    let r = (x * scale).round() as i64;
                    let m = q.reduce(r.unsigned_abs());
                    limb[at] = if r < 0 { q.neg(m) } else { m };
                }
            }
            plan.forward(limb);
        }
        Ok((Some(out), max))
    }

    fn lift_centred(&self, x: &Vec<u64>, from: &RnsBasis, to: &RnsBasis) -> Result<Vec<u64>, MathError> {
        check_len("lift_centred", x.len(), from)?;
        let q0 = *from.moduli().first().filter(|_| from.len() == 1).ok_or(MathError::LimbCount { expected: 1, found: from.len() })?;
        let mut out = Vec::with_capacity(to.len() * to.n());
        for q in to.moduli() {
            let m = q.reduce(q0.value());
            out.extend(x.iter().map(|&v| centred_residue(v, q0.value() / 2, q, m)));
        }
        Ok(out)
    }

    fn mod_up(&self, c: &Vec<u64>, q: &RnsBasis, digits: &[Range<usize>], mod_up: &[BaseConverter], qp: &RnsBasis) -> Result<Vec<u64>, MathError> {
        check_len("mod_up", c.len(), q)?;
        let n = q.n();
        let mut coeff = c.clone();
        self.intt_assign(&mut coeff, q)?;
        let mut out = Vec::with_capacity(digits.len() * qp.len() * n);
        for (range, conv) in digits.iter().zip(mod_up) {
            let mut rest = vec![0u64; conv.to_basis().len() * n];
            conv.convert_approximate(&coeff[range.start * n..range.end * n], &mut rest)?;
            conv.to_basis().plans().iter().zip(rest.chunks_exact_mut(n)).for_each(|(p, l)| p.forward(l));
            out.extend_from_slice(&rest[..range.start * n]);
            out.extend_from_slice(&c[range.start * n..range.end * n]);
            out.extend_from_slice(&rest[range.start * n..]);
        }
        check_len("mod_up digits", out.len() / digits.len().max(1), qp)?;
        Ok(out)
    }

    fn key_inner_product(
        &self,
        digits: &Vec<u64>,
        count: usize,
        key: &Vec<u64>,
        layout: KeyLayout,
        key_limbs: &[usize],
        qp: &RnsBasis,
    ) -> Result<[Vec<u64>; 2], MathError> {
        let n = qp.n();
        check_key_args(digits.len(), count, key.len(), layout, key_limbs, qp)?;
        let digits: Vec<&[u64]> = digits.chunks_exact(qp.len() * n).collect();
        let mut acc = vec![0u128; n];
        let mut out = [vec![0u64; qp.len() * n], vec![0u64; qp.len() * n]];
        for (o, result) in out.iter_mut().enumerate() {
            for (i, q) in qp.moduli().iter().enumerate() {
                acc.iter_mut().for_each(|a| *a = 0);
                for (j, d) in digits.iter().enumerate() {
                    let at = ((o * layout.digits + j) * layout.limbs + key_limbs[i]) * n;
                    mul_accumulate_lazy(&mut acc, &d[i * n..(i + 1) * n], &key[at..at + n]);
                }
                reduce_lazy(&acc, &mut result[i * n..(i + 1) * n], q);
            }
        }
        Ok(out)
    }

    fn mod_down(&self, x: &Vec<u64>, conv: &BaseConverter) -> Result<Vec<u64>, MathError> {
        let (p, q) = (conv.from_basis(), conv.to_basis());
        let n = q.n();
        if x.len() != (p.len() + q.len()) * n {
            return Err(MathError::LimbCount { expected: p.len() + q.len(), found: x.len() / n.max(1) });
        }
        let mut p_part = x[q.len() * n..].to_vec();
        self.intt_assign(&mut p_part, p)?;
        let mut correction = vec![0u64; q.len() * n];
        conv.convert_approximate(&p_part, &mut correction)?;
        self.ntt_assign(&mut correction, q)?;
        let inverses = mod_down_constants(conv)?;
        let mut out = x[..q.len() * n].to_vec();
        for (i, (limb, m)) in out.chunks_exact_mut(n).zip(q.moduli()).enumerate() {
            let c = inverses[i];
            limb.iter_mut().zip(&correction[i * n..(i + 1) * n]).for_each(|(v, &y)| *v = m.mul_shoup(m.sub(*v, y), c.value, c.shoup));
        }
        Ok(out)
    }

    fn automorphism(&self, a: &Vec<u64>, galois_element: u64, basis: &RnsBasis) -> Result<Vec<u64>, MathError> {
        check_len("automorphism", a.len(), basis)?;
        let auto = Automorphism::new(galois_element, basis.n())?;
        let mut out = vec![0u64; a.len()];
        a.chunks_exact(basis.n()).zip(out.chunks_exact_mut(basis.n())).for_each(|(src, dst)| auto.apply_ntt(src, dst));
        Ok(out)
    }
}

/// The shared argument check of [`ResidentBackend::key_inner_product`]: at least one digit, at
/// most the key's, each over `qp`; one key limb per limb of `qp`, within the key; the key sized
/// by its layout.
pub fn check_key_args(digits_len: usize, count: usize, key_len: usize, layout: KeyLayout, key_limbs: &[usize], qp: &RnsBasis) -> Result<(), MathError> {
    if count == 0 || count > layout.digits {
        return Err(MathError::LimbCount { expected: layout.digits, found: count });
    }
    check_len("key inner product digits", digits_len / count, qp)?;
    if !digits_len.is_multiple_of(count) {
        return Err(MathError::LimbCount { expected: count, found: digits_len });
    }
    if key_limbs.len() != qp.len() || key_limbs.iter().any(|&l| l >= layout.limbs) || key_len != 2 * layout.digits * layout.limbs * qp.n() {
        return Err(MathError::LimbCount { expected: qp.len(), found: key_limbs.len() });
    }
    Ok(())
}

/// Below this, |coefficient| times the scale rounds to an i64 (the encoders' narrow path).
pub const NARROW_ENCODING_LIMIT: f64 = 4611686018427387904.0; // 2^62

/// The slot count of [`ResidentBackend::encode_slots`]'s values: a power of two up to n/2, the
/// same for both parts.
pub fn check_slot_values(re: &[f64], im: &[f64], basis: &RnsBasis) -> Result<usize, MathError> {
    let slots = re.len();
    if slots != im.len() || !slots.is_power_of_two() || slots > basis.n() / 2 {
        return Err(MathError::LimbCount { expected: basis.n() / 2, found: slots });
    }
    Ok(slots)
}
