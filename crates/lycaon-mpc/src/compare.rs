//! Boolean shares and the millionaires' comparison.
//!
//! A shared bit is x = x0 ^ x1. AND gates use Beaver triples made from random bit OTs in both
//! directions with no communication of their own (ABY's OT-based triples): party 0's random OT
//! (s0, s1) against party 1's choice c gives a0 * b1 = s0 ^ s_c with a0 = s0 ^ s1, b1 = c.
//!
//! Comparison follows CrypTFlow2 (Rathee et al., CCS 2020, Alg. 1): the l-bit inputs are cut into
//! digits of m bits; per digit a 1-out-of-2^m OT gives shares of [x_j < y_j] and [x_j = y_j];
//! a tree of AND gates combines them, lt = lt_hi ^ (eq_hi & lt_lo), eq = eq_hi & eq_lo, in
//! log2(l/m) rounds. With silent OT the OTs cost almost nothing beyond their messages (Cheetah,
//! Huang et al., USENIX Security 2022).

use crate::{
    party::{Party, Role},
    ring::ShareRing,
    MpcError, Result,
};

/// Digit width of the comparison's leaf OTs. CrypTFlow2 and Cheetah use 4; with silent OT the
/// per-digit messages (2 * 2^m bits) dominate and 3 sends the fewest bytes: on 63 bits 91 B against
/// 104 B per comparison plus multiplexer (see implementation_notes/two-party.md).
pub const DEFAULT_DIGIT_BITS: u32 = 3;

/// Shares of `count` random AND triples (a, b, c = a & b).
fn and_triples(party: &mut Party, count: usize) -> Result<(Vec<bool>, Vec<bool>, Vec<bool>)> {
    let (mine, theirs) = party.both_ways(|p| p.random_bit_ot_send(count), |p| p.random_bit_ot_receive(count))?;
    let (choices, chosen) = theirs;
    let a: Vec<bool> = mine.iter().map(|(s0, s1)| s0 ^ s1).collect();
    let b = choices;
    let c = (0..count).map(|i| (a[i] & b[i]) ^ mine[i].0 ^ chosen[i]).collect();
    Ok((a, b, c))
}

/// Shares of x & y for shared bit vectors x and y (one round).
pub fn and(party: &mut Party, x: &[bool], y: &[bool]) -> Result<Vec<bool>> {
    if x.len() != y.len() {
        return Err(MpcError::InvalidArgument(format!("AND of {} and {} bits", x.len(), y.len())));
    }
    let n = x.len();
    let (a, b, c) = and_triples(party, n)?;
    let mut opened: Vec<bool> = (0..n).map(|i| x[i] ^ a[i]).collect();
    opened.extend((0..n).map(|i| y[i] ^ b[i]));
    let theirs = party.exchange_bits(&opened)?;
    let first = party.role() == Role::P0;
    Ok((0..n)
        .map(|i| {
            let d = opened[i] ^ theirs[i];
            let e = opened[n + i] ^ theirs[n + i];
            c[i] ^ (d & b[i]) ^ (e & a[i]) ^ (first & d & e)
        })
        .collect())
}

/// Shares of [x < y] where party 0 holds the x and party 1 the y (each passes its own values),
/// all below 2^bits.
pub fn less_than(party: &mut Party, values: &[u64], bits: u32, digit_bits: u32) -> Result<Vec<bool>> {
    compare(party, values, bits, digit_bits)
}

