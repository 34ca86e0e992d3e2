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

/// The largest |x| that [`drelu_bounded`] and [`relu_bounded`] accept on `ring`: a quarter of
/// the ring, as truncation and max-pooling need anyway.
pub fn bounded_range(ring: ShareRing) -> u64 {
    ((ring.modulus() - 1) / 4) as u64
}

/// Shares of DReLU(x) = [x >= 0] for |x| <= [`bounded_range`]: on Z_p one comparison instead of
/// [`drelu`]'s two ([`drelu_up_to`] with the bound B; Z_{2^l} needs one either way and takes
/// [`drelu`]'s). Out-of-range inputs give wrong bits; the caller guarantees the range.
pub fn drelu_bounded(party: &mut Party, ring: ShareRing, shares: &[u64]) -> Result<Vec<bool>> {
    match ring {
        ShareRing::Prime(_) => drelu_up_to(party, ring, shares, bounded_range(ring)),
        ShareRing::PowerOfTwo { .. } => drelu(party, ring, shares),
    }
}

/// Shares of ReLU(x) for |x| <= [`bounded_range`] (one comparison on Z_p: [`drelu_bounded`]).
pub fn relu_bounded(party: &mut Party, ring: ShareRing, shares: &[u64]) -> Result<Vec<u64>> {
    let positive = drelu_bounded(party, ring, shares)?;
    select(party, ring, &positive, shares)
}

/// Shares of DReLU(x) = [x >= 0] for |x| <= `bound`: the comparison runs on the k bits the bound
/// needs (k = [`magnitude_bits`]) rather than the ring's (a layer's values need far fewer bits
/// than its ring holds).
///
/// Z_{2^l}: party 0 adds 2^k, so y = x + 2^k is in (0, 2^(k+1)); 2^(k+1) divides 2^l, so each
/// party reduces its share mod 2^(k+1) alone and the reduced shares still sum to y there. Then
/// x >= 0 iff y >= 2^k iff y is negative as an element of Z_{2^(k+1)}: one [`drelu`] on k + 1
/// bits (a k-bit comparison), negated.
///
/// Z_p, bound within [`bounded_range`]: [`small_shares_in`] moves x to Z_{2^(k+1)} for one
/// correlated OT of k + 1 bits; there one [`drelu`] on k + 1 bits. Past the bounded range:
/// [`drelu`] (two comparisons of the ring's bits).
///
/// Exact for every input in range; out-of-range inputs give wrong bits (the caller guarantees
/// the range, as the hybrid runtime does from the program's bounds).
pub fn drelu_up_to(party: &mut Party, ring: ShareRing, shares: &[u64], bound: u64) -> Result<Vec<bool>> {
    let k = magnitude_bits(bound);
    match ring {
        ShareRing::Prime(_) if bound <= bounded_range(ring) => {
            let narrow = ShareRing::power_of_two(k + 1)?;
            let x = small_shares_in(party, ring, shares, bound, narrow)?;
            drelu(party, narrow, &x)
        }
        ShareRing::Prime(_) => drelu(party, ring, shares),
        ShareRing::PowerOfTwo { bits } if k + 2 <= bits => {
            ring.check("DReLU input share", shares)?;
            let narrow = ShareRing::power_of_two(k + 1)?;
            let (mask, offset) = ((1u64 << (k + 1)) - 1, 1u64 << k);
            let p0 = party.role() == Role::P0;
            let y: Vec<u64> = shares.iter().map(|&x| if p0 { x.wrapping_add(offset) & mask } else { x & mask }).collect();
            let negative = drelu(party, narrow, &y)?;
            Ok(negative.into_iter().map(|b| b ^ p0).collect())
        }
        ShareRing::PowerOfTwo { .. } => drelu(party, ring, shares),
    }
}

