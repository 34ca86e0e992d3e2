//! `lycaon-fuzz [--iterations N] [--seed S] [--target NAME|all] [--list]`: fuzzes every
//! deserialiser; exits 1 and writes the crashing inputs to fuzz-crashes/ if any input panics or
//! hangs.

use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut iterations: u64 = 1_000_000;
    let mut seed: u64 = 1;
    let mut only: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--iterations" => iterations = value.parse().unwrap_or_else(|_| usage("--iterations needs a number")),
            "--seed" => seed = value.parse().unwrap_or_else(|_| usage("--seed needs a number")),
            "--target" => only = Some(value).filter(|v| v != "all"),
            "--list" => {
                lycaon_fuzz::targets::targets().iter().for_each(|t| println!("{}", t.name));
                return;
            }
            other => usage(&format!("unknown argument {other}")),
        }
        i += 2;
    }
    let mut failed = false;
    println!("{:<20} {:>10} {:>10} {:>10} {:>8} {:>12} {:>10}", "target", "inputs", "accepted", "rejected", "crashes", "slowest", "inputs/s");
    for target in lycaon_fuzz::targets::targets() {
        if only.as_deref().is_some_and(|o| o != target.name) {
            continue;
        }
        let start = Instant::now();
        let stats = lycaon_fuzz::fuzz(&target, iterations, seed, Duration::from_secs(2));
        let rate = stats.inputs as f64 / start.elapsed().as_secs_f64();
        println!(
            "{:<20} {:>10} {:>10} {:>10} {:>8} {:>12?} {:>10.0}",
            target.name,
            stats.inputs,
            stats.accepted,
            stats.rejected,
            stats.crashes.len(),
            stats.slowest,
            rate
        );
        if !stats.crashes.is_empty() {
            failed = true;
            let _ = std::fs::create_dir_all("fuzz-crashes");
            for (k, (input, msg)) in stats.crashes.iter().enumerate().take(20) {
                eprintln!("{} crash {k}: {msg}", target.name);
                let _ = std::fs::write(format!("fuzz-crashes/{}-{k}.bin", target.name), input);
            }
        }
    }
    std::process::exit(i32::from(failed));
}

fn usage(msg: &str) -> ! {
    eprintln!("{msg}\nusage: lycaon-fuzz [--iterations N] [--seed S] [--target NAME|all] [--list]");
    std::process::exit(2)
}
