//! Forward + inverse NTT of one limb: tfhe-ntt against Lycaon's plain Harvey NTT, medians in
//! microseconds. `cargo run --release -p lycaon-math --example ntt_choice`.

use std::time::Instant;

use lycaon_math::{ntt_primes, HarveyNtt, Modulus, NttPlan};

fn median_us(mut f: impl FnMut(), reps: usize) -> f64 {
    for _ in 0..5 {
        f();
    }
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[reps / 2]
}

fn main() {
    println!("{:>6} {:>5} {:>12} {:>12} {:>7}", "n", "bits", "tfhe-ntt us", "harvey us", "ratio");
    for log_n in 10..=16 {
        let n = 1usize << log_n;
        for bits in [50u32, 60] {
            let q = Modulus::new(ntt_primes(bits, n, 1, &[]).unwrap()[0]).unwrap();
            let fast = NttPlan::new(n, q).unwrap();
            let slow = HarveyNtt::new(n, q).unwrap();
            let mut a: Vec<u64> = (0..n as u64).map(|i| q.reduce(i.wrapping_mul(0x9E3779B97F4A7C15))).collect();
            let reps = (1 << 22 >> log_n).max(21);
            let tf = median_us(|| { fast.forward(&mut a); fast.inverse(&mut a); }, reps);
            let hv = median_us(|| { slow.forward(&mut a); slow.inverse(&mut a); }, reps);
            println!("{n:>6} {bits:>5} {tf:>12.1} {hv:>12.1} {:>7.2}", hv / tf);
        }
    }
}