/// Shares in the power-of-two ring `to` of x, shared on the prime ring `ring` with
/// |x| <= `bound` <= [`bounded_range`] (x must fit `to` as a signed value).
///
/// Party 0 adds the bound, so y = x + bound is in [0, H), H = (p + 1) / 2. The shares' wrap is
/// then w = a OR b = a + b - ab with a = [y0 >= H] party 0's bit and b = [y1 >= H] party 1's
/// (both below H cannot wrap, both at or above must, one of each must or y would reach H), so
/// Y_i = y_i - (its own bit) p satisfy Y0 + Y1 = y - ab p over the integers. Each party reduces
/// its Y_i mod 2^m alone; the cross term ab (p mod 2^m) is one correlated OT of m bits, party 1
/// the sender (correlation b (p mod 2^m)) and party 0 choosing by a; party 0 then takes the
/// bound off again.
fn small_shares_in(party: &mut Party, ring: ShareRing, shares: &[u64], bound: u64, to: ShareRing) -> Result<Vec<u64>> {
    let (ShareRing::Prime(p), ShareRing::PowerOfTwo { .. }) = (ring, to) else {
        return Err(MpcError::InvalidArgument(format!("moving shares from {ring:?} to {to:?}: only a prime ring to a power-of-two ring")));
    };
    if bound > bounded_range(ring) {
        return Err(MpcError::InvalidArgument(format!("moving values up to {bound} out of a {}-bit prime ring: at most a quarter of it", ring.bits())));
    }
    ring.check("share", shares)?;
    let p0 = party.role() == Role::P0;
    let half = ring.max_positive() + 1;
    let y: Vec<u64> = shares.iter().map(|&x| if p0 { ring.add(x, bound) } else { x }).collect();
    let high: Vec<bool> = y.iter().map(|&v| v >= half).collect();
    let cross = wrap_cross_term(party, p.value(), &high, to.modulus())?;
    let bound = to.reduce(bound);
    Ok((0..y.len())
        .map(|i| {
            let own = to.add(unwrapped_share(to, y[i], high[i], p.value()), cross[i]);
            if p0 {
                to.sub(own, bound)
            } else {
                own
            }
        })
        .collect())
}

/// Y_i = y_i - (its own bit [y_i >= H]) p, reduced in `r`: a party's share with its own part
/// of the wrap taken off (see [`small_shares_in`]).
fn unwrapped_share(r: ShareRing, y: u64, high: bool, p: u64) -> u64 {
    r.sub(r.reduce(y), if high { r.reduce(p) } else { 0 })
}

/// Shares modulo M (2 <= M <= 2^64) of a b p, the cross term of a prime ring's wrap (see
/// [`small_shares_in`]): `high` is party 0's bit a or party 1's b. One correlated OT of
/// log2(M) bits, party 1 the sender (correlation b (p mod M)) and party 0 choosing by a; party 1
/// knows its share before the OT's last message, so what it sends next travels with it.
fn wrap_cross_term(party: &mut Party, p: u64, high: &[bool], modulus: u128) -> Result<Vec<u64>> {
    let p_low = (u128::from(p) % modulus) as u64;
    if party.role() == Role::P0 {
        party.correlated_ot_receive_modulo(modulus, high)
    } else {
        let correlations: Vec<u64> = high.iter().map(|&b| if b { p_low } else { 0 }).collect();
        let pads = party.correlated_ot_send_modulo(modulus, &correlations)?;
        Ok(pads.into_iter().map(|r| ((modulus - u128::from(r)) % modulus) as u64).collect())
    }
}

/// Shares of DReLU(x) for |x| < 2^`magnitude_bits`: [`drelu_up_to`] 2^k - 1.
/// Errors: `InvalidArgument` for k = 0.
pub fn drelu_within(party: &mut Party, ring: ShareRing, shares: &[u64], magnitude_bits: u32) -> Result<Vec<bool>> {
    if magnitude_bits == 0 {
        return Err(MpcError::InvalidArgument("DReLU within 2^0: the magnitude bound needs at least 1 bit".into()));
    }
    drelu_up_to(party, ring, shares, u64::MAX >> 64u32.saturating_sub(magnitude_bits))
}

