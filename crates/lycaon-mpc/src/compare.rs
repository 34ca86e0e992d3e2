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
    bits::Bits,
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
/// (b, b') and c = a & b, c' = a & b', CrypTFlow2's correlated triples, each as a packed vector.
struct Triples {
    a: Bits,
    b: [Bits; 2],
    c: [Bits; 2],
}

/// One random OT of 2-bit words each way and nothing else: party i's OT as sender gives it
/// b_i = s0 ^ s1 and s0, as receiver a_i = its choice and s_{a_i}; s0 ^ s_a = a & (s0 ^ s1)
/// makes the cross terms (ABY's OT-based triples, a word wide), 64 triples per machine word.
fn correlated_triples(party: &mut Party, count: usize) -> Result<Triples> {
    let ((s0, s1), (a, chosen)) = party.both_ways(|p| p.random_word_ot_send(count, 2), |p| p.random_word_ot_receive(count, 2))?;
    let b = [s0[0].xor(&s1[0]), s0[1].xor(&s1[1])];
    let c = [0, 1].map(|k| {
        let (a, b, s0, chosen) = (a.words(), b[k].words(), s0[k].words(), chosen[k].words());
        Bits::from_word_fn(count, |w| (a[w] & b[w]) ^ s0[w] ^ chosen[w])
    });
    Ok(Triples { a, b, c })
}

/// Shares of x & y for shared bit vectors x and y (one round).
pub fn and(party: &mut Party, x: &[bool], y: &[bool]) -> Result<Vec<bool>> {
    Ok(and_sharing_left(party, &Bits::from_bools(x), &Bits::from_bools(y), &Bits::default())?.0.to_bools())
}

/// Shares of x & y and of x[..m] & y2 (m = y2.len() <= x.len()) in one round, each pair of
/// products with a common left operand from one correlated triple: two COTs and three opened
/// bits per party for both products (two COTs and two bits for a lone product). Beaver's
/// product, 64 gates a word: with d = x ^ a and e = y ^ b opened, x & y = c ^ d b ^ e a ^ d e
/// (party 0 adds d e).
fn and_sharing_left(party: &mut Party, x: &Bits, y: &Bits, y2: &Bits) -> Result<(Bits, Bits)> {
    if x.len() != y.len() || y2.len() > x.len() {
        return Err(MpcError::InvalidArgument(format!("AND of {} bits with {} and {}", x.len(), y.len(), y2.len())));
    }
    let (n, m) = (x.len(), y2.len());
    let Triples { a, b, c } = correlated_triples(party, n)?;
    let mut opened = x.xor(&a);
    opened.append(&y.xor(&b[0]));
    opened.append(&y2.xor(&b[1].range(0, m)));
    let theirs = party.exchange_bits(&opened)?;
    let both = opened.xor(&theirs);
    let (d, e, e2) = (both.range(0, n), both.range(n, n), both.range(2 * n, m));
    let first = if party.role() == Role::P0 { u64::MAX } else { 0 };
    let product = |len: usize, e: &Bits, k: usize| {
        let (a, b, c, d, e) = (a.words(), b[k].words(), c[k].words(), d.words(), e.words());
        Bits::from_word_fn(len, |w| c[w] ^ (d[w] & b[w]) ^ (e[w] & a[w]) ^ (first & d[w] & e[w]))
    };
    Ok((product(n, &e, 0), product(m, &e2, 1)))
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
    // Leaves: per digit j, shares of lt_j and eq_j. The top digit may be narrower. The
    // lowest digit's eq is never used (lt = XOR_j lt_j AND_{k > j} eq_k), so its OT carries
    // one bit per message, and the tree never forms eq for the chain of lowest nodes.
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
    let leaves = match party.role() {
        Role::P0 => {
            let mut tables = Vec::with_capacity(groups.len());
            for (range, width, msg_bits) in &groups {
                let (count, with_eq) = (range.len() * n, *msg_bits == 2);
                // Each instance's messages are one of 2^width rows: those of its digit x.
                let rows: Vec<Vec<u8>> =
                    (0..1u64 << width).map(|x| (0..1u64 << width).map(|v| (x < v) as u8 | (((x == v) && with_eq) as u8) << 1).collect()).collect();
                let mut table = Vec::with_capacity(count << width);
                for j in range.clone() {
                    for &x in values {
                        table.extend_from_slice(&rows[digit(x, j, *width) as usize]);
                    }
                }
                tables.push((*width, *msg_bits, table));
            }
            party.one_of_n_send(&tables.iter().map(|(k, m, t)| (*k, *m, &t[..])).collect::<Vec<_>>())?
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
            party.one_of_n_receive(&batches)?
        }
    };
    // Each digit's shares of lt and eq, packed.
    let (mut lt, mut eq) = (Vec::with_capacity(digits), Vec::with_capacity(digits));
    for ((range, _, _), got) in groups.iter().zip(&leaves) {
        for row in (0..range.len()).map(|j| &got[j * n..(j + 1) * n]) {
            lt.push(Bits::from_fn(n, |i| row[i] & 1 == 1));
            eq.push(Bits::from_fn(n, |i| row[i] & 2 == 2));
        }
    }
    // Combine neighbouring digits (low, high) level by level. Pair 0 holds the lowest chain:
    // it needs only lt' = lt_hi ^ (eq_hi & lt_lo); the other pairs also eq' = eq_hi & eq_lo,
    // both products of eq_hi, so one correlated triple serves them. Operands: pairs 1.. first,
    // then pair 0's lone product.
    while lt.len() > 1 {
        let pairs = lt.len() / 2;
        let (mut left, mut right, mut right2) = (Bits::with_capacity(pairs * n), Bits::with_capacity(pairs * n), Bits::with_capacity(pairs * n));
        for p in (1..pairs).chain([0]) {
            left.append(&eq[2 * p + 1]);
            right.append(&lt[2 * p]);
            if p > 0 {
                right2.append(&eq[2 * p]);
            }
        }
        let (lt_products, eq_products) = and_sharing_left(party, &left, &right, &right2)?;
        let (mut new_lt, mut new_eq) = (Vec::with_capacity(pairs + 1), Vec::with_capacity(pairs + 1));
        for p in 0..pairs {
            let at = if p == 0 { (pairs - 1) * n } else { (p - 1) * n };
            new_lt.push(lt[2 * p + 1].xor(&lt_products.range(at, n)));
            // The lowest chain's eq is never used.
            new_eq.push(if p > 0 { eq_products.range(at, n) } else { Bits::zeros(n) });
        }
        if lt.len() % 2 == 1 {
            new_lt.push(lt.pop().expect("an odd level has a top digit"));
            new_eq.push(eq.pop().expect("an odd level has a top digit"));
        }
        lt = new_lt;
        eq = new_eq;
    }
    // bits >= 1, so there is one digit at least.
    Ok(lt.swap_remove(0).to_bools())
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
