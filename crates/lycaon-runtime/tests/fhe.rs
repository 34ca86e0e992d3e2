//! The FHE mode through the runtime: a small network (a convolution as a slot matrix, a
//! per-slot quadratic, a fully connected layer with replication) served over TCP by the one
//! server both modes share; the decrypted logits against a float reference; the refusals.

use std::sync::Arc;
use std::time::Duration;

use lycaon_mpc::tcp::TcpChannel;
use lycaon_mpc::{Channel, LinkModel};
use lycaon_runtime::fhe::session::{fhe_program, serve_session};
use lycaon_runtime::fhe::{open_session, FheExecutable, FheOp, FheOpKind, FheParameters, FheProgram, FheServed, FheSessionOptions, InputPacking, SlotValues};
use lycaon_runtime::hello::{Hello, Mode, PublicModel, Want};
use lycaon_runtime::session::fetch_public;
use lycaon_runtime::{Served, Server, ServerOptions};
use rand::{RngExt, SeedableRng};

const N: usize = 8192;
const SLOTS: usize = N / 2;

fn op(name: &str, input: &str, output: &str, level: usize, depth: usize, kind: FheOpKind) -> FheOp {
    FheOp { name: name.into(), inputs: vec![input.into()], output: output.into(), level, depth, refresh: vec![], kind }
}

/// x (8 values, slots 0..8 repeated every 8) -> W1 x + b1 (8x8, per period) -> y^2 + 0.5 y
/// -> W2 y + b2 (3x8) at slots 0..3 (repeated every 4 after the rotate-and-adds).
struct Net {
    w1: Vec<Vec<f64>>,
    b1: Vec<f64>,
    w2: Vec<Vec<f64>>,
    b2: Vec<f64>,
}

impl Net {
    fn random(seed: u64) -> Self {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut m = |r: usize, c: usize| (0..r).map(|_| (0..c).map(|_| rng.random_range(-0.5..0.5)).collect::<Vec<f64>>()).collect::<Vec<_>>();
        let (w1, w2) = (m(8, 8), m(3, 8));
        let b1 = (0..8).map(|i| 0.1 * i as f64 - 0.3).collect();
        let b2 = vec![0.2, -0.1, 0.05];
        Self { w1, b1, w2, b2 }
    }

    fn reference(&self, x: &[f64]) -> Vec<f64> {
        let h: Vec<f64> = self.w1.iter().zip(&self.b1).map(|(r, b)| r.iter().zip(x).map(|(w, v)| w * v).sum::<f64>() + b).collect();
        let a: Vec<f64> = h.iter().map(|v| v * v + 0.5 * v).collect();
        self.w2.iter().zip(&self.b2).map(|(r, b)| r.iter().zip(&a).map(|(w, v)| w * v).sum::<f64>() + b).collect()
    }