/// The k of [`drelu_up_to`] for |x| <= `bound`: the fewest bits with bound < 2^k.
pub fn magnitude_bits(bound: u64) -> u32 {
    (u64::BITS - bound.leading_zeros()).max(1)
}

/// Shares of ReLU(x) for |x| <= `bound` ([`drelu_up_to`], then [`select`] on the full shares).
/// Out-of-range inputs give wrong results; the caller guarantees the bound (the hybrid
/// runtime: from the program).
pub fn relu_up_to(party: &mut Party, ring: ShareRing, shares: &[u64], bound: u64) -> Result<Vec<u64>> {
    let positive = drelu_up_to(party, ring, shares, bound)?;
    select(party, ring, &positive, shares)
}

/// Shares of ReLU(x) for |x| < 2^`magnitude_bits` ([`drelu_within`], then
/// [`select`] on the full shares).
pub fn relu_within(party: &mut Party, ring: ShareRing, shares: &[u64], magnitude_bits: u32) -> Result<Vec<u64>> {
    let positive = drelu_within(party, ring, shares, magnitude_bits)?;
    select(party, ring, &positive, shares)
}

/// Shares of ReLU(floor(x / 2^shift)) on Z_{2^l} for |x| < 2^`magnitude_bits`: the truncation
/// ([`truncate`]), then a ReLU whose comparison runs on the `magnitude_bits - shift` bits the
/// truncated value has left ([`relu_within`]). Floor is monotone, so the sign survives the
/// truncation and one comparison decides both; the result is within one unit of the exact
/// ReLU(x >> shift), as [`truncate`]'s.
pub fn truncate_relu(party: &mut Party, ring: ShareRing, shares: &[u64], shift: u32, magnitude_bits: u32) -> Result<Vec<u64>> {
    if shift >= magnitude_bits {
        return Err(MpcError::InvalidArgument(format!("truncating {magnitude_bits}-bit values by {shift} bits leaves nothing to compare")));
    }
    let truncated = truncate(party, ring, shares, shift)?;
    // The truncation's error of one unit can reach 2^(k - s) itself, hence one bit of margin.
    relu_within(party, ring, &truncated, magnitude_bits - shift + 1)
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
    truncate_into(party, ring, ring, shares, shift)
}

/// [`truncate`] with the result in the ring `to` (a prime ring when `ring` is prime, else
/// `ring` itself): the formula above is an identity of integers, so its terms can be summed in
/// any ring that holds the result. It saves the conversion to the next layer's ring.
pub fn truncate_into(party: &mut Party, ring: ShareRing, to: ShareRing, shares: &[u64], shift: u32) -> Result<Vec<u64>> {
    let Some(Biased { bias, y, high }) = biased(party, ring, to, shares, shift)? else {
        return if ring == to { Ok(shares.to_vec()) } else { convert(party, ring, to, shares) };
    };
    let p0 = party.role() == Role::P0;
    // w = a OR b = a + b - ab on private bits a (party 0) and b (party 1). In Z_2^l only
    // w (2^l >> s) mod 2^l matters, which depends on w mod 2^s alone: the product is taken in
    // Z_2^s, so the OT carries s bits instead of l.
    let w_ring = match ring {
        ShareRing::PowerOfTwo { .. } => ShareRing::power_of_two(shift)?,
        ShareRing::Prime(_) => to,
    };
    let both = private_bit_product(party, w_ring, &high)?;
    let m_shifted = to.reduce((ring.modulus() >> shift) as u64);
    let bias_shifted = to.reduce(bias >> shift);
    Ok((0..y.len())
        .map(|i| {
            let w = w_ring.sub(high[i] as u64, both[i]);
            let mut out = to.sub(to.reduce(y[i] >> shift), to.mul(w, m_shifted));
            if p0 {
                out = to.sub(out, bias_shifted);
            }
            out
        })
        .collect())
}

