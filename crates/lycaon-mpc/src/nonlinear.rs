//! The non-linear layers of hybrid inference on additive shares: DReLU, ReLU, truncation by a
//! power of two, max-pooling, and conversion of shares between Z_p and Z_{2^l}.
//!
//! Each function is called by both parties with their own shares (same lengths, same ring) and
//! returns their shares of the result. Signed values: see `ShareRing` (above M/2 is negative).

use crate::{
    compare::{bits_to_ring, less_than, private_bit_product, DEFAULT_DIGIT_BITS},
    party::{Party, Role},
    ring::ShareRing,
    MpcError, Result,
};

/// Shares of DReLU(x) = [x >= 0] as boolean shares.
///
/// Z_{2^l}: [x >= 0] = 1 ^ msb(x0) ^ msb(x1) ^ carry, carry = [2^(l-1) - 1 - x0' < x1'] on the
/// low l - 1 bits (one comparison). Z_p: with H = (p + 1) / 2 the first negative value and
/// s = x0 + x1 (no reduction), x < 0 iff s is in [H, p) or s >= p + H; party 0 knows which of the
/// two thresholds H - x0 or p + H - x0 can be met, so two comparisons against x1 decide it:
/// x < 0 = [x1 >= t1] ^ [x1 >= p - x0] ^ [x0 >= H].
pub fn drelu(party: &mut Party, ring: ShareRing, shares: &[u64]) -> Result<Vec<bool>> {
    ring.check("DReLU input share", shares)?;
    let p0 = party.role() == Role::P0;
    match ring {
        ShareRing::PowerOfTwo { bits } => {
            if bits < 2 {
                return Err(MpcError::InvalidArgument("DReLU needs a ring of at least 2 bits".into()));
            }
            let low = bits - 1;
            let low_mask = if low == 64 { u64::MAX } else { (1u64 << low) - 1 };
            let inputs: Vec<u64> = shares.iter().map(|&x| if p0 { low_mask - (x & low_mask) } else { x & low_mask }).collect();
            let carry = less_than(party, &inputs, low, DEFAULT_DIGIT_BITS)?;
            Ok(shares.iter().zip(carry).map(|(&x, c)| ((x >> low) & 1 == 1) ^ c ^ p0).collect())
        }
        ShareRing::Prime(p) => {
            let (p, bits) = (p.value(), ring.bits());
            let h = p.div_ceil(2);
            let n = shares.len();
            // [x1 >= t] = [t - 1 < x1]; thresholds are in [1, p], so t - 1 fits in `bits` bits.
            let inputs: Vec<u64> = if p0 {
                let first = shares.iter().map(|&x0| if x0 < h { h - x0 } else { p + h - x0 } - 1);
                first.chain(shares.iter().map(|&x0| p - x0 - 1)).collect()
            } else {
                shares.iter().chain(shares.iter()).copied().collect()
            };
            let ge = less_than(party, &inputs, bits, DEFAULT_DIGIT_BITS)?;
            // Party 0 adds [x0 >= H] and the final negation.
            Ok((0..n).map(|i| ge[i] ^ ge[n + i] ^ (p0 && shares[i] >= h) ^ p0).collect())
        }
    }
}

/// Shares of b * x for a shared bit b and shared x (two correlated OTs, one each way):
/// (b0 ^ b1) x0 = b0 x0 + b1 (1 - 2 b0) x0, the second term from an OT on b1, and alike for x1.
pub fn select(party: &mut Party, ring: ShareRing, bits: &[bool], shares: &[u64]) -> Result<Vec<u64>> {
    if bits.len() != shares.len() {
        return Err(MpcError::InvalidArgument(format!("select of {} values by {} bits", shares.len(), bits.len())));
    }
    let deltas: Vec<u64> = bits.iter().zip(shares).map(|(&b, &x)| if b { ring.neg(x) } else { x }).collect();
    let (sent, received) = party.both_ways(|p| p.correlated_ot_send(ring, &deltas), |p| p.correlated_ot_receive(ring, bits))?;
    Ok((0..shares.len())
        .map(|i| {
            let own = if bits[i] { shares[i] } else { 0 };
            ring.add(ring.sub(own, sent[i]), received[i])
        })
        .collect())
}

