//! The bit-exactness suite shared by the emulation tests and the GPU tests: every kernel of a
//! backend against CpuBackend, on random and extreme inputs, over primes of Lycaon's real
//! parameter sets.
#![allow(dead_code)]

use std::sync::Arc;

use lycaon_backend::{Backend, CpuBackend};
use lycaon_math::num_bigint::BigInt;
use lycaon_math::{
    ntt_moduli, rotation_galois_element, row_swap_galois_element, Automorphism, BaseConverter, Coeff, Modulus, Ntt, Poly, RnsBasis, Sampler,
};

/// A named prime set at one ring degree.
pub struct PrimeSet {
    pub name: String,
    pub n: usize,
    pub q: Vec<u64>,
    pub p: Vec<u64>,
}

/// Primes from the parameter sets Lycaon ships: BFV defaults (36..49-bit primes), the CKKS
/// bootstrapping chain at logN = 16 (40..61-bit primes, P near the 2^62 limit), and small toy sets.
/// `max_limbs` caps how many ciphertext primes are kept (the emulation is slow at logN = 16).
pub fn real_prime_sets(max_limbs: usize) -> Vec<PrimeSet> {
    let mut sets = Vec::new();
    for n in [4096usize, 8192] {
        let lit = lycaon_rlwe::ParametersLiteral::bfv_default(n).expect("BFV default");
        sets.push(PrimeSet { name: format!("bfv_default({n})"), n, q: lit.ciphertext_moduli.into_iter().take(max_limbs).collect(), p: lit.special_moduli });
    }
    let boot = lycaon_ckks::bootstrap::BootstrapParams::logn16_full_slots().literal().expect("bootstrapping literal");
    // q_0 (60 bits), a 40-bit residual prime, and the top (CoeffsToSlots, 56-bit) primes.
    let q = &boot.ciphertext_moduli;
    let mut picked = vec![q[0], q[1]];
    picked.extend(q.iter().rev().take(max_limbs.saturating_sub(2)));
    sets.push(PrimeSet { name: "ckks bootstrap logN=16".into(), n: boot.n, q: picked, p: boot.special_moduli.into_iter().take(3).collect() });
    let toy_q = ntt_moduli(&[30, 45, 62], 16, &[]).unwrap();
    let taken: Vec<u64> = toy_q.iter().map(Modulus::value).collect();
    let toy_p = ntt_moduli(&[61, 17], 16, &taken).unwrap();
    sets.push(PrimeSet { name: "toy n=16 (17..62-bit primes)".into(), n: 16, q: taken, p: toy_p.iter().map(Modulus::value).collect() });
    sets
}

fn basis(n: usize, primes: &[u64]) -> Arc<RnsBasis> {
    let moduli: Vec<Modulus> = primes.iter().map(|&q| Modulus::new(q).unwrap()).collect();
    RnsBasis::new(n, &moduli).unwrap()
}

fn coeff_poly(b: &Arc<RnsBasis>, data: Vec<u64>) -> Poly<Coeff> {
    Poly::from_data(b, data).unwrap()
}

fn uniform_coeff(b: &Arc<RnsBasis>, s: &mut Sampler) -> Poly<Coeff> {
    coeff_poly(b, s.uniform_poly(b).into_data())
}

/// Every residue q_i - 1: the largest products and lazy sums the kernels can meet.
fn extreme<R: lycaon_math::Representation>(b: &Arc<RnsBasis>) -> Poly<R> {
    let data = b.moduli().iter().flat_map(|q| std::iter::repeat_n(q.value() - 1, b.n())).collect();
    Poly::from_data(b, data).unwrap()
}

/// Coefficients spread over (-Q/2, Q/2] and bunched at the ends and around +-Q/4, where the
/// centred conversion's rounding decides; as residues mod Q.
fn spread_coeff(b: &Arc<RnsBasis>) -> Poly<Coeff> {
    let n = b.n();
    let big_q = BigInt::from(b.product().clone());
    let mut data = vec![0u64; b.len() * n];
    for k in 0..n {
        let x = match k % 4 {
            0 => (&big_q * BigInt::from(2 * k as i64 - n as i64 + 1)) / BigInt::from(2 * n as i64),
            1 => &big_q / BigInt::from(2) - BigInt::from(k as i64),
            2 => -(&big_q / BigInt::from(2)) + BigInt::from(k as i64),
            _ => &big_q / BigInt::from(4) + BigInt::from(k as i64 / 2 - n as i64 / 8),
        };
        for (i, r) in b.decompose(&x).into_iter().enumerate() {
            data[i * n + k] = r;
        }
    }
    coeff_poly(b, data)
}

