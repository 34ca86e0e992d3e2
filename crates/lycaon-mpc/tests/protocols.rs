//! The two-party protocols against their clear functions, on random inputs and on the edge values
//! of each ring, with IKNP and with silent OT underneath.

use lycaon_mpc::{
    channel::{run_pair, Channel, ChannelStats, LinkModel, MemoryChannel},
    compare::{and, less_than},
    nonlinear::{
        bounded_range, convert, drelu, drelu_bounded, drelu_within, max_pool, max_pool_up_to, relu, relu_bounded, relu_within, truncate, truncate_exact,
        truncate_exact_into, truncate_into, truncate_relu, truncation_range,
    },
    party::{OtKind, Party, Role},
    ring::ShareRing,
    MpcError, Result,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::time::Duration;

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// Runs `f` as both parties (party 0 with `in0`, party 1 with `in1`) and returns both outputs.
fn two_party<I, O, F>(kind: OtKind, in0: I, in1: I, f: F) -> (O, O)
where
    I: Send,
    O: Send,
    F: Fn(&mut Party, I) -> Result<O> + Sync,
{
    let ((a, _), (b, _)) = run_pair(
        LinkModel::UNLIMITED,
        |ch| {
            let mut p = Party::new(Role::P0, ch, kind)?;
            f(&mut p, in0)
        },
        |ch| {
            let mut p = Party::new(Role::P1, ch, kind)?;
            f(&mut p, in1)
        },
    )
    .expect("protocol run");
    (a, b)
}

/// Additive shares of `values` in `ring`.
fn share(ring: ShareRing, values: &[u64], r: &mut ChaCha20Rng) -> (Vec<u64>, Vec<u64>) {
    let s0: Vec<u64> = values.iter().map(|_| ring.from_random(r.random::<u128>())).collect();
    let s1 = values.iter().zip(&s0).map(|(&v, &a)| ring.sub(v, a)).collect();
    (s0, s1)
}

fn rings() -> Vec<ShareRing> {
    vec![
        ShareRing::power_of_two(8).unwrap(),
        ShareRing::power_of_two(20).unwrap(),
        ShareRing::power_of_two(37).unwrap(),
        ShareRing::power_of_two(64).unwrap(),
        ShareRing::prime(65_537).unwrap(),
        ShareRing::prime(1_048_571).unwrap(),
        ShareRing::prime((1 << 61) - 1).unwrap(),
    ]
}

/// 0, 1, -1, M/2 - 1, M/2, M - 1 and friends, plus random values.
fn edge_and_random(ring: ShareRing, random: usize, r: &mut ChaCha20Rng) -> Vec<u64> {
    let m = ring.modulus();
    let half = ring.max_positive();
    let mut v: Vec<u64> = vec![0, 1, 2, ring.from_signed(-1), ring.from_signed(-2), half - 1, half, half + 1, (m - 1) as u64, (m - 2) as u64];
    v.extend((0..random).map(|_| ring.from_random(r.random::<u128>())));
    v
}

#[test]
fn relu_and_drelu_are_exact_on_every_ring() {
    for kind in [OtKind::Iknp, OtKind::Silent, OtKind::SilentCompact] {
        for (k, ring) in rings().into_iter().enumerate() {
            let mut r = rng(k as u64);
            let x = edge_and_random(ring, 300, &mut r);
            let (s0, s1) = share(ring, &x, &mut r);
            let ((d0, y0), (d1, y1)) = two_party(kind, s0, s1, |p, s| Ok((drelu(p, ring, &s)?, relu(p, ring, &s)?)));
            for i in 0..x.len() {
                let signed = ring.to_signed(x[i]);
                assert_eq!(d0[i] ^ d1[i], signed >= 0, "DReLU of {signed} in {ring:?} ({kind:?})");
                assert_eq!(ring.add(y0[i], y1[i]), if signed >= 0 { x[i] } else { 0 }, "ReLU of {signed} in {ring:?} ({kind:?})");
            }
        }
    }
}

#[test]
fn bounded_relu_is_exact_within_a_quarter_of_the_ring() {
    for (k, ring) in rings().into_iter().enumerate() {
        let mut r = rng(50 + k as u64);
        let q = bounded_range(ring) as i64;
        let mut x: Vec<i64> = vec![0, 1, -1, 2, -2, q, -q, q - 1, 1 - q];
        x.extend((0..300).map(|_| r.random_range(-q..=q)));
        let values: Vec<u64> = x.iter().map(|&v| ring.from_signed(v)).collect();
        let (s0, s1) = share(ring, &values, &mut r);
        let ((d0, y0), (d1, y1)) = two_party(OtKind::Silent, s0, s1, |p, s| Ok((drelu_bounded(p, ring, &s)?, relu_bounded(p, ring, &s)?)));
        for i in 0..x.len() {
            assert_eq!(d0[i] ^ d1[i], x[i] >= 0, "DReLU of {} in {ring:?}", x[i]);
            assert_eq!(ring.to_signed(ring.add(y0[i], y1[i])), x[i].max(0), "ReLU of {} in {ring:?}", x[i]);
        }
    }
}

#[test]
fn and_of_shared_bits_matches_the_clear_and() {
    let mut r = rng(5);
    for (kind, n) in [(OtKind::Iknp, 0usize), (OtKind::Iknp, 1), (OtKind::Iknp, 1_000), (OtKind::Silent, 3_000)] {
        let x: Vec<bool> = (0..n).map(|_| r.random()).collect();
        let y: Vec<bool> = (0..n).map(|_| r.random()).collect();
        let (x0, y0): (Vec<bool>, Vec<bool>) = ((0..n).map(|_| r.random()).collect(), (0..n).map(|_| r.random()).collect());
        let x1: Vec<bool> = x.iter().zip(&x0).map(|(a, b)| a ^ b).collect();
        let y1: Vec<bool> = y.iter().zip(&y0).map(|(a, b)| a ^ b).collect();
        let (a, b) = two_party(kind, (x0, y0), (x1, y1), |p, (x, y)| and(p, &x, &y));
        for i in 0..n {
            assert_eq!(a[i] ^ b[i], x[i] & y[i], "bit {i} of {n} ({kind:?})");
        }
    }
}

#[test]
fn comparison_matches_on_edges_and_random_widths() {
    let mut r = rng(7);
    for bits in [1u32, 3, 4, 5, 8, 13, 20, 32, 63, 64] {
        let max = if bits == 64 { u64::MAX } else { (1 << bits) - 1 };
        let mut x: Vec<u64> = vec![0, 0, max, max, 1, max - 1];
        let mut y: Vec<u64> = vec![0, max, 0, max, max, max];
        for _ in 0..200 {
            x.push(r.random::<u64>() & max);
            y.push(if r.random::<bool>() { x[x.len() - 1] } else { r.random::<u64>() & max });
        }
        for digit in [1u32, 2, 4, 8] {
            let (a, b) = two_party(OtKind::Iknp, x.clone(), y.clone(), |p, v| less_than(p, &v, bits, digit));
            for i in 0..x.len() {
                assert_eq!(a[i] ^ b[i], x[i] < y[i], "{} < {} ({bits} bits, digits of {digit})", x[i], y[i]);
            }
        }
    }
}

#[test]
fn relu_within_a_magnitude_bound_is_exact_on_power_of_two_rings() {
    for (bits, magnitudes) in [(8u32, vec![1u32, 3, 6, 7]), (20, vec![5, 18]), (37, vec![12, 24, 35]), (64, vec![20, 40, 62, 63])] {
        let ring = ShareRing::power_of_two(bits).unwrap();
        for k in magnitudes {
            let mut r = rng(70 + u64::from(bits) + u64::from(k));
            // |x| < 2^k, or the whole ring where k + 2 > l (then it is drelu itself).
            let top = if k + 2 > bits { ring.max_positive() as i64 } else { (1i64 << k) - 1 };
            let bottom = if k + 2 > bits { -(ring.max_positive() as i64) - 1 } else { -top };
            let mut x: Vec<i64> = vec![0, 1, -1, top, bottom, top - 1, bottom + 1];
            x.extend((0..300).map(|_| r.random_range(bottom..=top)));
            let values: Vec<u64> = x.iter().map(|&v| ring.from_signed(v)).collect();
            let (s0, s1) = share(ring, &values, &mut r);
            let ((d0, y0), (d1, y1)) = two_party(OtKind::Silent, s0, s1, |p, s| Ok((drelu_within(p, ring, &s, k)?, relu_within(p, ring, &s, k)?)));
            for i in 0..x.len() {
                assert_eq!(d0[i] ^ d1[i], x[i] >= 0, "DReLU of {} within 2^{k} in Z_2^{bits}", x[i]);
                assert_eq!(ring.to_signed(ring.add(y0[i], y1[i])), x[i].max(0), "ReLU of {} within 2^{k} in Z_2^{bits}", x[i]);
            }
        }
    }
    let refused = two_party(OtKind::Iknp, vec![1u64], vec![2u64], |p, s| Ok(drelu_within(p, ShareRing::power_of_two(20)?, &s, 0).is_err()));
    assert_eq!(refused, (true, true), "a zero-bit magnitude bound is refused");
}

#[test]
fn relu_within_a_magnitude_bound_is_exact_on_prime_rings() {
    // Bounds far inside the ring (the k-bit comparison), at the edge where 2^(k+1) just fits
    // below p / 2, and past it (drelu, two comparisons, takes over).
    for (p, magnitudes) in [(65_537u64, vec![1u32, 4, 14, 15, 16]), (34_359_738_337, vec![3, 21, 33, 34]), (2_305_843_009_213_693_951, vec![20, 40, 59])] {
        let ring = ShareRing::prime(p).unwrap();
        for k in magnitudes {
            let mut r = rng(170 + u64::from(k));
            let top = ((1u64 << k) - 1).min(ring.max_positive()) as i64;
            let mut x: Vec<i64> = vec![0, 1, -1, top, -top, top - 1, 1 - top];
            if top < ring.max_positive() as i64 {
                x.push(-top - 1);
            }
            x.extend((0..400).map(|_| r.random_range(-top..=top)));
            let values: Vec<u64> = x.iter().map(|&v| ring.from_signed(v)).collect();
            let (s0, s1) = share(ring, &values, &mut r);
            let ((d0, y0), (d1, y1)) = two_party(OtKind::Silent, s0, s1, |p, s| Ok((drelu_within(p, ring, &s, k)?, relu_within(p, ring, &s, k)?)));
            for i in 0..x.len() {
                assert_eq!(d0[i] ^ d1[i], x[i] >= 0, "DReLU of {} within 2^{k} in Z_{p}", x[i]);
                assert_eq!(ring.to_signed(ring.add(y0[i], y1[i])), x[i].max(0), "ReLU of {} within 2^{k} in Z_{p}", x[i]);
            }
        }
    }
}

#[test]
fn truncate_relu_is_within_one_unit_of_the_exact_result() {
    for (bits, k, shift) in [(37u32, 30u32, 12u32), (64, 40, 12), (20, 12, 4)] {
        let ring = ShareRing::power_of_two(bits).unwrap();
        let mut r = rng(90 + u64::from(bits));
        let top = (1i64 << k) - 1;
        let mut x: Vec<i64> = vec![0, 1, -1, top, -top, (1 << shift) - 1, -(1 << shift), 1 << shift];
        x.extend((0..300).map(|_| r.random_range(-top..=top)));
        let values: Vec<u64> = x.iter().map(|&v| ring.from_signed(v)).collect();
        let (s0, s1) = share(ring, &values, &mut r);
        let (t0, t1) = two_party(OtKind::Silent, s0, s1, |p, s| truncate_relu(p, ring, &s, shift, k));
        for i in 0..x.len() {
            let got = ring.to_signed(ring.add(t0[i], t1[i]));
            let want = x[i].div_euclid(1 << shift).max(0);
            assert!(got >= 0 && (got - want).abs() <= 1, "ReLU({} >> {shift}) in Z_2^{bits}: got {got}, want {want}", x[i]);
        }
    }
}

#[test]
fn truncation_is_within_its_stated_error() {
    for (k, ring) in rings().into_iter().enumerate() {
        for shift in [1u32, 4, 6] {
            let Ok((bias, limit)) = truncation_range(ring, shift) else { continue };
            let mut r = rng(100 + k as u64);
            let mut x: Vec<i64> = vec![0, 1, -1, -(bias as i64), limit as i64, (1 << shift) - 1, -(1 << shift)];
            x.extend((0..300).map(|_| r.random_range(-(bias as i64)..=limit as i64)));
            let values: Vec<u64> = x.iter().map(|&v| ring.from_signed(v)).collect();
            let (s0, s1) = share(ring, &values, &mut r);
            let (t0, t1) = two_party(OtKind::Silent, s0, s1, |p, s| truncate(p, ring, &s, shift));
            let exact_power_of_two = matches!(ring, ShareRing::PowerOfTwo { .. });
            for i in 0..x.len() {
                let got = ring.to_signed(ring.add(t0[i], t1[i]));
                let want = x[i].div_euclid(1 << shift);
                let err = got - want;
                let ok = if exact_power_of_two { err == 0 || err == -1 } else { err.abs() <= 1 };
                assert!(ok, "{} >> {shift} in {ring:?}: got {got}, want {want}", x[i]);
            }
        }
    }
}

#[test]
fn exact_truncation_has_no_error_on_prime_rings() {
    for (k, ring) in rings().into_iter().filter(|r| matches!(r, ShareRing::Prime(_))).enumerate() {
        for shift in [1u32, 4, 9, 16] {
            let Ok((bias, limit)) = truncation_range(ring, shift) else { continue };
            let mut r = rng(200 + k as u64);
            let mut x: Vec<i64> = vec![0, 1, -1, -(bias as i64), limit as i64, (1 << shift) - 1, -(1 << shift), (1 << shift) + 1];
            x.extend((0..400).map(|_| r.random_range(-(bias as i64)..=limit as i64)));
            let values: Vec<u64> = x.iter().map(|&v| ring.from_signed(v)).collect();
            let (s0, s1) = share(ring, &values, &mut r);
            let (t0, t1) = two_party(OtKind::Silent, s0, s1, |p, s| truncate_exact(p, ring, &s, shift));
            for i in 0..x.len() {
                let got = ring.to_signed(ring.add(t0[i], t1[i]));
                assert_eq!(got, x[i].div_euclid(1 << shift), "{} >> {shift} in {ring:?}", x[i]);
            }
        }
    }
}

#[test]
fn truncations_write_into_another_prime_ring() {
    // |x| <= M/4 of the 61-bit ring leaves |x >> 44| < 2^15, inside the 20-bit ring (the exact
    // truncation's cross term modulo 2^44 q fits one OT), and |x >> 30| < 2^29, inside the
    // 35-bit ring (2^30 q does not: one OT per ring).
    for (to, shift) in [(1_048_571u64, 44u32), (34_359_738_337, 30)] {
        let (from, to) = (ShareRing::prime((1 << 61) - 1).unwrap(), ShareRing::prime(to).unwrap());
        let mut r = rng(300 + u64::from(shift));
        let (bias, limit) = truncation_range(from, shift).unwrap();
        let mut x: Vec<i64> = vec![0, 1, -1, -(bias as i64), limit as i64, (1 << shift) - 1, -(1 << shift)];
        x.extend((0..300).map(|_| r.random_range(-(bias as i64)..=limit as i64)));
        let values: Vec<u64> = x.iter().map(|&v| from.from_signed(v)).collect();
        let (s0, s1) = share(from, &values, &mut r);
        let ((e0, f0), (e1, f1)) =
            two_party(OtKind::Silent, s0, s1, |p, s| Ok((truncate_exact_into(p, from, to, &s, shift)?, truncate_into(p, from, to, &s, shift)?)));
        for i in 0..x.len() {
            let want = x[i].div_euclid(1 << shift);
            assert_eq!(to.to_signed(to.add(e0[i], e1[i])), want, "exact {} >> {shift} into {to:?}", x[i]);
            assert!((to.to_signed(to.add(f0[i], f1[i])) - want).abs() <= 1, "faithful {} >> {shift} into {to:?}", x[i]);
        }
    }
}

#[test]
fn max_pool_takes_the_window_maximum() {
    for ring in [ShareRing::power_of_two(37).unwrap(), ShareRing::prime(1_048_571).unwrap()] {
        let mut r = rng(5);
        let quarter = ring.max_positive() as i64 / 2;
        for size in [1usize, 2, 3, 4, 9] {
            let x: Vec<i64> = (0..size * 40).map(|_| r.random_range(-quarter..quarter)).collect();
            let values: Vec<u64> = x.iter().map(|&v| ring.from_signed(v)).collect();
            let (s0, s1) = share(ring, &values, &mut r);
            let (m0, m1) = two_party(OtKind::Silent, s0, s1, |p, s| max_pool(p, ring, &s, size));
            for (w, chunk) in x.chunks(size).enumerate() {
                assert_eq!(ring.to_signed(ring.add(m0[w], m1[w])), *chunk.iter().max().unwrap(), "window {w} of size {size} in {ring:?}");
            }
        }
    }
}

#[test]
fn bounded_max_pool_is_exact_within_its_range() {
    // Values within a bound either side of zero, both edges included: half the bounded range
    // (relu_bounded on Z_p) and bounds a few bits wide (the narrow comparison); windows of the
    // sizes separable pooling uses (rows of 3, 2) and whole 3x3 ones.
    let rings = [
        ShareRing::power_of_two(37).unwrap(),
        ShareRing::prime(1_048_571).unwrap(),
        ShareRing::prime(1_032_193).unwrap(),
        ShareRing::prime(34_359_738_337).unwrap(),
    ];
    for ring in rings {
        let mut r = rng(6);
        for bound in [bounded_range(ring) / 2, 1000, (1 << 15) - 1] {
            let half = bound as i64;
            for size in [2usize, 3, 9] {
                let mut x: Vec<i64> = (0..size * 60).map(|_| r.random_range(-half..=half)).collect();
                x[..size].fill(-half);
                x[size] = half;
                x[2 * size] = -half;
                x[2 * size + 1] = half;
                let values: Vec<u64> = x.iter().map(|&v| ring.from_signed(v)).collect();
                let (s0, s1) = share(ring, &values, &mut r);
                let (m0, m1) = two_party(OtKind::Silent, s0, s1, |p, s| max_pool_up_to(p, ring, &s, size, bound));
                for (w, chunk) in x.chunks(size).enumerate() {
                    assert_eq!(ring.to_signed(ring.add(m0[w], m1[w])), *chunk.iter().max().unwrap(), "window {w} of size {size} up to {bound} in {ring:?}");
                }
            }
        }
        // Differences past half the ring would wrap: refused.
        let refused = two_party(OtKind::Iknp, vec![1u64, 2], vec![2u64, 3], |p, s| Ok(max_pool_up_to(p, ring, &s, 2, ring.max_positive()).is_err()));
        assert_eq!(refused, (true, true));
    }
}

#[test]
fn conversion_between_rings_is_exact() {
    let p = ShareRing::prime(1_048_571).unwrap();
    let l37 = ShareRing::power_of_two(37).unwrap();
    let l20 = ShareRing::power_of_two(20).unwrap();
    let mut r = rng(9);
    // Z_p -> Z_2^37: every value of Z_p fits.
    let x = edge_and_random(p, 300, &mut r);
    let (s0, s1) = share(p, &x, &mut r);
    let (c0, c1) = two_party(OtKind::Iknp, s0, s1, |party, s| convert(party, p, l37, &s));
    for i in 0..x.len() {
        assert_eq!(l37.to_signed(l37.add(c0[i], c1[i])), p.to_signed(x[i]), "Z_p -> Z_2^37 of {}", p.to_signed(x[i]));
    }
    // Z_2^20 -> Z_p: the values of Z_2^20 that Z_p can hold (|x| <= (p - 1) / 2, p < 2^20).
    let fits = |v: &u64| l20.to_signed(*v).unsigned_abs() <= p.max_positive();
    let x: Vec<u64> = edge_and_random(l20, 300, &mut r).into_iter().filter(fits).collect();
    let (s0, s1) = share(l20, &x, &mut r);
    let (c0, c1) = two_party(OtKind::Silent, s0, s1, |party, s| convert(party, l20, p, &s));
    for i in 0..x.len() {
        assert_eq!(p.to_signed(p.add(c0[i], c1[i])), l20.to_signed(x[i]), "Z_2^20 -> Z_p of {}", l20.to_signed(x[i]));
    }
}

#[test]
fn shares_out_of_range_are_refused_without_printing_them() {
    let ring = ShareRing::prime(65_537).unwrap();
    let (e0, _) = two_party(OtKind::Iknp, vec![70_000u64, 3], vec![1u64, 2], |p, s| Ok(relu(p, ring, &s).map_err(|e| e.to_string())));
    let msg = e0.unwrap_err();
    assert!(msg.contains("index 0") && !msg.contains("70000"), "{msg}");
}

/// A channel end that keeps a copy of every message it receives.
struct Recording<'a> {
    inner: &'a mut dyn Channel,
    seen: Vec<u8>,
}

