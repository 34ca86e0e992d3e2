//! Polynomials in the Chebyshev basis on an interval [a, b], p(x) = sum_i c_i T_i(y) with
//! y = (2x - a - b) / (b - a), evaluated homomorphically by baby-step giant-step (the
//! Paterson-Stockmeyer split p = q T_g + r with T_g T_j = (T_{g+j} + T_{g-j}) / 2, as in Lattigo
//! and Bossuat et al. 2021) in the minimal depth ceil(log2(d + 1)), plus one level for the change
//! of variable when [a, b] is not [-1, 1].
//!
//! Scale management: every node of the recursion is asked for an exact (level, scale). A node
//! q T_g + r at (l, S) asks q for (l + 1, S q_{l+1} / s(T_g)) and r for (l, S); a leaf
//! sum_i c_i T_i at (l, S) encodes each c_i at S q_{l+1} / s(T_i), sums lazily at level l + 1 and
//! rescales once. So the output scale is the requested one, and every addition inside is between
//! operands of equal scale: no error from scale mismatches however deep the polynomial.

use std::collections::BTreeMap;

use lycaon_math::{lazy_capacity, Poly};
use num_complex::Complex64;
use rayon::prelude::*;

use crate::ops::{CiphertextMeta, CkksOps};
use crate::{Ciphertext, CkksError, Evaluator};

/// A real polynomial in the Chebyshev basis of [a, b].
#[derive(Clone, Debug, PartialEq)]
pub struct ChebyshevPoly {
    pub coeffs: Vec<f64>,
    pub a: f64,
    pub b: f64,
}

/// Chebyshev interpolation of f on [a, b] at degree d: the coefficients of the degree-d
/// polynomial through f at the d + 1 Chebyshev nodes (near-minimax for smooth f).
pub fn chebyshev_coefficients(f: impl Fn(f64) -> f64, a: f64, b: f64, degree: usize) -> Vec<f64> {
    let m = degree + 1;
    let nodes: Vec<f64> = (0..m).map(|k| (std::f64::consts::PI * (k as f64 + 0.5) / m as f64).cos()).collect();
    let values: Vec<f64> = nodes.iter().map(|&y| f(0.5 * (b - a) * y + 0.5 * (a + b))).collect();
    (0..m)
        .map(|j| {
            let s: f64 = values.iter().enumerate().map(|(k, &v)| v * (std::f64::consts::PI * j as f64 * (k as f64 + 0.5) / m as f64).cos()).sum();
            let c = 2.0 * s / m as f64;
            if j == 0 { c / 2.0 } else { c }
        })
        .collect()
}

impl ChebyshevPoly {
    /// Errors unless a < b are finite and every coefficient is finite.
    pub fn new(coeffs: Vec<f64>, a: f64, b: f64) -> Result<Self, CkksError> {
        if !(a.is_finite() && b.is_finite() && a < b) {
            return Err(CkksError::InvalidArgument { what: format!("interval [{a}, {b}] must be finite with a < b") });
        }
        if let Some((index, &value)) = coeffs.iter().enumerate().find(|(_, c)| !c.is_finite()) {
            return Err(CkksError::NonFiniteValue { index, value });
        }
        if coeffs.is_empty() {
            return Err(CkksError::InvalidArgument { what: "a polynomial needs at least one coefficient".into() });
        }
        Ok(Self { coeffs, a, b })
    }

    /// Chebyshev interpolant of f on [a, b] of the given degree.
    pub fn interpolate(f: impl Fn(f64) -> f64, a: f64, b: f64, degree: usize) -> Result<Self, CkksError> {
        Self::new(chebyshev_coefficients(f, a, b, degree), a, b)
    }

    /// Degree, ignoring trailing coefficients below 1e-14 of the largest.
    pub fn degree(&self) -> usize {
        let max = self.coeffs.iter().fold(0.0f64, |m, c| m.max(c.abs()));
        self.coeffs.iter().rposition(|c| c.abs() > 1e-14 * max).unwrap_or(0)
    }