/// What both truncations start from: party 0's bias B, each party's y_i (party 0's share plus
/// B) and its bit [y_i >= H] (a for party 0, b for party 1).
struct Biased {
    bias: u64,
    y: Vec<u64>,
    high: Vec<bool>,
}

/// Checks a truncation's shares and rings (into another ring only from a prime ring into a
/// prime ring) and biases the shares; None for a shift of 0, which only moves the shares to `to`.
fn biased(party: &Party, ring: ShareRing, to: ShareRing, shares: &[u64], shift: u32) -> Result<Option<Biased>> {
    ring.check("truncation input share", shares)?;
    if ring != to && !(matches!(ring, ShareRing::Prime(_)) && matches!(to, ShareRing::Prime(_))) {
        return Err(MpcError::InvalidArgument(format!("a truncation in {ring:?} cannot write its result in {to:?}")));
    }
    if shift == 0 {
        return Ok(None);
    }
    let (bias, _) = truncation_range(ring, shift)?;
    let p0 = party.role() == Role::P0;
    let y: Vec<u64> = shares.iter().map(|&x| if p0 { ring.add(x, bias) } else { x }).collect();
    let half = ring.max_positive() + 1;
    let high = y.iter().map(|&v| v >= half).collect();
    Ok(Some(Biased { bias, y, high }))
}

/// Shares of floor(x / 2^shift) exactly, for signed x in the range of `truncation_range`, on a
/// prime ring (what the hybrid mode's plaintext moduli are).
///
/// As [`truncate`], party 0 adds the bias B so that y = x + B is in [0, p/2); then
/// floor(y / 2^s) = (y - r) / 2^s with r = y mod 2^s, an integer division that is exact, so in
/// an odd ring it is a product with the inverse of 2^s. The shares of y wrap once or not at all,
/// and Y_i = y_i - (its own bit [y_i >= H]) p sum to y - ab p over the integers (see
/// [`small_shares_in`]); one correlated OT gives shares of the cross term ab p modulo 2^s q (q
/// the result's ring), which reduce to shares modulo 2^s (so each party has v_i with
/// v0 + v1 = r + 2^s c) and modulo q. The carry c = [v0 + v1 >= 2^s] is one comparison of s
/// bits, made arithmetic in q by one more correlated OT. Where q = p the shares of y are the
/// parties' own and the cross term is needed modulo 2^s only (an OT of s bits). No error.
pub fn truncate_exact(party: &mut Party, ring: ShareRing, shares: &[u64], shift: u32) -> Result<Vec<u64>> {
    truncate_exact_into(party, ring, ring, shares, shift)
}

