//! Boolean shares and the millionaires' comparison.
//!
//! A shared bit is x = x0 ^ x1. AND gates use Beaver triples made from random OTs in both
//! directions with no communication of their own (ABY's OT-based triples): party 0's random OT
//! (s0, s1) against party 1's choice c gives b0 * a1 = s0 ^ s_c with b0 = s0 ^ s1, a1 = c; with
//! 2-bit words one OT gives the cross terms of two triples sharing a.
//!
//! Comparison follows CrypTFlow2 (Rathee et al., CCS 2020, Alg. 1): the l-bit inputs are cut into
//! digits of m bits; per digit a 1-out-of-2^m OT gives shares of [x_j < y_j] and [x_j = y_j];
//! a tree of AND gates combines them, lt = lt_hi ^ (eq_hi & lt_lo), eq = eq_hi & eq_lo, in
//! log2(l/m) rounds, the two products of eq_hi from one correlated triple (CrypTFlow2, 3.1.1).
//! With silent OT the OTs cost almost nothing beyond their messages (Cheetah, Huang et al.,
//! USENIX Security 2022). The leaf OTs deliver XOR shares (`Party::one_of_n_send`): party 0's
//! share is fixed by a pad, so one of the 2^m messages need not be sent. In a silent session a
//! leaf takes one vector correlation (`ferret::VoleSender`) instead of m COTs.

use crate::{
    party::{Party, Role},
    ring::ShareRing,
    MpcError, Result,
};

/// Digit width of the comparison's leaf OTs, and of a silent session's vector correlations.
/// CrypTFlow2 and Cheetah use 4; with silent OT the per-digit messages (2 (2^m - 1) bits)
/// dominate: 3 is the fastest (ReLU on Z_2^37 with vector leaves: 42.8 B per element against
/// 52.1 B with 4 and no faster), 2 sends 4% fewer bytes but takes twice as long (see
/// implementation_notes/two-party.md).
pub const DEFAULT_DIGIT_BITS: u32 = 3;

/// Shares of `count` random AND triples whose first operand serves two products: a, the pair
/// b = (b, b') as a 2-bit word, and c = (a & b, a & b'), CrypTFlow2's correlated triples. One
/// random OT of 2-bit words each way and nothing else: party i's OT as sender gives it b_i = s0 ^ s1
/// and s0, as receiver a_i = its choice and s_{a_i}; s0 ^ s_a = a & (s0 ^ s1) makes the cross terms
/// (ABY's OT-based triples, a word wide).
fn correlated_triples(party: &mut Party, count: usize) -> Result<(Vec<bool>, Vec<u8>, Vec<u8>)> {
    let (mine, theirs) = party.both_ways(|p| p.random_word_ot_send(count, 2), |p| p.random_word_ot_receive(count, 2))?;
    let (a, chosen) = theirs;
    let b: Vec<u8> = mine.iter().map(|(s0, s1)| s0 ^ s1).collect();
    let c = (0..count).map(|i| (if a[i] { b[i] } else { 0 }) ^ mine[i].0 ^ chosen[i]).collect();
    Ok((a, b, c))
}

/// Shares of x & y for shared bit vectors x and y (one round).
pub fn and(party: &mut Party, x: &[bool], y: &[bool]) -> Result<Vec<bool>> {
    Ok(and_sharing_left(party, x, y, &[])?.0)
}

/// Shares of x & y and of x[..m] & y2 (m = y2.len() <= x.len()) in one round, each pair of
/// products with a common left operand from one correlated triple: two COTs and three opened
/// bits per party for both products (two COTs and two bits for a lone product).
fn and_sharing_left(party: &mut Party, x: &[bool], y: &[bool], y2: &[bool]) -> Result<(Vec<bool>, Vec<bool>)> {
    if x.len() != y.len() || y2.len() > x.len() {
        return Err(MpcError::InvalidArgument(format!("AND of {} bits with {} and {}", x.len(), y.len(), y2.len())));
    }
    let (n, m) = (x.len(), y2.len());
    let (a, b, c) = correlated_triples(party, n)?;
    let mut opened: Vec<bool> = (0..n).map(|i| x[i] ^ a[i]).collect();
    opened.extend((0..n).map(|i| y[i] ^ (b[i] & 1 == 1)));
    opened.extend((0..m).map(|i| y2[i] ^ (b[i] & 2 == 2)));
    let theirs = party.exchange_bits(&opened)?;
    let first = party.role() == Role::P0;
    let product = |i: usize, e: bool, bit: u8| {
        let d = opened[i] ^ theirs[i];
        (c[i] & bit != 0) ^ (d & (b[i] & bit != 0)) ^ (e & a[i]) ^ (first & d & e)
    };
    let xy = (0..n).map(|i| product(i, opened[n + i] ^ theirs[n + i], 1)).collect();
    let xy2 = (0..m).map(|i| product(i, opened[2 * n + i] ^ theirs[2 * n + i], 2)).collect();
    Ok((xy, xy2))
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
            let mut tables = Vec::with_capacity(groups.len());
            for (range, width, msg_bits) in &groups {
                let (first_digit, count, with_eq) = (range.start, range.len() * n, *msg_bits == 2);
                let mut table = Vec::with_capacity(count << width);
                for idx in 0..count {
                    let (j, i) = (first_digit + idx / n, idx % n);
                    let xd = digit(values[i], j, *width);
                    table.extend((0..1u64 << width).map(|v| (xd < v) as u8 | (((xd == v) && with_eq) as u8) << 1));
                }
                tables.push((*width, *msg_bits, table));
            }
            let shares = party.one_of_n_send(&tables.iter().map(|(k, m, t)| (*k, *m, &t[..])).collect::<Vec<_>>())?;
            for ((range, _, _), got) in groups.iter().zip(shares) {
                for (idx, m) in got.into_iter().enumerate() {
                    lt[range.start * n + idx] = m & 1 == 1;
                    eq[range.start * n + idx] = m & 2 == 2;
                }
            }
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
    // both products of eq_hi, so one correlated triple serves them. Operands: pairs 1.. first,
    // then pair 0's lone product.
    let mut level = digits;
    while level > 1 {
        let pairs = level / 2;
        let (mut left, mut right, mut right2) = (Vec::with_capacity(pairs * n), Vec::with_capacity(pairs * n), Vec::with_capacity(pairs * n));
        for p in (1..pairs).chain([0]) {
            let (lo, hi) = (2 * p * n, (2 * p + 1) * n);
            left.extend_from_slice(&eq[hi..hi + n]);
            right.extend_from_slice(&lt[lo..lo + n]);
            if p > 0 {
                right2.extend_from_slice(&eq[lo..lo + n]);
            }
        }
        let (lt_products, eq_products) = and_sharing_left(party, &left, &right, &right2)?;
        let next = level.div_ceil(2);
        let mut new_lt = vec![false; next * n];
        let mut new_eq = vec![false; next * n];
        for p in 0..pairs {
            let hi = (2 * p + 1) * n;
            let at = if p == 0 { (pairs - 1) * n } else { (p - 1) * n };
            for i in 0..n {
                new_lt[p * n + i] = lt[hi + i] ^ lt_products[at + i];
                if p > 0 {
                    new_eq[p * n + i] = eq_products[at + i];
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