    /// Levels the homomorphic evaluation consumes: ceil(log2(d + 1)), plus one for the change of
    /// variable unless 2 / (b - a) is an integer (then it is an exact integer product).
    pub fn depth(&self) -> usize {
        depth_of(self.degree()) + usize::from(change_of_variable_costs_a_level(self.a, self.b))
    }

    /// p(x) in the clear by Clenshaw's recurrence (the reference for tests).
    pub fn evaluate(&self, x: f64) -> f64 {
        let y = (2.0 * x - self.a - self.b) / (self.b - self.a);
        let (mut b1, mut b2) = (0.0, 0.0);
        for &c in self.coeffs.iter().skip(1).rev() {
            let t = 2.0 * y * b1 - b2 + c;
            b2 = b1;
            b1 = t;
        }
        y * b1 - b2 + self.coeffs[0]
    }
}

/// Solves the square system a x = b by Gaussian elimination with partial pivoting (None when
/// singular).
pub(crate) fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let m = b.len();
    for col in 0..m {
        let pivot = (col..m).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..m {
            let factor = a[row][col] / a[col][col];
            if factor != 0.0 {
                let (upper, lower) = a.split_at_mut(row);
                for (x, &y) in lower[0][col..].iter_mut().zip(&upper[col][col..]) {
                    *x -= factor * y;
                }
                b[row] -= factor * b[col];
            }
        }
    }
    let mut x = vec![0.0; m];
    for row in (0..m).rev() {
        let s: f64 = (row + 1..m).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    Some(x)
}

/// T_0(y) .. T_d(y).
pub(crate) fn chebyshev_values(y: f64, d: usize) -> Vec<f64> {
    let mut t = Vec::with_capacity(d + 1);
    t.push(1.0);
    if d >= 1 {
        t.push(y);
    }
    for i in 2..=d {
        let v = 2.0 * y * t[i - 1] - t[i - 2];
        t.push(v);
    }
    t
}

impl ChebyshevPoly {
    /// A minimax (best uniform) approximation of f on [a, b] of the given degree by the Remez
    /// exchange algorithm, started from the Chebyshev extrema; returns the polynomial and its
    /// maximum error measured on a dense grid. Stops when the levelled error and the measured
    /// maximum agree to 1e-6 relative, or after `iterations` exchanges. f must be continuous.
    pub fn minimax(f: impl Fn(f64) -> f64, a: f64, b: f64, degree: usize, iterations: usize) -> Result<(Self, f64), CkksError> {
        let start = Self::interpolate(&f, a, b, degree)?;
        let to_x = |y: f64| 0.5 * (b - a) * y + 0.5 * (a + b);
        let m = degree + 2;
        let grid_len = (100 * m).max(2000);
        let grid: Vec<f64> = (0..grid_len).map(|k| -(std::f64::consts::PI * k as f64 / (grid_len - 1) as f64).cos()).collect();
        let fg: Vec<f64> = grid.iter().map(|&y| f(to_x(y))).collect();
        let max_error = |p: &ChebyshevPoly| grid.iter().zip(&fg).map(|(&y, &v)| (p.evaluate(to_x(y)) - v).abs()).fold(0.0, f64::max);
        let mut best = (max_error(&start), start);
        let mut reference: Vec<f64> = (0..m).map(|k| -(std::f64::consts::PI * k as f64 / (m - 1) as f64).cos()).collect();
        for _ in 0..iterations {
            let rows: Vec<Vec<f64>> = reference
                .iter()
                .enumerate()
                .map(|(k, &y)| {
                    let mut r = chebyshev_values(y, degree);
                    r.push(if k % 2 == 0 { 1.0 } else { -1.0 });
                    r
                })
                .collect();
            let rhs: Vec<f64> = reference.iter().map(|&y| f(to_x(y))).collect();
            let Some(sol) = solve(rows, rhs) else { break };
            let levelled = sol[degree + 1].abs();
            let candidate = Self::new(sol[..=degree].to_vec(), a, b)?;
            let errors: Vec<f64> = grid.iter().zip(&fg).map(|(&y, &v)| candidate.evaluate(to_x(y)) - v).collect();
            let measured = errors.iter().fold(0.0f64, |mx, e| mx.max(e.abs()));
            if measured < best.0 {
                best = (measured, candidate);
            }
            if measured - levelled <= 1e-6 * measured {
                break;
            }
            let Some(extrema) = alternating_extrema(&errors, m) else { break };
            reference = extrema.iter().map(|&i| grid[i]).collect();
        }
        Ok((best.1, best.0))
    }
}