impl Channel for Recording<'_> {
    fn send(&mut self, m: &[u8]) -> Result<()> {
        self.inner.send(m)
    }
    fn recv(&mut self) -> Result<Vec<u8>> {
        let m = self.inner.recv()?;
        self.seen.extend_from_slice(&m);
        Ok(m)
    }
    fn stats(&self) -> ChannelStats {
        self.inner.stats()
    }
}

/// What party `watched` receives during a ReLU of 64 copies of `x`, the other party's input:
/// the watched party's own share is 0, the other holds x.
fn view(kind: OtKind, watched: Role, x: u64, ring: ShareRing, protocol: Protocol) -> Vec<u8> {
    let run = |role: Role, ch: &mut dyn Channel| -> Result<Vec<u8>> {
        let mut rec = Recording { inner: ch, seen: Vec::new() };
        let input = if role == watched { 0 } else { x };
        let mut p = Party::new(role, &mut rec, kind)?;
        protocol(&mut p, ring, &[input; 64])?;
        drop(p);
        Ok(rec.seen)
    };
    let ((v0, _), (v1, _)) = run_pair(LinkModel::UNLIMITED, |ch| run(Role::P0, ch), |ch| run(Role::P1, ch)).unwrap();
    if watched == Role::P0 {
        v0
    } else {
        v1
    }
}