/// Shares of ReLU(x) = max(x, 0), exact.
pub fn relu(party: &mut Party, ring: ShareRing, shares: &[u64]) -> Result<Vec<u64>> {
    let positive = drelu(party, ring, shares)?;
    select(party, ring, &positive, shares)
}

/// The bias that makes a truncation's input non-negative and below M/2 (a multiple of 2^shift),
/// and the signed input range [-bias, limit] in which truncation is valid.
pub fn truncation_range(ring: ShareRing, shift: u32) -> Result<(u64, u64)> {
    let quarter = match ring {
        ShareRing::PowerOfTwo { bits } if bits >= 3 && shift <= bits - 2 => 1u64 << (bits - 2),
        ShareRing::Prime(p) => (p.value() - 1) / 4,
        _ => return Err(MpcError::InvalidArgument(format!("cannot truncate by {shift} bits in {ring:?}"))),
    };
    let bias = (quarter >> shift) << shift;
    if bias == 0 {
        return Err(MpcError::InvalidArgument(format!("a shift of {shift} bits leaves no room in {ring:?}")));
    }
    Ok((bias, ring.max_positive() - bias))
}

/// Shares of x / 2^shift rounded down, with an error of at most one unit, for signed x in the
/// range of `truncation_range` (about [-M/4, M/4]).
///
/// Party 0 adds a bias B (a multiple of 2^shift, about M/4) so that y = x + B is in [0, M/2).
/// Then the wrap of y0 + y1 past M is w = msb-half(y0) OR msb-half(y1) (both shares below M/2
/// cannot wrap; both at or above must; one of each must, else y would be at least M/2), which
/// is one product of private bits (Cheetah's truncation with known MSB, Huang et al. 2022),
/// in Z_2^l computed modulo 2^s only.
/// y / 2^s = y0 >> s + y1 >> s - w (M >> s) + (r0 + r1 - w (M mod 2^s)) / 2^s, the last term in
/// (-1, 2): the result is floor(x / 2^s) - 1, floor(x / 2^s) or (Z_p only) floor(x / 2^s) + 1.
/// In Z_{2^l}, M mod 2^s = 0 and the error is in {-1, 0}.
pub fn truncate(party: &mut Party, ring: ShareRing, shares: &[u64], shift: u32) -> Result<Vec<u64>> {
    ring.check("truncation input share", shares)?;
    if shift == 0 {
        return Ok(shares.to_vec());
    }
    let (bias, _) = truncation_range(ring, shift)?;
    let p0 = party.role() == Role::P0;
    let y: Vec<u64> = shares.iter().map(|&x| if p0 { ring.add(x, bias) } else { x }).collect();
    let half = ring.max_positive() + 1;
    let high: Vec<bool> = y.iter().map(|&v| v >= half).collect();
    // w = a OR b = a + b - ab on private bits a (party 0) and b (party 1). In Z_2^l only
    // w (2^l >> s) mod 2^l matters, which depends on w mod 2^s alone: the product is taken in
    // Z_2^s, so the OT carries s bits instead of l.
    let w_ring = match ring {
        ShareRing::PowerOfTwo { .. } => ShareRing::power_of_two(shift)?,
        ShareRing::Prime(_) => ring,
    };
    let both = private_bit_product(party, w_ring, &high)?;
    let m_shifted = (ring.modulus() >> shift) as u64;
    Ok((0..y.len())
        .map(|i| {
            let w = w_ring.sub(high[i] as u64, both[i]);
            let mut out = ring.sub(y[i] >> shift, ring.mul(w, ring.reduce(m_shifted)));
            if p0 {
                out = ring.sub(out, bias >> shift);
            }
            out
        })
        .collect())
}