/// Panics unless both polynomials are equal, naming the first differing word (whole polynomials
/// are too long to print).
pub fn assert_same<R: lycaon_math::Representation>(got: &Poly<R>, want: &Poly<R>, what: &str) {
    assert!(got.basis().same_primes(want.basis()), "{what}: different bases");
    let n = want.n();
    let diffs: Vec<usize> = (0..want.data().len()).filter(|&i| got.data()[i] != want.data()[i]).collect();
    if let Some(&first) = diffs.first() {
        panic!("{what}: {} of {} words differ; first at limb {} coefficient {}: got {} want {}", diffs.len(), want.data().len(), first / n, first % n, got.data()[first], want.data()[first]);
    }
}

fn assert_all_same<R: lycaon_math::Representation>(got: &[Poly<R>], want: &[Poly<R>], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: output count");
    for (o, (g, w)) in got.iter().zip(want).enumerate() {
        assert_same(g, w, &format!("{what}, output {o}"));
    }
}

/// Panics, naming the kernel and case, on the first output that differs from the CPU's.
pub fn check_kernels(backend: &dyn Backend, set: &PrimeSet, seed: u8) {
    let cpu = CpuBackend;
    let ctx = |kernel: &str| format!("{kernel} on {} with {}", set.name, backend.name());
    let n = set.n;
    let bq = basis(n, &set.q);
    let bp = basis(n, &set.p);
    let qp = basis(n, &[set.q.clone(), set.p.clone()].concat());
    let mut s = Sampler::from_seed([seed; 32]);

    // NTT and INTT: random, extreme and sparse inputs (X^1 exposes the evaluation points).
    let mut x_poly = vec![0u64; qp.len() * n];
    for i in 0..qp.len() {
        x_poly[i * n + 1] = 1;
    }
    for a in [uniform_coeff(&qp, &mut s), extreme::<Coeff>(&qp), coeff_poly(&qp, x_poly)] {
        assert_same(&backend.ntt(a.clone()).unwrap(), &cpu.ntt(a.clone()).unwrap(), &ctx("ntt"));
        let a_ntt = cpu.ntt(a.clone()).unwrap();
        assert_same(&backend.intt(a_ntt.clone()).unwrap(), &a, &ctx("intt"));
    }
    let extreme_ntt = extreme::<Ntt>(&qp);
    assert_same(&backend.intt(extreme_ntt.clone()).unwrap(), &cpu.intt(extreme_ntt.clone()).unwrap(), &ctx("intt of q-1"));

    // Point-wise products.
    for (a, b) in [(s.uniform_poly(&qp), s.uniform_poly(&qp)), (extreme_ntt.clone(), extreme_ntt.clone())] {
        let (mut x, mut y) = (a.clone(), a.clone());
        backend.mul_assign(&mut x, &b).unwrap();
        cpu.mul_assign(&mut y, &b).unwrap();
        assert_same(&x, &y, &ctx("mul_assign"));
    }

    // Automorphisms: rotations both ways, the row swap (conjugation), and the identity.
    let a = s.uniform_poly(&qp);
    for g in [rotation_galois_element(1, n), rotation_galois_element(-3, n), rotation_galois_element(n as i64 / 4 - 1, n), row_swap_galois_element(n), 1] {
        let auto = Automorphism::new(g, n).unwrap();
        assert_same(&backend.automorphism_ntt(&a, &auto).unwrap(), &cpu.automorphism_ntt(&a, &auto).unwrap(), &format!("{} g={g}", ctx("automorphism_ntt")));
    }

    // Base conversions: ModUp of one digit (one prime, then two) to the rest of QP, and ModDown's
    // P -> Q; both variants, on random, extreme and centred-edge inputs.
    let mut pairs = vec![(basis(n, &set.q[..1]), basis(n, &[&set.q[1..], &set.p[..]].concat())), (bp.clone(), bq.clone()), (bq.clone(), bp.clone())];
    if set.q.len() >= 3 {
        pairs.push((basis(n, &set.q[..2]), basis(n, &[&set.q[2..], &set.p[..]].concat())));
    }
    for (from, to) in pairs {
        let conv = BaseConverter::new(from.clone(), to.clone()).unwrap();
        for input in [uniform_coeff(&from, &mut s), extreme::<Coeff>(&from), spread_coeff(&from)] {
            for centered in [false, true] {
                assert_same(
                    &backend.convert_basis(&conv, &input, centered).unwrap(),
                    &cpu.convert_basis(&conv, &input, centered).unwrap(),
                    &format!("{} ({} -> {} primes, centered = {centered})", ctx("convert_basis"), from.len(), to.len()),
                );
            }
        }
    }

    // Inner product as in a key switch at a lower level: digits over Q_l + P, keys over the full
    // QP, key_limbs skipping the dropped ciphertext primes. Then many extreme digits (the lazy
    // 128-bit sum near its largest).
    let l = set.q.len().div_ceil(2);
    let level = basis(n, &[&set.q[..l], &set.p[..]].concat());
    let key_limbs: Vec<usize> = (0..l).chain(set.q.len()..set.q.len() + set.p.len()).collect();
    let digits: Vec<Poly<Ntt>> = (0..3).map(|_| s.uniform_poly(&level)).collect();
    let keys: Vec<Vec<Poly<Ntt>>> = (0..3).map(|_| vec![s.uniform_poly(&qp), s.uniform_poly(&qp)]).collect();
    let refs: Vec<&[Poly<Ntt>]> = keys.iter().map(Vec::as_slice).collect();
    for outputs in [1, 2] {
        assert_all_same(
            &backend.inner_product(&digits, &refs, &key_limbs, outputs).unwrap(),
            &cpu.inner_product(&digits, &refs, &key_limbs, outputs).unwrap(),
            &format!("{} outputs={outputs}", ctx("inner_product")),
        );
    }
    let many = 12;
    let digits: Vec<Poly<Ntt>> = (0..many).map(|_| extreme::<Ntt>(&qp)).collect();
    let keys: Vec<Vec<Poly<Ntt>>> = (0..many).map(|_| vec![extreme::<Ntt>(&qp)]).collect();
    let refs: Vec<&[Poly<Ntt>]> = keys.iter().map(Vec::as_slice).collect();
    let all: Vec<usize> = (0..qp.len()).collect();
    assert_all_same(&backend.inner_product(&digits, &refs, &all, 1).unwrap(), &cpu.inner_product(&digits, &refs, &all, 1).unwrap(), &ctx("inner_product of q-1"));
}