/// A Remez exchange's next reference: the extremum of each run of equal sign of `errors` (on a
/// grid), trimmed from the ends (the smaller end first) to `m` alternating points; None when there
/// are fewer than `m` runs.
pub(crate) fn alternating_extrema(errors: &[f64], m: usize) -> Option<Vec<usize>> {
    let mut extrema: Vec<usize> = Vec::new();
    let mut k = 0;
    while k < errors.len() {
        let sign = errors[k] >= 0.0;
        let mut arg = k;
        while k < errors.len() && (errors[k] >= 0.0) == sign {
            if errors[k].abs() > errors[arg].abs() {
                arg = k;
            }
            k += 1;
        }
        extrema.push(arg);
    }
    if extrema.len() < m {
        return None;
    }
    while extrema.len() > m {
        if errors[extrema[0]].abs() < errors[extrema[extrema.len() - 1]].abs() {
            extrema.remove(0);
        } else {
            extrema.pop();
        }
    }
    Some(extrema)
}

/// Whether y = alpha x + beta with alpha = 2 / (b - a) needs a rescaled constant product: not
/// when alpha is an integer (1 for [-1, 1] or any width-2 interval, 2 for [0, 1], ...).
fn change_of_variable_costs_a_level(a: f64, b: f64) -> bool {
    let alpha = 2.0 / (b - a);
    (alpha - alpha.round()).abs() > 1e-12 * alpha.abs() || alpha.round() == 0.0
}

fn depth_of(d: usize) -> usize {
    (usize::BITS - d.leading_zeros()) as usize // ceil(log2(d + 1))
}

/// T_0 .. T_{baby-1} and T_{2^k} (2^k >= baby) of an encrypted input, each at its own level and
/// scale: T_i at level L_1 - ceil(log2 i), where L_1 is the level of T_1. `Ct` is a host
/// [`Ciphertext`] or a resident one ([`crate::ResidentCiphertext`]).
#[derive(Clone, Debug)]
pub struct ChebyshevBasis<Ct = Ciphertext> {
    powers: BTreeMap<usize, Ct>,
    baby: usize,
    max_degree: usize,
    pub a: f64,
    pub b: f64,
}

impl<Ct: CiphertextMeta> ChebyshevBasis<Ct> {
    pub fn get(&self, i: usize) -> Option<&Ct> {
        self.powers.get(&i)
    }

    pub fn baby_steps(&self) -> usize {
        self.baby
    }

    /// The level of T_1 (the top of the basis).
    pub fn top_level(&self) -> usize {
        self.powers[&1].level()
    }
}

enum Value<Ct> {
    Const(f64),
    Ct(Ct),
}

/// Chebyshev split p = q T_g + r (deg p <= 2g): q_0 = c_g, q_j = 2 c_{g+j}, r_{g-j} -= c_{g+j}.
fn split(coeffs: &[f64], g: usize) -> (Vec<f64>, Vec<f64>) {
    let mut r = coeffs[..g].to_vec();
    let mut q = vec![0.0; coeffs.len() - g];
    q[0] = coeffs[g];
    for j in 1..coeffs.len() - g {
        q[j] = 2.0 * coeffs[g + j];
        r[g - j] -= coeffs[g + j];
    }
    (q, r)
}

impl Evaluator {
    /// T_0 .. T_{2^k} for a polynomial of degree up to `max_degree` on [a, b]. Consumes one level
    /// for the change of variable unless 2 / (b - a) is an integer. Errors: `MissingRelinKey`,
    /// `NotEnoughLevels` when the input cannot hold ceil(log2(d + 1)) (+1) levels.
    pub fn chebyshev_basis(&self, ct: &Ciphertext, a: f64, b: f64, max_degree: usize) -> Result<ChebyshevBasis, CkksError> {
        self.check(ct)?;
        chebyshev_basis(self, ct, a, b, max_degree)
    }

