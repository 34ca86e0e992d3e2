//! Tensors larger than one ciphertext in the FHE runtime: an input split by channels over two
//! ciphertexts, a convolution from two parts to two parts, a per-part quadratic, a stride-2
//! pooling that gathers two parts into one, a convolution from one part to two, and the global
//! pooling with the fully connected layer summed over two parts. Run through a session (the
//! query carries one ciphertext per input part) and compared with a float reference; then with
//! the ops on workers (`fhe::fanout`), bit for bit one machine's.

use std::sync::Arc;
use std::time::Duration;

use lycaon_mpc::channel::MemoryChannel;
use lycaon_mpc::LinkModel;
use lycaon_nn::fhe::MultiplexedLayout;
use lycaon_runtime::fhe::session::serve_session;
use lycaon_runtime::fhe::{
    open_session, FheBatch, FheExecutable, FheFanout, FheOp, FheOpKind, FheParameters, FheProgram, FheRunStats, FheServed, FheSessionOptions, FheStep,
    FheWorker, InputPacking, Layout, SlotValues, Unit,
};
use rand::{RngExt, SeedableRng};

const N: usize = 16384;
const SLOTS: usize = N / 2;

fn cpu() -> Arc<dyn lycaon_runtime::Backend> {
    lycaon_runtime::Device::Cpu.backend().expect("the CPU backend is always available")
}

/// A (C, H, W) tensor, row-major.
struct Image {
    c: usize,
    h: usize,
    w: usize,
    v: Vec<f64>,
}

/// Cross-correlation with a k x k kernel [out][in][k][k], padding k / 2, stride s, bias.
fn conv(x: &Image, weights: &[f64], c_out: usize, k: usize, s: usize, bias: &[f64]) -> Image {
    let (h, w) = (x.h.div_ceil(s), x.w.div_ceil(s));
    let mut v = vec![0.0; c_out * h * w];
    for o in 0..c_out {
        for y in 0..h {
            for xx in 0..w {
                let mut acc = bias[o];
                for i in 0..x.c {
                    for dy in 0..k {
                        for dx in 0..k {
                            let (iy, ix) = ((s * y + dy) as isize - (k / 2) as isize, (s * xx + dx) as isize - (k / 2) as isize);
                            if iy >= 0 && ix >= 0 && (iy as usize) < x.h && (ix as usize) < x.w {
                                acc += weights[((o * x.c + i) * k + dy) * k + dx] * x.v[(i * x.h + iy as usize) * x.w + ix as usize];
                            }
                        }
                    }
                }
                v[(o * h + y) * w + xx] = acc;
            }
        }
    }
    Image { c: c_out, h, w, v }
}

fn op(name: &str, inputs: &[&str], output: &str, level: usize, depth: usize, kind: FheOpKind) -> FheOp {
    FheOp { name: name.into(), inputs: inputs.iter().map(|s| s.to_string()).collect(), output: output.into(), level, depth, refresh: vec![], kind }
}

/// Per-channel values over the pixels of `l` (every copy), as the program stores them.
fn per_channel(l: &Layout, values: &[f64]) -> SlotValues {
    let m = MultiplexedLayout::new(l.channels, l.height, l.width, l.gap, SLOTS).unwrap();
    let tensor: Vec<f64> = values.iter().flat_map(|&v| std::iter::repeat_n(v, l.height * l.width)).collect();
    SlotValues::from_dense(&m.pack(&tensor).unwrap())
}