/// [`truncate_exact`] with the result in the prime ring `to`: (Y0 + Y1 + ab p - r) / 2^s is an
/// identity of integers, summed in `to` as in any odd ring, saving the conversion to the next
/// layer's ring.
pub fn truncate_exact_into(party: &mut Party, ring: ShareRing, to: ShareRing, shares: &[u64], shift: u32) -> Result<Vec<u64>> {
    let Some(Biased { bias, y, high }) = biased(party, ring, to, shares, shift)? else {
        return if ring == to { Ok(shares.to_vec()) } else { convert(party, ring, to, shares) };
    };
    let ShareRing::Prime(p) = ring else {
        return Err(MpcError::InvalidArgument("exact truncation is built for prime rings; use truncate on Z_2^l".into()));
    };
    let ShareRing::Prime(q_modulus) = to else {
        return Err(MpcError::InvalidArgument(format!("exact truncation writes into a prime ring, not {to:?}")));
    };
    let n = y.len();
    let p0 = party.role() == Role::P0;
    let (p, q) = (p.value(), q_modulus.value());
    let low = ShareRing::power_of_two(shift)?;
    // The cross term modulo 2^s; where the result leaves the ring, also modulo q (one OT modulo
    // 2^s q where that fits 64 bits, else one OT per ring). In the ring itself y0 + y1 is y.
    let (cross_low, cross_q): (Vec<u64>, Option<Vec<u64>>) = if ring == to {
        (wrap_cross_term(party, p, &high, low.modulus())?, None)
    } else {
        match (1u128 << shift).checked_mul(u128::from(q)).filter(|&m| m <= 1 << 64) {
            Some(m) => {
                let (l, h) = wrap_cross_term(party, p, &high, m)?.into_iter().map(|t| (low.reduce(t), to.reduce(t))).unzip();
                (l, Some(h))
            }
            None => (wrap_cross_term(party, p, &high, low.modulus())?, Some(wrap_cross_term(party, p, &high, to.modulus())?)),
        }
    };
    // Y_i = y_i - bit_i p, modulo 2^s and modulo q.
    let own = |i: usize, r: ShareRing| unwrapped_share(r, y[i], high[i], p);
    let v: Vec<u64> = (0..n).map(|i| low.add(own(i, low), cross_low[i])).collect();
    // c = [v0 + v1 >= 2^s] = [2^s - 1 - v0 < v1].
    let operands: Vec<u64> = if p0 { v.iter().map(|&v| low.reduce(u64::MAX) - v).collect() } else { v.clone() };
    let carry = less_than(party, &operands, shift, DEFAULT_DIGIT_BITS)?;
    let carry = bits_to_ring(party, to, &carry)?;
    // 2^-s = ((q + 1) / 2)^s.
    let (two_s, inverse) = (to.reduce(1u64 << shift), q_modulus.pow(q.div_ceil(2), u64::from(shift)));
    let bias_shifted = to.reduce(bias >> shift);
    Ok((0..n)
        .map(|i| {
            // (Y_i + cross_i - v_i + 2^s c_i) / 2^s (y_i for Y_i + cross_i in the ring itself):
            // the shares of y - r, divided.
            let share_of_y = cross_q.as_ref().map_or(y[i], |cross| to.add(own(i, to), cross[i]));
            let numerator = to.add(to.sub(share_of_y, to.reduce(v[i])), to.mul(two_s, carry[i]));
            let out = to.mul(numerator, inverse);
            if p0 {
                to.sub(out, bias_shifted)
            } else {
                out
            }
        })
        .collect())
}

/// Shares of the maximum of each window. `shares` holds `windows` groups of `size` values each
/// (window-major); a tournament of pairwise max(a, b) = b + ReLU(a - b) takes log2(size)
/// rounds of comparisons. Values must lie within a quarter of the ring either side of zero so
/// that differences do not wrap.
pub fn max_pool(party: &mut Party, ring: ShareRing, shares: &[u64], size: usize) -> Result<Vec<u64>> {
    tournament(party, ring, shares, size, relu)
}

/// [`max_pool`] for values with |x| <= `bound`: every difference is within 2 `bound`, so each
/// step's ReLU is [`relu_up_to`] that (on Z_p one comparison of the bound's bits instead of
/// two of the ring's). Out-of-range values give wrong maxima; the caller guarantees the range
/// (the hybrid runtime: from the truncation that produced them). Errors: `InvalidArgument`
/// where 2 `bound` is past half the ring (differences would wrap).
pub fn max_pool_up_to(party: &mut Party, ring: ShareRing, shares: &[u64], size: usize, bound: u64) -> Result<Vec<u64>> {
    let difference = bound
        .checked_mul(2)
        .filter(|&d| d <= ring.max_positive())
        .ok_or_else(|| MpcError::InvalidArgument(format!("max-pooling values up to {bound}: their differences do not fit the {}-bit ring", ring.bits())))?;
    tournament(party, ring, shares, size, |p, r, s| relu_up_to(p, r, s, difference))
}

fn tournament(
    party: &mut Party,
    ring: ShareRing,
    shares: &[u64],
    size: usize,
    mut relu_of: impl FnMut(&mut Party, ShareRing, &[u64]) -> Result<Vec<u64>>,
) -> Result<Vec<u64>> {
    if size == 0 || !shares.len().is_multiple_of(size) {
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
        let relu_diff = relu_of(party, ring, &diffs)?;
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