    /// p(ct) with the output at the canonical scale of its level (top level of the input minus
    /// [`ChebyshevPoly::depth`]). Errors as [`Self::chebyshev_basis`].
    pub fn evaluate_chebyshev(&self, ct: &Ciphertext, poly: &ChebyshevPoly) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        evaluate_chebyshev(self, ct, poly)
    }

    /// p(ct) with the output at exactly `scale` (to 2^-40 relative).
    pub fn evaluate_chebyshev_to_scale(&self, ct: &Ciphertext, poly: &ChebyshevPoly, scale: f64) -> Result<Ciphertext, CkksError> {
        self.check(ct)?;
        evaluate_chebyshev_to_scale(self, ct, poly, scale)
    }

    /// p evaluated on a precomputed basis (several polynomials of one input share it). The output
    /// is at level top - ceil(log2(d + 1)) and at exactly `scale`. Errors: `InvalidArgument` when
    /// the basis was built for another interval or a lower degree, or p is constant.
    pub fn evaluate_chebyshev_with_basis(&self, basis: &ChebyshevBasis, poly: &ChebyshevPoly, scale: f64) -> Result<Ciphertext, CkksError> {
        evaluate_chebyshev_with_basis(self, basis, poly, scale)
    }

    /// sum_t c_t x_t over Q_level for per-limb integer constants c_t, accumulated lazily in 128
    /// bits and reduced once per limb; the result is read at `scale` ([`CkksOps::integer_combination`]).
    pub(crate) fn integer_combination_host(&self, terms: &[(Ciphertext, Vec<u64>)], level: usize, scale: f64) -> Result<Ciphertext, CkksError> {
        let q = self.params().q_at(level)?.clone();
        let n = self.context().n();
        let log_slots = terms.iter().map(|t| t.0.log_slots).max().unwrap_or(0);
        let mut parts = Vec::with_capacity(2);
        for part in 0..2 {
            let mut data = vec![0u64; q.len() * n];
            data.par_chunks_exact_mut(n).enumerate().for_each(|(li, out)| {
                let m = q.moduli()[li];
                let cap = lazy_capacity(&m).saturating_sub(1).max(1);
                let mut acc = vec![0u128; n];
                let mut count = 0;
                for (t, res) in terms {
                    if count == cap {
                        acc.iter_mut().for_each(|a| *a = m.reduce_u128(*a) as u128);
                        count = 0;
                    }
                    let c = res[li] as u128;
                    for (a, &x) in acc.iter_mut().zip(t.inner.parts()[part].limb(li)) {
                        *a += x as u128 * c;
                    }
                    count += 1;
                }
                out.iter_mut().zip(&acc).for_each(|(o, &a)| *o = m.reduce_u128(a));
            });
            parts.push(Poly::from_kernel_output(&q, data));
        }
        self.wrap(parts, scale, log_slots)
    }
}