/// A network whose tensors span several ciphertexts (12 x 32 x 32 input in two parts, convolutions
/// between parts, a quadratic, pooling into one part, a convolution into two, pooling + FC),
/// with an input and its float reference logits.
fn parts_network() -> (FheProgram, Vec<f64>, Vec<f64>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(29);
    let mut random = |n: usize, scale: f64| (0..n).map(|_| rng.random_range(-scale..scale)).collect::<Vec<f64>>();
    // 12 x 32 x 32 needs 16 blocks of 1024 slots: two parts of 6 channels.
    let (c0, c1, c2, n_out) = (12, 10, 36, 5);
    let w1 = random(c1 * c0 * 9, 0.15);
    let b1 = random(c1, 0.2);
    let (qb, qc) = (random(c1, 0.5), random(c1, 0.3));
    let w2 = random(c2 * c1 * 9, 0.2);
    let b2 = random(c2, 0.1);
    let wf = random(n_out * c2, 0.5);
    let bf = random(n_out, 0.2);
    // The 2 x 2 average pooling at stride 2 as a 3 x 3 kernel (offsets 0 and +1).
    let mut wp = vec![0.0; c1 * c1 * 9];
    for c in 0..c1 {
        for t in [4, 5, 7, 8] {
            wp[(c * c1 + c) * 9 + t] = 0.25;
        }
    }

    let full = |channels, side, gap| Layout { channels, height: side, width: side, gap, image: None };
    let (x_l, h_l, p_l, g_l) = (full(c0, 32, 1), full(c1, 32, 1), full(c1, 16, 2), full(c2, 16, 2));
    let mut ops = Vec::new();
    // conv1: two input parts of 6 to two output parts of 5 (levels 8 -> 6).
    for j in 0..2 {
        let rows = j * 5..(j + 1) * 5;
        ops.push(op(
            &format!("conv1#{j}"),
            &["x#0", "x#1"],
            &format!("h#{j}"),
            8,
            2,
            FheOpKind::MpConv {
                input: x_l,
                out_channels: 5,
                kernel: 3,
                stride: 1,
                weights: w1[rows.start * c0 * 9..rows.end * c0 * 9].to_vec(),
                bias: Some(per_channel(&full(5, 32, 1), &b1[rows])),
                output_image: None,
                method: Default::default(),
                part_channels: Some(6),
            },
        ));
    }
    // x^2 + b x + c per part (6 -> 5).
    for j in 0..2 {
        let rows = j * 5..(j + 1) * 5;
        let part = full(5, 32, 1);
        let kind = FheOpKind::Quadratic { a: None, b: Some(per_channel(&part, &qb[rows.clone()])), c: Some(per_channel(&part, &qc[rows])) };
        ops.push(op(&format!("act#{j}"), &[&format!("h#{j}")], &format!("a#{j}"), 6, 1, kind));
    }
    // The pooling gathers both parts into one ciphertext at gap 2 (5 -> 3).
    let pool = FheOpKind::MpConv {
        input: h_l,
        out_channels: c1,
        kernel: 3,
        stride: 2,
        weights: wp.clone(),
        bias: None,
        output_image: None,
        method: lycaon_nn::fhe::ConvMethod::Bsgs,
        part_channels: Some(5),
    };
    ops.push(op("pool", &["a#0", "a#1"], "p", 5, 2, pool));
    // conv2: one part to two of 18 channels (3 -> 1).
    for j in 0..2 {
        let rows = j * 18..(j + 1) * 18;
        let kind = FheOpKind::MpConv {
            input: p_l,
            out_channels: 18,
            kernel: 3,
            stride: 1,
            weights: w2[rows.start * c1 * 9..rows.end * c1 * 9].to_vec(),
            bias: Some(per_channel(&full(18, 16, 2), &b2[rows])),
            output_image: None,
            method: Default::default(),
            part_channels: None,
        };
        ops.push(op(&format!("conv2#{j}"), &["p"], &format!("g#{j}"), 3, 2, kind));
    }
    let fc = FheOpKind::PoolFc { input: g_l, n_out, weights: wf.clone(), bias: bf.clone(), part_channels: Some(18) };
    ops.push(op("fc", &["g#0", "g#1"], "logits", 1, 1, fc));
    let mut program = FheProgram {
        format: 1,
        name: "parts".into(),
        parameters: FheParameters::ScaleStable { n: N, log_q0: 50, log_scale: 36, levels: 8, p_bits: vec![54] },
        input: "x".into(),
        input_shape: vec![c0, 32, 32],
        input_packing: InputPacking::Multiplexed { channels: c0, height: 32, width: 32, gap: 1, image: None, part_channels: Some(6), space_to_depth: None },
        input_level: 8,
        output: "logits".into(),
        output_slots: (0..n_out as u32).collect(),
        ops,
        rotation_levels: Default::default(),
        relin_level: Some(6),
        metadata: serde_json::json!({}),
    };
    assert_eq!(program.input_names().unwrap(), ["x#0", "x#1"]);
    program.rotation_levels = FheExecutable::rotation_plan(program.clone(), cpu()).unwrap();

    let x = Image { c: c0, h: 32, w: 32, v: random(c0 * 32 * 32, 1.0) };
    let h = conv(&x, &w1, c1, 3, 1, &b1);
    let a = Image { v: h.v.iter().enumerate().map(|(i, &v)| v * v + qb[i / 1024] * v + qc[i / 1024]).collect(), ..h };
    let p = conv(&a, &wp, c1, 3, 2, &vec![0.0; c1]);
    let g = conv(&p, &w2, c2, 3, 1, &b2);
    let pooled: Vec<f64> = (0..c2).map(|c| g.v[c * 256..(c + 1) * 256].iter().sum::<f64>() / 256.0).collect();
    let want: Vec<f64> = (0..n_out).map(|o| bf[o] + (0..c2).map(|c| wf[o * c2 + c] * pooled[c]).sum::<f64>()).collect();

    (program, x.v, want)
}

