//! Times one encrypted inference of an FHE program, op by op, with both parties in this process
//! (the same session protocol as over TCP, on an in-memory channel):
//! `cargo run --release -p lycaon-runtime --example fhe_profile -- PROGRAM.json [OPS]`.
//! PROGRAM.json is a program as `lycaon.fhe_compiler.compile_network(...).program_json` writes
//! it; OPS keeps only the first OPS ops (their last output becomes the answer), for quick
//! measurements of the early layers, and only the rotation keys those use are made. The input
//! is random in [-1, 1].

use std::sync::Arc;
use std::time::{Duration, Instant};

use lycaon_mpc::channel::MemoryChannel;
use lycaon_mpc::LinkModel;
use lycaon_runtime::fhe::program::FheProgram;
use lycaon_runtime::fhe::session::{open_session, serve_session, FheServed, FheSessionOptions};
use lycaon_runtime::Device;

// The allocator of the Python module (lycaon-py), so the timings are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: fhe_profile PROGRAM.json [OPS]")?;
    let mut program = FheProgram::from_json(&std::fs::read_to_string(path)?)?;
    if let Some(keep) = args.get(2).map(|s| s.parse::<usize>()).transpose()? {
        program.ops.truncate(keep.max(1));
        program.output = program.ops.last().ok_or("no ops")?.output.clone();
        program.output_slots = (0..10).collect();
    }
    let backend = Device::Cpu.backend()?;
    // Only the rotation keys the kept ops use (a truncated ImageNet network needs a fraction).
    program.rotation_levels = lycaon_runtime::fhe::FheExecutable::rotation_plan(program.clone(), backend.clone())?;
    let t = Instant::now();
    let served = Arc::new(FheServed::new(program, backend.clone(), FheSessionOptions::default())?);
    println!("prepared in {:.2} s, {} threads", t.elapsed().as_secs_f64(), rayon::current_num_threads());
    let (mut server_end, mut client_end) = MemoryChannel::pair_with(LinkModel::UNLIMITED, Duration::from_secs(3600));
    let server = std::thread::spawn(move || serve_session(&served, &mut server_end));
    let t = Instant::now();
    let (mut client, _, _) = open_session(&mut client_end, backend, false, &mut |_| {})?;
    println!("keys made and sent in {:.2} s", t.elapsed().as_secs_f64());
    let n: usize = client.program().input_shape.iter().product();
    let x: Vec<f64> = (0..n).map(|i| ((i * 7919) % 2001) as f64 / 1000.0 - 1.0).collect();
    let outcome = client.query(&mut client_end, &x, &mut |_, _, _| {})?;
    let stats = &outcome.report.run;
    for (name, seconds) in &stats.ops {
        println!("{name:<28} {seconds:>8.3} s");
    }
    println!(
        "server {:.2} s: bootstraps {} in {:.2} s, conv {:.2} s, quadratic {:.2} s, relu {:.2} s, other {:.2} s",
        outcome.report.server_s, stats.bootstraps, stats.bootstrap_s, stats.conv_s, stats.quadratic_s, stats.relu_s, stats.other_s
    );
    drop(client_end);
    let _ = server.join();
    Ok(())
}