/// Shares of floor(x / 2^shift) exactly, for signed x in the range of `truncation_range`, on a
/// prime ring (what the hybrid mode's plaintext moduli are).
///
/// As [`truncate`], party 0 adds the bias B so that y = x + B is in [0, p/2), and the wrap of
/// y0 + y1 is w = [y0 >= H] OR [y1 >= H]. With y_i = 2^s h_i + l_i and p = 2^s ph + pl,
/// floor(y / 2^s) = h0 + h1 - w ph + delta, where the low bits' carry is
/// delta = (1 - w) [l0 + l1 >= 2^s] + w ([l0 + l1 >= pl + 2^s] - [l0 + l1 < pl]).
/// The three conditions are comparisons of party 0's threshold with party 1's l1 on s + 1 bits
/// (batched); the selections by w are ANDs of boolean shares; delta and w become arithmetic
/// shares in one bit-to-ring conversion. No error, at about three short comparisons per value.
pub fn truncate_exact(party: &mut Party, ring: ShareRing, shares: &[u64], shift: u32) -> Result<Vec<u64>> {
    ring.check("truncation input share", shares)?;
    if shift == 0 {
        return Ok(shares.to_vec());
    }
    let ShareRing::Prime(p) = ring else {
        return Err(MpcError::InvalidArgument("exact truncation is built for prime rings; use truncate on Z_2^l".into()));
    };
    let (bias, _) = truncation_range(ring, shift)?;
    let n = shares.len();
    let p0 = party.role() == Role::P0;
    let y: Vec<u64> = shares.iter().map(|&x| if p0 { ring.add(x, bias) } else { x }).collect();
    let half = ring.max_positive() + 1;
    let high: Vec<bool> = y.iter().map(|&v| v >= half).collect();
    let low_mask = (1u64 << shift) - 1;
    let (ph, pl) = (p.value() >> shift, p.value() & low_mask);
    // Boolean shares of w = a OR b = a ^ b ^ (a AND b), a party 0's bit and b party 1's.
    let zeros = vec![false; n];
    let (ax, bx) = if p0 { (high.clone(), zeros) } else { (zeros, high.clone()) };
    let ab = crate::compare::and(party, &ax, &bx)?;
    let w: Vec<bool> = (0..n).map(|i| high[i] ^ ab[i]).collect();
    // [a < l1] on s + 1 bits as [a + 1 < l1 + 1]: party 0's a + 1 = 0 makes it always true, a = 2^s - 1 always false.
    let top = low_mask; // 2^s - 1: [top < l1] is false for every l1 < 2^s
    let inputs: Vec<u64> = if p0 {
        let l0 = |i: usize| y[i] & low_mask;
        let c1 = (0..n).map(|i| low_mask - l0(i) + 1);
        let c2 = (0..n).map(|i| if pl >= l0(i) { top + 1 } else { pl + low_mask - l0(i) + 1 });
        // d3 = [pl - l0 - 1 < l1] = NOT [l0 + l1 < pl]; when pl <= l0 the condition is false, d3 true.
        let d3 = (0..n).map(|i| if pl > l0(i) { pl - l0(i) } else { 0 });
        c1.chain(c2).chain(d3).collect()
    } else {
        let l1 = y.iter().map(|&v| (v & low_mask) + 1);
        l1.clone().chain(l1.clone()).chain(l1).collect()
    };
    let cmp = less_than(party, &inputs, shift + 1, DEFAULT_DIGIT_BITS)?;
    // t1 = NOT w AND c1, t2 = w AND c2, t3 = w AND NOT d3 (negating a share: party 0 flips it).
    let not_w: Vec<bool> = w.iter().map(|&b| b ^ p0).collect();
    let not_d3: Vec<bool> = cmp[2 * n..].iter().map(|&b| b ^ p0).collect();
    let left: Vec<bool> = not_w.iter().chain(&w).chain(&w).copied().collect();
    let right: Vec<bool> = cmp[..n].iter().chain(&cmp[n..2 * n]).chain(&not_d3).copied().collect();
    let t = crate::compare::and(party, &left, &right)?;
    let arith = bits_to_ring(party, ring, &t.iter().chain(&w).copied().collect::<Vec<_>>())?;
    let ph = ring.reduce(ph);
    Ok((0..n)
        .map(|i| {
            let delta = ring.sub(ring.add(arith[i], arith[n + i]), arith[2 * n + i]);
            let mut out = ring.add(ring.sub(y[i] >> shift, ring.mul(arith[3 * n + i], ph)), delta);
            if p0 {
                out = ring.sub(out, bias >> shift);
            }
            out
        })
        .collect())
}