#[test]
fn tensors_in_several_ciphertexts_run_encrypted_and_match_their_float_reference() {
    let (program, x, want) = parts_network();
    let x = Image { c: 12, h: 32, w: 32, v: x };
    // On host polynomials, then with every tensor, key and plaintext of the session resident
    // (on host memory here: the reference of the GPU path).
    for resident in [None, Some(lycaon_runtime::fhe::ResidentDevice::Host)] {
        let mut served = FheServed::new(program.clone(), cpu(), FheSessionOptions::default()).unwrap();
        served.resident = resident.clone();
        let served = Arc::new(served);
        let (mut server_end, mut client_end) = MemoryChannel::pair_with(LinkModel::UNLIMITED, Duration::from_secs(600));
        let server = std::thread::spawn(move || serve_session(&served, &mut server_end));
        let (mut client, _, _) = open_session(&mut client_end, cpu(), false, &mut |_| {}).unwrap();
        assert_eq!(client.pack(&x.v).unwrap().len(), 2, "one slot vector per input part");
        let outcome = client.query(&mut client_end, &x.v, &mut |_, _, _| {}).unwrap();
        let error = outcome.logits.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(error < 1e-3, "{resident:?}: logits {:?} against {want:?}", outcome.logits);
        if resident.is_none() {
            assert_eq!(outcome.report.run.late_encodings, 0);
        }
        drop(client_end);
        server.join().unwrap().unwrap();
    }
}

#[test]
fn the_resident_executor_equals_the_host_executor_bit_for_bit() {
    let (program, x, _) = parts_network();
    let exe = FheExecutable::new(program.clone(), cpu()).unwrap();
    let (mut server_end, mut client_end) = MemoryChannel::pair_with(LinkModel::UNLIMITED, Duration::from_secs(600));
    let mut client = lycaon_runtime::fhe::FheClient::new(program, cpu()).unwrap();
    let sender = std::thread::spawn(move || {
        client.send_keys(&mut client_end, &mut |_| {}).unwrap();
        client
    });
    let keys = lycaon_runtime::fhe::accept_keys(&exe, &mut server_end).unwrap();
    let mut client = sender.join().unwrap();
    let ctx = exe.context();
    let inputs: Vec<lycaon_ckks::Ciphertext> = client.encrypt(&x).unwrap().iter().map(|s| s.expand(ctx).unwrap()).collect();
    let (host, host_stats) = exe.run(&keys, inputs.clone(), &mut |_, _, _| {}).unwrap();
    let session = lycaon_runtime::fhe::ResidentDevice::Host.session(&exe, &keys).unwrap();
    let (resident, stats) = session.run(&exe, inputs, &mut |_, _, _| {}).unwrap();
    assert_eq!((resident.level(), resident.scale().to_bits()), (host.level(), host.scale().to_bits()));
    assert!(resident.inner().parts() == host.inner().parts(), "the resident executor's logits differ from the host's");
    assert_eq!(stats.ops.len(), host_stats.ops.len());
}

/// Workers on threads of this process, as a Ray fanout runs them in other processes: batch k of
/// a step on worker k mod W, each worker parsing the session's key messages itself. A worker
/// told to fail refuses every batch that runs `fail_op`.
struct ThreadFanout {
    workers: Vec<FheWorker>,
    fail_op: Option<usize>,
    batches_per_worker: std::sync::Mutex<Vec<usize>>,
    arriving: std::sync::Mutex<std::collections::HashMap<u64, Vec<Vec<u8>>>>,
}

impl ThreadFanout {
    fn new(program: &FheProgram, workers: usize, fail_op: Option<usize>) -> Self {
        let workers = (0..workers).map(|_| FheWorker::new(program.clone(), cpu()).unwrap()).collect::<Vec<_>>();
        let n = workers.len();
        Self { workers, fail_op, batches_per_worker: std::sync::Mutex::new(vec![0; n]), arriving: Default::default() }
    }
}

impl FheFanout for ThreadFanout {
    fn key_message(&self, session: u64, message: Vec<u8>) -> lycaon_runtime::Result<()> {
        self.arriving.lock().unwrap().entry(session).or_default().push(message);
        Ok(())
    }

