//! The CKKS parameters of a leveled (bootstrapping-free) network: the smallest ring whose
//! 128-bit bound (lycaon-rlwe's table of the HE standard) holds q_0, one scale prime per level
//! of the network's depth and the special primes of hybrid key switching, with enough slots
//! for the widest tensor (Python's `_choose_parameters` and `special_primes` in fhe.py).

use lycaon_ckks::rlwe::{Parameters, RlweError, MAX_LOG_QP_128};

use super::fail;
use crate::fhe::program::FheParameters;
use crate::Result;

/// The largest log2(QP) at 128-bit security for ring degree `n` (0 for a degree the table lacks).
pub fn max_log_qp(n: usize) -> u32 {
    MAX_LOG_QP_128.iter().find(|(m, _)| *m == n).map_or(0, |e| e.1)
}

/// Special primes for hybrid key switching within `budget` bits: the count k and size (up to 60
/// bits) minimising dnum (L + 1 + k), the size of a key and the NTTs of a key switch, where
/// dnum = ceil((L + 1) / alpha) digits of alpha = floor(k (p - 1) / max log q_i) primes each
/// (rlwe's rule; primes sit just below their bit size, hence the one-bit margin). Ties: the
/// fewer bits. None when not even one prime of 20 bits fits.
pub fn special_primes(log_q: &[u32], budget: i64) -> Option<Vec<u32>> {
    let largest = i64::from(log_q.iter().copied().max().unwrap_or(1).max(1));
    let len = log_q.len() as i64;
    let mut best: Option<((i64, i64), Vec<u32>)> = None;
    for k in 1..7i64 {
        let p = 60.min(budget.div_euclid(k));
        if p < 20 {
            break;
        }
        let alpha = ((k * (p - 1)).div_euclid(largest)).max(1);
        let dnum = (len + alpha - 1) / alpha;
        let cost = (dnum * (len + k), k * p);
        if best.as_ref().is_none_or(|b| cost < b.0) {
            best = Some((cost, vec![p as u32; k as usize]));
        }
    }
    best.map(|b| b.1)
}

/// The rings tried, smallest first.
pub const LEVELED_RINGS: [u32; 4] = [13, 14, 15, 16];

/// The parameters of a network of `depth` levels needing `slots_needed` slots at scale
/// 2^log_scale with q_0 of `log_q0` bits: in ring 2^log_n if given, else the smallest of
/// [`LEVELED_RINGS`] that holds it; special primes `p_bits` if given, else [`special_primes`]
/// (retried with up to 3 bits of margin, since the scale-stable primes may sit a little above
/// 2^log_scale). Errors: the depth does not fit (the network needs bootstrapping), or a
/// parameter set cannot be built.
pub fn choose_parameters(depth: usize, slots_needed: usize, log_scale: u32, log_q0: u32, p_bits: Option<&[u32]>, log_n: Option<u32>) -> Result<FheParameters> {
    if let Some(ln) = log_n {
        if !(10..=16).contains(&ln) {
            return Err(fail(format!("log_n = {ln}: the ring degree must be 2^10 .. 2^16")));
        }
    }
    let p_bits = p_bits.filter(|p| !p.is_empty());
    let log_q: Vec<u32> = std::iter::once(log_q0).chain(std::iter::repeat_n(log_scale, depth)).collect();
    let sum_q: i64 = log_q.iter().map(|&b| i64::from(b)).sum();
    let rings: Vec<u32> = log_n.map_or(LEVELED_RINGS.to_vec(), |l| vec![l]);
    for ln in rings {
        let n = 1usize << ln;
        if n / 2 < slots_needed {
            continue;
        }
        let max = i64::from(max_log_qp(n));
        let margins: &[i64] = if p_bits.is_some() { &[0] } else { &[0, 1, 2, 3] };
        for &margin in margins {
            let p = match p_bits {
                Some(p) => Some(p.to_vec()),
                None => special_primes(&log_q, max - sum_q - margin),
            };
            let Some(p) = p.filter(|p| sum_q + p.iter().map(|&b| i64::from(b)).sum::<i64>() <= max) else {
                break;
            };
            let lit = lycaon_ckks::scale_stable_literal(n, log_q0, log_scale, depth, &p).map_err(|e| fail(format!("parameters: {e}")))?;
            match Parameters::new(lit) {
                Ok(_) => return Ok(FheParameters::ScaleStable { n, log_q0, log_scale, levels: depth, p_bits: p }),
                Err(RlweError::Insecure { .. }) if p_bits.is_none() => continue,
                Err(e) => return Err(fail(format!("parameters: {e}"))),
            }
        }
    }
    let largest = *LEVELED_RINGS.last().expect("rings");
    if slots_needed > (1 << (largest - 1)) {
        return Err(fail(format!(
            "a tensor needs {slots_needed} slots, more than one ciphertext of the largest ring (2^{largest}) holds; several ciphertexts are not built yet"
        )));
    }
    Err(fail(format!(
        "depth {depth} at scale 2^{log_scale} needs more than log2(QP) = {} bits, what 2^{largest} holds at 128-bit security: the network needs bootstrapping",
        max_log_qp(1 << largest)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_primes_minimise_digits_then_bits() {
        // q_0 of 56 bits and 7 levels of 36 in 2^14 (438 bits): 438 - 308 = 130 bits to spend.
        let log_q: Vec<u32> = std::iter::once(56).chain(std::iter::repeat_n(36, 7)).collect();
        // k = 1: p = 60, alpha = 1, dnum 8, cost 8 * 9 = 72; k = 2: p = 60, alpha 2, dnum 4, 40;
        // k = 3: p = 43, alpha 2, dnum 4, 44 -> two primes of 60 bits.
        assert_eq!(special_primes(&log_q, 130), Some(vec![60, 60]));
        assert_eq!(special_primes(&log_q, 19), None);
        assert_eq!(special_primes(&log_q, -5), None);
        assert_eq!(special_primes(&[40], 45), Some(vec![45]));
    }

    #[test]
    fn the_smallest_ring_that_holds_the_depth() {
        match choose_parameters(3, 1024, 36, 56, None, None).unwrap() {
            FheParameters::ScaleStable { n, levels, p_bits, .. } => {
                assert_eq!((n, levels), (8192, 3));
                assert!(56 + 3 * 36 + p_bits.iter().sum::<u32>() <= 218);
            }
            other => panic!("{other:?}"),
        }
        // Too many slots for 2^13: 2^14.
        assert!(matches!(choose_parameters(3, 8192, 36, 56, None, None).unwrap(), FheParameters::ScaleStable { n: 16384, .. }));
        let e = choose_parameters(60, 16, 36, 56, None, None).unwrap_err().to_string();
        assert!(e.contains("bootstrapping") && e.contains("1772"), "{e}");
        let e = choose_parameters(3, 1 << 16, 36, 56, None, None).unwrap_err().to_string();
        assert!(e.contains("slots"), "{e}");
        // Given special primes that break the bound: refused, not retried.
        assert!(choose_parameters(3, 16, 36, 56, Some(&[60, 60, 60]), Some(13)).is_err());
        assert!(choose_parameters(3, 16, 36, 56, None, Some(17)).is_err());
    }
}