    /// The program, with `rotation_levels` left for the caller (`with_keys`).
    fn program(&self) -> FheProgram {
        let (mut rows, mut cols, mut values) = (vec![], vec![], vec![]);
        for (o, r) in self.w1.iter().enumerate() {
            for (i, &w) in r.iter().enumerate() {
                rows.push(o as u32);
                cols.push(i as u32);
                values.push(w);
            }
        }
        let every = |v: &[f64], period: usize| {
            let mut d = vec![0.0; SLOTS];
            for (s, x) in d.iter_mut().enumerate() {
                *x = v.get(s % period).copied().unwrap_or(0.0);
            }
            SlotValues::from_dense(&d)
        };
        let conv = FheOpKind::Linear { rows, cols, values, period: Some(8), sum_steps: vec![], bias: Some(every(&self.b1, 8)) };
        let quad = FheOpKind::Quadratic { a: None, b: Some(every(&[0.5; 8], 8)), c: None };
        // Fully connected 8 -> 3, outputs padded to 4: diagonals over period 8 (the hybrid
        // method), then one rotate-and-add by 4 leaves the outputs repeated every 4.
        let (mut rows, mut cols, mut values) = (vec![], vec![], vec![]);
        for (o, r) in self.w2.iter().enumerate() {
            for (i, &w) in r.iter().enumerate() {
                let d = (i + 8 - o) % 4;
                let j = (i + 8 - d) % 8;
                rows.push(j as u32);
                cols.push((j + d) as u32);
                values.push(w);
            }
        }
        let fc =
            FheOpKind::Linear { rows, cols, values, period: Some(8), sum_steps: vec![4], bias: Some(every(&[self.b2[0], self.b2[1], self.b2[2], 0.0], 4)) };
        FheProgram {
            format: 1,
            name: "tiny".into(),
            parameters: FheParameters::ScaleStable { n: N, log_q0: 50, log_scale: 36, levels: 3, p_bits: vec![54] },
            input: "x".into(),
            input_shape: vec![8],
            input_packing: InputPacking::Slots { index: (0..8).collect(), period: 8 },
            input_level: 3,
            output: "logits".into(),
            output_slots: vec![0, 1, 2],
            ops: vec![op("conv", "x", "h", 3, 1, conv), op("act", "h", "a", 2, 1, quad), op("fc", "a", "logits", 1, 1, fc)],
            rotation_levels: Default::default(),
            relin_level: Some(2),
            metadata: serde_json::json!({"labels": ["a", "b", "c"]}),
        }
    }

    fn with_keys(&self) -> FheProgram {
        let mut p = self.program();
        p.rotation_levels = FheExecutable::rotation_plan(p.clone(), cpu()).unwrap();
        p
    }
}