/// The argument errors must be the CPU's.
pub fn check_errors(backend: &dyn Backend) {
    let cpu = CpuBackend;
    let n = 16;
    let q = ntt_moduli(&[40, 41], n, &[]).unwrap();
    let (b2, b1) = (RnsBasis::new(n, &q).unwrap(), RnsBasis::new(n, &q[..1]).unwrap());
    let mut s = Sampler::from_seed([9; 32]);
    let (x, y) = (s.uniform_poly(&b2), s.uniform_poly(&b1));
    assert_eq!(backend.mul_assign(&mut x.clone(), &y).unwrap_err(), cpu.mul_assign(&mut x.clone(), &y).unwrap_err());
    let auto = Automorphism::new(3, 32).unwrap();
    assert_eq!(backend.automorphism_ntt(&x, &auto).unwrap_err(), cpu.automorphism_ntt(&x, &auto).unwrap_err());
    let conv = BaseConverter::new(b1.clone(), b2.clone()).unwrap();
    let c = Poly::<Coeff>::from_data(&b2, x.data().to_vec()).unwrap();
    assert_eq!(backend.convert_basis(&conv, &c, false).unwrap_err(), cpu.convert_basis(&conv, &c, false).unwrap_err());
    let keys = [vec![x.clone()]];
    let refs: Vec<&[Poly<Ntt>]> = keys.iter().map(Vec::as_slice).collect();
    assert_eq!(backend.inner_product(std::slice::from_ref(&x), &refs, &[0], 2).unwrap_err(), cpu.inner_product(std::slice::from_ref(&x), &refs, &[0], 2).unwrap_err());
}