fn compare(party: &mut Party, values: &[u64], bits: u32, digit_bits: u32) -> Result<Vec<bool>> {
    if !(1..=64).contains(&bits) || !(1..=8).contains(&digit_bits) {
        return Err(MpcError::InvalidArgument(format!("comparison of {bits}-bit values in {digit_bits}-bit digits")));
    }
    let n = values.len();
    if bits < 64 {
        if let Some(i) = values.iter().position(|&v| v >> bits != 0) {
            return Err(MpcError::InvalidArgument(format!("comparison input {i} does not fit in {bits} bits")));
        }
    }
    let digits = bits.div_ceil(digit_bits) as usize;
    // Leaves, digit-major: lt[j * n + i], eq[j * n + i]. The top digit may be narrower. The
    // lowest digit's eq is never used (lt = XOR_j lt_j AND_{k > j} eq_k), so its OT carries
    // one bit per message, and the tree never forms eq for the chain of lowest nodes.
    let mut lt = vec![false; digits * n];
    let mut eq = vec![false; digits * n];
    let top_width = bits - digit_bits * (digits as u32 - 1);
    let width_of = |j: usize| if j + 1 == digits { top_width } else { digit_bits };
    // Groups of digits sharing (digit width, message bits), each one batch of 1-of-N OTs; all
    // batches travel in one round trip.
    let mut groups: Vec<(std::ops::Range<usize>, u32, u32)> = Vec::new();
    for j in 0..digits {
        let key = (width_of(j), if j == 0 { 1 } else { 2 });
        match groups.last_mut() {
            Some((range, w, m)) if (*w, *m) == key => range.end = j + 1,
            _ => groups.push((j..j + 1, key.0, key.1)),
        }
    }
    let digit = |x: u64, j: usize, width: u32| (x >> (j as u32 * digit_bits)) & ((1u64 << width) - 1);
    match party.role() {
        Role::P0 => {
            let mut batches = Vec::with_capacity(groups.len());
            for (range, width, msg_bits) in &groups {
                let (first_digit, count, with_eq) = (range.start, range.len() * n, *msg_bits == 2);
                let masks = party.random_bits(2 * count);
                let mut messages = Vec::with_capacity(count << width);
                for idx in 0..count {
                    let (j, i) = (first_digit + idx / n, idx % n);
                    let (m_lt, m_eq) = (masks[2 * idx], masks[2 * idx + 1] && with_eq);
                    let xd = digit(values[i], j, *width);
                    messages.extend((0..1u64 << width).map(|v| ((xd < v) ^ m_lt) as u8 | ((((xd == v) && with_eq) ^ m_eq) as u8) << 1));
                    lt[first_digit * n + idx] = m_lt;
                    eq[first_digit * n + idx] = m_eq;
                }
                batches.push((*width, *msg_bits, messages));
            }
            party.one_of_n_send(&batches.iter().map(|(k, m, msgs)| (*k, *m, &msgs[..])).collect::<Vec<_>>())?;
        }
        Role::P1 => {
            let choices: Vec<Vec<u32>> = groups
                .iter()
                .map(|(range, width, _)| {
                    (0..range.len() * n)
                        .map(|idx| {
                            let (j, i) = (range.start + idx / n, idx % n);
                            digit(values[i], j, *width) as u32
                        })
                        .collect()
                })
                .collect();
            let batches: Vec<(u32, u32, &[u32])> = groups.iter().zip(&choices).map(|((_, w, m), c)| (*w, *m, &c[..])).collect();
            let got = party.one_of_n_receive(&batches)?;
            for ((range, _, _), got) in groups.iter().zip(got) {
                for (idx, m) in got.into_iter().enumerate() {
                    lt[range.start * n + idx] = m & 1 == 1;
                    eq[range.start * n + idx] = m & 2 == 2;
                }
            }
        }
    }
    // Combine neighbouring digits (low, high) level by level. Pair 0 holds the lowest chain:
    // it needs only lt' = lt_hi ^ (eq_hi & lt_lo); the other pairs also eq' = eq_hi & eq_lo,
    // except at the root.
    let mut level = digits;
    while level > 1 {
        let pairs = level / 2;
        let last = level == 2;
        let mut left = Vec::with_capacity(2 * pairs * n);
        let mut right = Vec::with_capacity(2 * pairs * n);
        for p in 0..pairs {
            let (lo, hi) = (2 * p * n, (2 * p + 1) * n);
            left.extend_from_slice(&eq[hi..hi + n]);
            right.extend_from_slice(&lt[lo..lo + n]);
        }
        for p in 1..pairs {
            let (lo, hi) = (2 * p * n, (2 * p + 1) * n);
            left.extend_from_slice(&eq[hi..hi + n]);
            right.extend_from_slice(&eq[lo..lo + n]);
        }
        let products = if last { and(party, &left[..n], &right[..n])? } else { and(party, &left, &right)? };
        let next = level.div_ceil(2);
        let mut new_lt = vec![false; next * n];
        let mut new_eq = vec![false; next * n];
        for p in 0..pairs {
            let hi = (2 * p + 1) * n;
            for i in 0..n {
                new_lt[p * n + i] = lt[hi + i] ^ products[p * n + i];
                if p > 0 {
                    new_eq[p * n + i] = products[(pairs + p - 1) * n + i];
                }
            }
        }
        if level % 2 == 1 {
            let top = (level - 1) * n;
            new_lt[pairs * n..].copy_from_slice(&lt[top..top + n]);
            new_eq[pairs * n..].copy_from_slice(&eq[top..top + n]);
        }
        lt = new_lt;
        eq = new_eq;
        level = next;
    }
    lt.truncate(n);
    Ok(lt)
}

/// Arithmetic shares in `ring` of shared bits (one correlated OT each:
/// b = b0 + b1 - 2 b0 b1, the cross term from party 0's OT on party 1's bit).
pub fn bits_to_ring(party: &mut Party, ring: ShareRing, bits: &[bool]) -> Result<Vec<u64>> {
    let cross = private_bit_product(party, ring, bits)?;
    Ok(bits.iter().zip(cross).map(|(&b, c)| ring.sub(b as u64, ring.add(c, c))).collect())
}

/// Arithmetic shares of the product of two private bits, party 0's `mine` times party 1's.
pub fn private_bit_product(party: &mut Party, ring: ShareRing, mine: &[bool]) -> Result<Vec<u64>> {
    match party.role() {
        Role::P0 => {
            let r = party.correlated_ot_send(ring, &mine.iter().map(|&b| b as u64).collect::<Vec<_>>())?;
            Ok(r.into_iter().map(|r| ring.neg(r)).collect())
        }
        Role::P1 => party.correlated_ot_receive(ring, mine),
    }
}