fn max_error(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

#[test]
fn a_small_network_runs_encrypted_over_tcp_and_matches_its_float_reference() {
    let net = Net::random(7);
    let served = Arc::new(FheServed::new(net.with_keys(), cpu(), FheSessionOptions::default()).unwrap());
    let server = Server::bind(Served::Fhe(served), "127.0.0.1:0", ServerOptions { max_sessions: 2, ..ServerOptions::default() }).unwrap();
    let addr = server.local_addr().to_string();
    let stop = server.stopper();
    let log = server.log.clone();
    let thread = std::thread::spawn(move || server.run());

    // What the server serves, before any keys: the public program, weights removed.
    let mut ch = TcpChannel::connect(addr.as_str(), LinkModel::UNLIMITED, Duration::from_secs(30)).unwrap();
    let public = fetch_public(&mut ch).unwrap();
    assert_eq!(public.mode, Mode::Fhe);
    let program = fhe_program(public).unwrap();
    assert!(program.ops.iter().all(|op| match &op.kind {
        FheOpKind::Linear { values, bias, .. } => values.is_empty() && bias.is_none(),
        _ => true,
    }));
    drop(ch);

    let mut ch = TcpChannel::connect(addr.as_str(), LinkModel::UNLIMITED, Duration::from_secs(60)).unwrap();
    let (mut client, upload, accepted) = open_session(&mut ch, cpu(), false, &mut |_| {}).unwrap();
    assert!(upload > 0 && accepted.key_bytes > 0 && accepted.galois_keys > 0);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    for _ in 0..2 {
        let x: Vec<f64> = (0..8).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut steps = 0;
        let out = client.query(&mut ch, &x, &mut |_, _, _| steps += 1).unwrap();
        let want = net.reference(&x);
        let err = max_error(&out.logits, &want);
        assert!(err < 1e-5, "logits {:?} vs float {want:?}: error {err}", out.logits);
        assert_eq!(steps, 3);
        assert_eq!(out.report.run.late_encodings, 0, "every plaintext was encoded at load");
        assert!(out.report.flood_log2 > 0, "answers are flooded");
    }
    drop(ch);
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    thread.join().unwrap();
    assert!(log.lines().iter().any(|l| l.contains("session_end") && l.contains("\"queries\":2")), "{:?}", log.lines());
}

#[test]
fn the_server_refuses_wrong_modes_bad_keys_and_silent_connections() {
    let net = Net::random(8);
    let served = Arc::new(FheServed::new(net.with_keys(), cpu(), FheSessionOptions::default()).unwrap());

    // A hybrid client at an FHE server is told which mode to use.
    let (mut s, mut c) = lycaon_mpc::channel::MemoryChannel::pair_with(LinkModel::UNLIMITED, Duration::from_secs(10));
    let h = std::thread::spawn({
        let served = served.clone();
        move || serve_session(&served, &mut s)
    });
    c.send(&Hello { want: Want::Inference, mode: Some(Mode::Hybrid) }.to_bytes()).unwrap();
    let reply = c.recv().unwrap();
    assert!(String::from_utf8_lossy(&reply).contains("--mode fhe"), "{}", String::from_utf8_lossy(&reply));
    assert!(h.join().unwrap().is_err());

    // A secret key where the public key goes: refused by the object's kind, nothing kept.
    let (mut s, mut c) = lycaon_mpc::channel::MemoryChannel::pair_with(LinkModel::UNLIMITED, Duration::from_secs(10));
    let h = std::thread::spawn({
        let served = served.clone();
        move || serve_session(&served, &mut s)
    });
    c.send(&Hello { want: Want::Inference, mode: Some(Mode::Fhe) }.to_bytes()).unwrap();
    let public = PublicModel::parse(&c.recv().unwrap()[1..]).unwrap();
    let program = fhe_program(public).unwrap();
    let ctx = program.parameters.context(cpu()).unwrap();
    let mut sampler = lycaon_math::Sampler::from_os().unwrap();
    let sk = lycaon_ckks::rlwe::SecretKey::generate(ctx.params(), &mut sampler).unwrap();
    let header = serde_json::json!({"galois": 1, "relin": true, "encapsulation": false});
    let tagged = |b: &[u8]| [&[1u8][..], b].concat();
    c.send(&tagged(header.to_string().as_bytes())).unwrap();
    c.send(&tagged(&sk.to_bytes())).unwrap();
    let err = h.join().unwrap().unwrap_err().to_string();
    assert!(err.contains("public") || err.contains("kind") || err.contains("expected"), "{err}");

    // A connection that never says hello is dropped after the hello timeout.
    let server =
        Server::bind(Served::Fhe(served), "127.0.0.1:0", ServerOptions { hello_timeout: Duration::from_millis(300), ..ServerOptions::default() }).unwrap();
    let addr = server.local_addr();
    let (stop, log) = (server.stopper(), server.log.clone());
    let thread = std::thread::spawn(move || server.run());
    let idle = std::net::TcpStream::connect(addr).unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(log.lines().iter().filter(|l| l.contains("no valid hello")).count(), 1, "{:?}", log.lines());
    drop(idle);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    thread.join().unwrap();
}

#[test]
fn a_program_whose_keyset_lacks_a_rotation_is_refused_when_loaded() {
    let net = Net::random(9);
    let err = FheServed::new(net.program(), cpu(), FheSessionOptions::default()).err().unwrap().to_string();
    assert!(err.contains("lacks rotation"), "{err}");
    let mut bad = net.with_keys();
    bad.format = 99;
    assert!(FheProgram::from_json(&bad.to_json()).unwrap_err().to_string().contains("format 99"));
    let mut bad = net.with_keys();
    bad.ops[1].inputs = vec!["nowhere".into()];
    assert!(FheProgram::from_json(&bad.to_json()).unwrap_err().to_string().contains("before it is written"));
}

/// Every core of this machine (the runtime's device choice).
fn cpu() -> Arc<dyn lycaon_runtime::Backend> {
    lycaon_runtime::Device::Cpu.backend().expect("the CPU backend is always available")
}