/// [`Evaluator::chebyshev_basis`] on any [`CkksOps`].
pub fn chebyshev_basis<E: CkksOps>(eval: &E, ct: &E::Ct, a: f64, b: f64, max_degree: usize) -> Result<ChebyshevBasis<E::Ct>, CkksError> {
    if ct.parts() != 2 {
        return Err(CkksError::WrongSize { expected: 2, found: ct.parts() });
    }
    if !(a.is_finite() && b.is_finite() && a < b) {
        return Err(CkksError::InvalidArgument { what: format!("interval [{a}, {b}] must be finite with a < b") });
    }
    let depth = depth_of(max_degree.max(1));
    let costly = change_of_variable_costs_a_level(a, b);
    let needed = depth + usize::from(costly);
    if ct.level() < needed {
        return Err(CkksError::NotEnoughLevels { op: "polynomial evaluation", needed, level: ct.level() });
    }
    let (alpha, beta) = (2.0 / (b - a), -(a + b) / (b - a));
    let t1 = if costly {
        let m = eval.mul_const(ct, alpha)?;
        let m = eval.add_const(&m, Complex64::new(beta, 0.0))?;
        eval.rescale(&m)?
    } else {
        // alpha is an integer: y = alpha x + beta exactly, at no level.
        let m = if alpha == 1.0 { eval.duplicate(ct)? } else { eval.mul_integer(ct, alpha.round() as i64)? };
        if beta != 0.0 { eval.add_const(&m, Complex64::new(beta, 0.0))? } else { m }
    };
    let baby = 1usize << depth.div_ceil(2).max(1);
    let mut powers = BTreeMap::new();
    powers.insert(1usize, t1);
    // Baby steps T_2 .. T_{baby-1} and giant steps T_{2^k}, each from the largest power of
    // two below it: T_i = 2 T_a T_{i-a} - T_{2a-i} with a = 2^(ceil(log2 i) - 1).
    let mut targets: Vec<usize> = (2..baby.min(max_degree + 1)).collect();
    let mut g = baby;
    while g <= max_degree {
        targets.push(g);
        g *= 2;
    }
    // In waves: every target whose three inputs exist is computed at once (T_3 and T_4; then
    // T_5 .. T_8), so that independent products keep all cores busy where one product's
    // limbs alone do not. The values do not depend on the order.
    let inputs = |i: usize| {
        let a = 1usize << (depth_of(i - 1) - 1);
        (a, i - a)
    };
    while !targets.is_empty() {
        let (ready, waiting): (Vec<usize>, Vec<usize>) = targets.iter().partition(|&&i| {
            let (x, y) = inputs(i);
            [x, y, x - y].iter().all(|k| *k == 0 || powers.contains_key(k))
        });
        if ready.is_empty() {
            return Err(CkksError::Internal("Chebyshev basis: a power with no inputs"));
        }
        let made: Vec<(usize, E::Ct)> = ready
            .par_iter()
            .map(|&i| {
                let (x, y) = inputs(i);
                chebyshev_product(eval, &powers, x, y).map(|t| (i, t))
            })
            .collect::<Result<_, _>>()?;
        powers.extend(made);
        targets = waiting;
    }
    Ok(ChebyshevBasis { powers, baby, max_degree, a, b })
}

/// T_{x+y} = 2 T_x T_y - T_{x-y} (x >= y), rescaled once.
fn chebyshev_product<E: CkksOps>(eval: &E, powers: &BTreeMap<usize, E::Ct>, x: usize, y: usize) -> Result<E::Ct, CkksError> {
    let (tx, ty) = (&powers[&x], &powers[&y]);
    let prod = eval.mul_relin(tx, ty)?;
    let mut prod = eval.mul_integer(&prod, 2)?;
    if x == y {
        prod = eval.add_const(&prod, Complex64::new(-1.0, 0.0))?;
    } else {
        let td = eval.drop_to_level(&powers[&(x - y)], prod.level())?;
        let sigma = prod.scale() / td.scale();
        let mut m = eval.mul_const_scaled(&td, Complex64::new(1.0, 0.0), sigma)?;
        m.assume_scale(prod.scale());
        prod = eval.sub(&prod, &m)?;
    }
    eval.rescale(&prod)
}

/// [`Evaluator::evaluate_chebyshev`] on any [`CkksOps`].
pub fn evaluate_chebyshev<E: CkksOps>(eval: &E, ct: &E::Ct, poly: &ChebyshevPoly) -> Result<E::Ct, CkksError> {
    let out_level = ct.level().checked_sub(poly.depth()).ok_or(CkksError::NotEnoughLevels { op: "polynomial evaluation", needed: poly.depth(), level: ct.level() })?;
    let scale = eval.context().scale_at(out_level)?;
    evaluate_chebyshev_to_scale(eval, ct, poly, scale)
}