    fn keys_complete(&self, session: u64) -> lycaon_runtime::Result<()> {
        let messages = self.arriving.lock().unwrap().remove(&session).unwrap_or_default();
        for w in &self.workers {
            w.add_keys(session, &messages)?;
        }
        Ok(())
    }

    fn run(&self, session: u64, batches: Vec<(FheBatch, Vec<Vec<u8>>)>) -> lycaon_runtime::Result<Vec<(Vec<Vec<u8>>, FheRunStats)>> {
        std::thread::scope(|s| {
            let handles: Vec<_> = batches
                .iter()
                .enumerate()
                .map(|(k, (batch, inputs))| {
                    let worker = &self.workers[k % self.workers.len()];
                    self.batches_per_worker.lock().unwrap()[k % self.workers.len()] += 1;
                    s.spawn(move || {
                        if self.fail_op.is_some_and(|f| batch.units.contains(&Unit::Op(f))) {
                            return Err(lycaon_runtime::RuntimeError::Cluster("a worker died".into()));
                        }
                        worker.run(session, batch, inputs)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    fn session_ended(&self, session: u64) {
        for w in &self.workers {
            w.end_session(session).unwrap();
        }
    }
}

/// A channel end that keeps every runtime message it receives without its tag byte (the key
/// messages a fanout is given).
struct Recording<C> {
    inner: C,
    got: Vec<Vec<u8>>,
}

impl<C: lycaon_mpc::Channel> lycaon_mpc::Channel for Recording<C> {
    fn send(&mut self, message: &[u8]) -> lycaon_mpc::Result<()> {
        self.inner.send(message)
    }

    fn recv(&mut self) -> lycaon_mpc::Result<Vec<u8>> {
        let m = self.inner.recv()?;
        self.got.push(m[1..].to_vec());
        Ok(m)
    }

    fn stats(&self) -> lycaon_mpc::ChannelStats {
        self.inner.stats()
    }
}

#[test]
fn the_schedule_spreads_each_steps_independent_work_and_chains_the_rest() {
    let (program, _, _) = parts_network();
    let exe = FheExecutable::new(program.clone(), cpu()).unwrap();
    let name = |u: &Unit| match *u {
        Unit::Op(i) => program.ops[i].name.clone(),
        Unit::Term(i, k) => format!("{}~{k}", program.ops[i].name),
        Unit::Finish(i) => format!("+{}", program.ops[i].name),
    };
    let names = |steps: &[FheStep]| -> Vec<(Vec<String>, Vec<Vec<String>>)> {
        steps.iter().map(|s| (s.local.iter().map(name).collect(), s.batches.iter().map(|b| b.units.iter().map(name).collect()).collect())).collect()
    };
    let v = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    // Every op reading two parts sums a term per part: the terms spread, the server adds them.
    let two = exe.schedule(2);
    assert_eq!(
        names(&two),
        [
            (v(&[]), vec![v(&["conv1#0~0", "conv1#0~1"]), v(&["conv1#1~0", "conv1#1~1"])]),
            (v(&["+conv1#0", "+conv1#1"]), vec![]),
            (v(&[]), vec![v(&["act#0"]), v(&["act#1"])]),
            (v(&[]), vec![v(&["pool~0"]), v(&["pool~1"])]),
            (v(&["+pool"]), vec![]),
            (v(&[]), vec![v(&["conv2#0"]), v(&["conv2#1"])]),
            (v(&[]), vec![v(&["fc~0"]), v(&["fc~1"])]),
            (v(&["+fc"]), vec![]),
        ]
    );
    // A batch is given what it reads and returns what later steps read.
    assert_eq!((two[0].batches[0].inputs.clone(), two[0].batches[0].outputs.clone()), (v(&["x#0", "x#1"]), v(&["h#0~0", "h#0~1"])));
    assert_eq!((two[5].batches[1].inputs.clone(), two[5].batches[1].outputs.clone()), (v(&["p"]), v(&["g#1"])));
    // One worker: one batch a step, chains between the server's sums.
    let one = exe.schedule(1);
    assert_eq!(names(&one)[2..4], [(v(&[]), vec![v(&["act#0", "act#1", "pool~0", "pool~1"])]), (v(&["+pool"]), vec![])]);
    // More workers than independent units: no empty batch; every unit once in any schedule.
    for workers in 1..6 {
        let steps = exe.schedule(workers);
        assert!(steps.iter().flat_map(|s| &s.batches).all(|b| !b.units.is_empty()));
        let ops: usize = steps.iter().map(|s| s.local.len() + s.batches.iter().flat_map(|b| &b.units).filter(|u| matches!(u, Unit::Op(_))).count()).sum();
        assert_eq!(ops, program.ops.len());
    }
}

#[test]
fn ops_on_workers_give_one_machines_logits_bit_for_bit() {
    let (program, x, _) = parts_network();
    let exe = FheExecutable::new(program.clone(), cpu()).unwrap();
    let (server_end, mut client_end) = MemoryChannel::pair_with(LinkModel::UNLIMITED, Duration::from_secs(600));
    let mut client = lycaon_runtime::fhe::FheClient::new(program.clone(), cpu()).unwrap();
    let sender = std::thread::spawn(move || {
        client.send_keys(&mut client_end, &mut |_| {}).unwrap();
        client
    });
    let mut recording = Recording { inner: server_end, got: Vec::new() };
    let keys = lycaon_runtime::fhe::accept_keys(&exe, &mut recording).unwrap();
    let mut client = sender.join().unwrap();
    let ctx = exe.context();
    let inputs: Vec<lycaon_ckks::Ciphertext> = client.encrypt(&x).unwrap().iter().map(|s| s.expand(ctx).unwrap()).collect();
    let (alone, alone_stats) = exe.run(&keys, inputs.clone(), &mut |_, _, _| {}).unwrap();
    // The server's own session holds no evaluation key: it only adds terms.
    let server_keys = lycaon_runtime::fhe::SessionKeys::new(lycaon_ckks::Evaluator::new(ctx, lycaon_ckks::EvaluationKeys::default()), None);
    for workers in [1, 2, 3] {
        let fanout = ThreadFanout::new(&program, workers, None);
        for m in &recording.got {
            fanout.key_message(7, m.clone()).unwrap();
        }
        fanout.keys_complete(7).unwrap();
        let mut steps = 0;
        let (out, stats) = exe
            .run_on(&fanout, 7, workers, &server_keys, inputs.clone(), &mut |done, total, _| {
                steps += 1;
                assert!(done <= total);
            })
            .unwrap();
        assert_eq!((out.level(), out.scale().to_bits()), (alone.level(), alone.scale().to_bits()));
        assert!(out.inner().parts() == alone.inner().parts(), "{workers} workers: the logits differ from one machine's");
        // Every op once: whole, or as its sum (the terms are counted apart).
        assert_eq!(stats.ops.iter().filter(|(name, _)| !name.contains('~')).count(), alone_stats.ops.len());
        assert_eq!(steps, exe.schedule(workers).len());
        let used = fanout.batches_per_worker.lock().unwrap().clone();
        // conv1's four terms keep three workers busy.
        assert!(used.iter().all(|&b| b > 0), "{workers} workers: batches per worker {used:?}");
        fanout.session_ended(7);
        assert!(fanout.workers.iter().all(|w| w.sessions_held().unwrap() == 0));
    }
}

/// A served session whose ops run on workers: the server keeps no evaluation key, the logits
/// match the float reference, a failing worker ends its session with the cluster's error, and
/// the next session completes; no worker keeps a session's keys after it.
#[test]
fn sessions_on_workers_answer_and_survive_a_failed_worker() {
    let (program, x, want) = parts_network();
    let conv2 = program.ops.iter().position(|o| o.name == "conv2#1").unwrap();
    for fail in [None, Some(conv2), None] {
        let fanout = Arc::new(ThreadFanout::new(&program, 2, fail));
        let mut served = FheServed::new(program.clone(), cpu(), FheSessionOptions::default()).unwrap();
        served.fanout = Some((fanout.clone(), 2));
        let served = Arc::new(served);
        let (mut server_end, mut client_end) = MemoryChannel::pair_with(LinkModel::UNLIMITED, Duration::from_secs(600));
        let server = std::thread::spawn(move || serve_session(&served, &mut server_end));
        let (mut client, _, _) = open_session(&mut client_end, cpu(), false, &mut |_| {}).unwrap();
        let outcome = client.query(&mut client_end, &x, &mut |_, _, _| {});
        drop(client_end);
        let served_result = server.join().unwrap();
        match fail {
            None => {
                let outcome = outcome.unwrap();
                let error = outcome.logits.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                assert!(error < 1e-3, "logits {:?} against {want:?}", outcome.logits);
                served_result.unwrap();
            }
            Some(_) => {
                let e = outcome.err().expect("a session whose worker fails must fail").to_string();
                assert!(e.contains("a worker died"), "{e}");
                assert!(served_result.is_err());
            }
        }
        assert!(fanout.workers.iter().all(|w| w.sessions_held().unwrap() == 0), "a worker kept a session's keys");
    }
}