/// A protocol whose views are compared: both parties call it with their shares.
type Protocol = fn(&mut Party, ShareRing, &[u64]) -> Result<Vec<u64>>;

#[test]
fn a_partys_view_does_not_depend_on_the_other_partys_input() {
    // Bit by bit, what a party receives has the same distribution whether the other party's
    // input is 5 or -5: over R runs per input, sum_j (ones_a(j) - ones_b(j))^2 / (R / 2) is about
    // chi-square with one degree per fair bit position (less where a bit is fixed, e.g. in the
    // encoding of curve points), so it stays below positions + 6 sqrt(2 positions).
    let prime = ShareRing::prime(1_048_571).unwrap();
    let z37 = ShareRing::power_of_two(37).unwrap();
    let relu_prime: Protocol = |p, r, s| relu(p, r, s);
    let relu_in_20_bits: Protocol = |p, r, s| relu_within(p, r, s, 20);
    let p35 = ShareRing::prime(34_359_738_337).unwrap();
    let exact_truncation: Protocol = |p, r, s| truncate_exact(p, r, s, 12);
    let truncate_then_relu: Protocol = |p, r, s| truncate_relu(p, r, s, 12, 30);
    // Fewer runs with silent OT, whose setup costs a second per session; the statistic's scale
    // (R / 2) adapts. The protocols built on the comparison and the truncation are watched
    // with IKNP underneath (the OT source's own view is the first case's).
    let cases = [
        ("relu, Z_p", prime, relu_prime, OtKind::Iknp, 24usize),
        ("relu, Z_p", prime, relu_prime, OtKind::Silent, 4),
        ("relu within 2^20, Z_2^37", z37, relu_in_20_bits, OtKind::Iknp, 24),
        ("relu within 2^20, Z_p", p35, relu_in_20_bits, OtKind::Iknp, 24),
        ("exact truncation, Z_p", p35, exact_truncation, OtKind::Iknp, 24),
        ("truncate then relu, Z_2^37", z37, truncate_then_relu, OtKind::Iknp, 24),
    ];
    for (name, ring, protocol, kind, runs) in cases {
        for watched in [Role::P0, Role::P1] {
            let counts = |x: u64| -> Vec<u32> {
                let mut ones: Vec<u32> = Vec::new();
                for _ in 0..runs {
                    let v = view(kind, watched, x, ring, protocol);
                    ones.resize(v.len() * 8, 0);
                    for (j, o) in ones.iter_mut().enumerate() {
                        *o += ((v[j / 8] >> (j % 8)) & 1) as u32;
                    }
                }
                ones
            };
            let (a, b) = (counts(5), counts(ring.from_signed(-5)));
            assert_eq!(a.len(), b.len(), "transcript length depends on the input");
            let stat: f64 = a.iter().zip(&b).map(|(&x, &y)| (x as f64 - y as f64).powi(2) / (runs as f64 / 2.0)).sum();
            let positions = a.len() as f64;
            assert!(
                stat < positions + 6.0 * (2.0 * positions).sqrt(),
                "{name} ({kind:?}), view of {watched:?}: statistic {stat:.0} over {positions} bit positions"
            );
        }
    }
}

#[test]
fn a_vanished_or_silent_peer_is_a_clear_error() {
    // The peer sets up and leaves before the protocol: party 0 learns it at once.
    let ring = ShareRing::power_of_two(32).unwrap();
    let (mut c0, mut c1) = MemoryChannel::pair_with(LinkModel::UNLIMITED, Duration::from_millis(300));
    let started = std::time::Instant::now();
    let err = std::thread::scope(|s| {
        s.spawn(move || {
            let _p = Party::new(Role::P1, &mut c1, OtKind::Iknp);
        });
        let mut p = Party::new(Role::P0, &mut c0, OtKind::Iknp).expect("setup");
        relu(&mut p, ring, &[1, 2, 3]).unwrap_err()
    });
    assert!(matches!(err, MpcError::PeerClosed(_) | MpcError::Timeout(_)), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}