/// Shares of the maximum of each window. `shares` holds `windows` groups of `size` values each
/// (window-major); a tournament of pairwise max(a, b) = b + ReLU(a - b) takes log2(size)
/// rounds of comparisons. Values must lie within a quarter of the ring either side of zero so
/// that differences do not wrap.
pub fn max_pool(party: &mut Party, ring: ShareRing, shares: &[u64], size: usize) -> Result<Vec<u64>> {
    if size == 0 || shares.len() % size != 0 {
        return Err(MpcError::InvalidArgument(format!("{} values do not split into windows of {size}", shares.len())));
    }
    let windows = shares.len() / size;
    let mut groups: Vec<Vec<u64>> = (0..windows).map(|w| shares[w * size..(w + 1) * size].to_vec()).collect();
    let mut width = size;
    while width > 1 {
        let pairs = width / 2;
        let mut diffs = Vec::with_capacity(windows * pairs);
        for g in &groups {
            diffs.extend((0..pairs).map(|k| ring.sub(g[2 * k], g[2 * k + 1])));
        }
        let relu_diff = relu(party, ring, &diffs)?;
        for (w, g) in groups.iter_mut().enumerate() {
            let mut next: Vec<u64> = (0..pairs).map(|k| ring.add(g[2 * k + 1], relu_diff[w * pairs + k])).collect();
            if width % 2 == 1 {
                next.push(g[width - 1]);
            }
            *g = next;
        }
        width = width.div_ceil(2);
    }
    Ok(groups.into_iter().map(|g| g[0]).collect())
}

/// Converts shares of signed values from one ring to another, exactly. The values must be
/// representable in the target ring.
///
/// Party 0 adds H = floor(M/2) so that y = x + H is an unsigned value in [0, M); the wrap
/// w = [y0 + y1 >= M] = [M - 1 - y0 < y1] is one comparison; then in the target ring
/// x = y0 + y1 - w M - H, with w converted to the target ring by one correlated OT.
pub fn convert(party: &mut Party, from: ShareRing, to: ShareRing, shares: &[u64]) -> Result<Vec<u64>> {
    from.check("conversion input share", shares)?;
    let p0 = party.role() == Role::P0;
    let h = from.max_positive();
    let m_minus_1 = (from.modulus() - 1) as u64;
    let y: Vec<u64> = shares.iter().map(|&x| if p0 { from.add(x, h) } else { x }).collect();
    let inputs: Vec<u64> = y.iter().map(|&v| if p0 { m_minus_1 - v } else { v }).collect();
    let wrap = less_than(party, &inputs, from.bits(), DEFAULT_DIGIT_BITS)?;
    let w = bits_to_ring(party, to, &wrap)?;
    let m_in_to = to.reduce((from.modulus() % to.modulus()) as u64);
    let h_in_to = to.reduce(h);
    Ok((0..y.len())
        .map(|i| {
            let mut out = to.sub(to.reduce(y[i]), to.mul(w[i], m_in_to));
            if p0 {
                out = to.sub(out, h_in_to);
            }
            out
        })
        .collect())
}