/// [`Evaluator::evaluate_chebyshev_to_scale`] on any [`CkksOps`].
pub fn evaluate_chebyshev_to_scale<E: CkksOps>(eval: &E, ct: &E::Ct, poly: &ChebyshevPoly, scale: f64) -> Result<E::Ct, CkksError> {
    let basis = chebyshev_basis(eval, ct, poly.a, poly.b, poly.degree())?;
    evaluate_chebyshev_with_basis(eval, &basis, poly, scale)
}

/// [`Evaluator::evaluate_chebyshev_with_basis`] on any [`CkksOps`].
pub fn evaluate_chebyshev_with_basis<E: CkksOps>(eval: &E, basis: &ChebyshevBasis<E::Ct>, poly: &ChebyshevPoly, scale: f64) -> Result<E::Ct, CkksError> {
    crate::encoding::check_scale(scale)?;
    if basis.a != poly.a || basis.b != poly.b {
        return Err(CkksError::InvalidArgument { what: format!("the basis is on [{}, {}], the polynomial on [{}, {}]", basis.a, basis.b, poly.a, poly.b) });
    }
    let d = poly.degree();
    if d > basis.max_degree {
        return Err(CkksError::InvalidArgument { what: format!("the basis covers degree {}, the polynomial has degree {d}", basis.max_degree) });
    }
    let top = basis.top_level();
    let level = top.checked_sub(depth_of(d)).ok_or(CkksError::NotEnoughLevels { op: "polynomial evaluation", needed: depth_of(d), level: top })?;
    let max = poly.coeffs.iter().fold(0.0f64, |m, c| m.max(c.abs()));
    let coeffs: Vec<f64> = poly.coeffs[..=d].iter().map(|&c| if c.abs() > 1e-14 * max { c } else { 0.0 }).collect();
    match eval_node(eval, basis, &coeffs, level, scale)? {
        Value::Ct(mut ct) => {
            ct.assume_scale(scale);
            Ok(ct)
        }
        Value::Const(_) => Err(CkksError::InvalidArgument { what: "the polynomial is constant; add the constant instead".into() }),
    }
}

fn eval_node<E: CkksOps>(eval: &E, basis: &ChebyshevBasis<E::Ct>, coeffs: &[f64], level: usize, scale: f64) -> Result<Value<E::Ct>, CkksError> {
    let d = coeffs.iter().rposition(|&c| c != 0.0).unwrap_or(0);
    if d == 0 {
        return Ok(Value::Const(coeffs[0]));
    }
    let coeffs = &coeffs[..=d];
    let leaf_ok = (1..=d).all(|i| coeffs[i] == 0.0 || basis.powers.get(&i).is_some_and(|t| t.level() > level));
    if leaf_ok {
        return eval_leaf(eval, basis, coeffs, level, scale).map(Value::Ct);
    }
    let g = 1usize << (depth_of(d) - 1); // largest power of two <= d
    let tg = basis.powers.get(&g).ok_or(CkksError::Internal("missing Chebyshev power"))?;
    if tg.level() <= level {
        return Err(CkksError::NotEnoughLevels { op: "polynomial evaluation", needed: 1, level: tg.level() });
    }
    let tg = eval.drop_to_level(tg, level + 1)?;
    let (q, r) = split(coeffs, g);
    let q_scale = scale * eval.context().prime_at(level + 1)? as f64 / tg.scale();
    // The quotient's branch (with its product by T_g) and the remainder's share nothing:
    // they run side by side.
    let quotient = || -> Result<E::Ct, CkksError> {
        let prod = match eval_node(eval, basis, &q, level + 1, q_scale)? {
            Value::Const(c) => eval.mul_const_scaled(&tg, Complex64::new(c, 0.0), q_scale)?,
            Value::Ct(qc) => eval.mul_relin(&qc, &tg)?,
        };
        let mut res = eval.rescale(&prod)?;
        res.assume_scale(scale);
        Ok(res)
    };
    let (res, rest) = rayon::join(quotient, || eval_node(eval, basis, &r, level, scale));
    let res = res?;
    match rest? {
        Value::Const(c) => Ok(Value::Ct(eval.add_const(&res, Complex64::new(c, 0.0))?)),
        Value::Ct(rc) => Ok(Value::Ct(eval.add(&res, &rc)?)),
    }
}

/// sum_i c_i T_i at (level, scale): each c_i encoded at scale q_{l+1} / s(T_i), summed lazily
/// at level l + 1 and rescaled once.
fn eval_leaf<E: CkksOps>(eval: &E, basis: &ChebyshevBasis<E::Ct>, coeffs: &[f64], level: usize, scale: f64) -> Result<E::Ct, CkksError> {
    let up = level + 1;
    let q_up = eval.context().prime_at(up)? as f64;
    let target = scale * q_up;
    let mut terms: Vec<(E::Ct, Vec<u64>)> = Vec::new();
    for (i, &c) in coeffs.iter().enumerate().skip(1) {
        if c == 0.0 {
            continue;
        }
        let t = eval.drop_to_level(&basis.powers[&i], up)?;
        let res = crate::evaluator::constant_residues(eval.context(), Complex64::new(c, 0.0), target / t.scale(), up)?;
        terms.push((t, res.into_iter().map(|r| r.0).collect()));
    }
    let sum = eval.integer_combination(&terms, up, target)?;
    let sum = eval.add_const(&sum, Complex64::new(coeffs[0], 0.0))?;
    let mut out = eval.rescale(&sum)?;
    out.assume_scale(scale);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimax_beats_interpolation_and_equioscillates() {
        let f = |x: f64| x.abs();
        let (p, err) = ChebyshevPoly::minimax(f, -1.0, 1.0, 10, 30).unwrap();
        let interp = ChebyshevPoly::interpolate(f, -1.0, 1.0, 10).unwrap();
        let grid: Vec<f64> = (0..4001).map(|k| -1.0 + k as f64 / 2000.0).collect();
        let max = |q: &ChebyshevPoly| grid.iter().map(|&x| (q.evaluate(x) - f(x)).abs()).fold(0.0, f64::max);
        assert!(err < max(&interp) * 0.8, "minimax {err} vs interpolation {}", max(&interp));
        assert!((max(&p) - err).abs() < 0.05 * err, "grid max {} vs reported {err}", max(&p));
        // |x| at degree 10: the best error is about 0.0278 (Bernstein's constant / n-ish).
        assert!(err < 0.03, "{err}");
        let (e, err_e) = ChebyshevPoly::minimax(f64::exp, 0.0, 2.0, 8, 20).unwrap();
        assert!(err_e < 1e-6 && (e.evaluate(1.3) - 1.3f64.exp()).abs() <= err_e * 1.01);
    }

    #[test]
    fn interpolation_and_clenshaw() {
        let p = ChebyshevPoly::interpolate(|x| (3.0 * x).sin(), -2.0, 5.0, 40).unwrap();
        for k in 0..50 {
            let x = -2.0 + 7.0 * k as f64 / 49.0;
            assert!((p.evaluate(x) - (3.0 * x).sin()).abs() < 1e-9, "x = {x}");
        }
        assert_eq!(p.depth(), 6 + 1);
        // T_3 on [-1, 1] is 4x^3 - 3x.
        let t3 = ChebyshevPoly::new(vec![0.0, 0.0, 0.0, 1.0], -1.0, 1.0).unwrap();
        assert!((t3.evaluate(0.3) - (4.0 * 0.027 - 0.9)).abs() < 1e-15);
        assert_eq!(t3.depth(), 2);
        // Splitting reproduces p = q T_g + r.
        let c: Vec<f64> = (0..12).map(|i| (i as f64 * 0.37).cos()).collect();
        let (q, r) = split(&c, 8);
        let full = ChebyshevPoly::new(c, -1.0, 1.0).unwrap();
        let (pq, pr) = (ChebyshevPoly::new(q, -1.0, 1.0).unwrap(), ChebyshevPoly::new(r, -1.0, 1.0).unwrap());
        let t8 = |y: f64| (8.0 * y.acos()).cos();
        for y in [-0.9, -0.2, 0.4, 0.99] {
            assert!((full.evaluate(y) - (pq.evaluate(y) * t8(y) + pr.evaluate(y))).abs() < 1e-12);
        }
    }
}
