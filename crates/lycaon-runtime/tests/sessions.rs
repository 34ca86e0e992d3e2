//! End-to-end sessions on small random networks, checked against a plain integer reference
//! written here (independent of the runtime): exact, with and without truncations; over memory and over TCP with concurrent and bad clients.

use std::sync::Arc;
use std::time::Duration;

use lycaon_mpc::channel::MemoryChannel;
use lycaon_mpc::tcp::TcpChannel;
use lycaon_mpc::{Channel, LinkModel};
use lycaon_nn::{conv_reference, ConvShape};
use lycaon_runtime::session::{fetch_program, run_client, run_local, ServedModel};
use lycaon_runtime::{Program, Served, Server, ServerOptions, SessionOptions, Weights};
use rand::{Rng, RngExt};
use serde_json::json;

fn random(rng: &mut impl Rng, len: usize, bound: i64) -> Vec<i64> {
    (0..len).map(|_| rng.random_range(-bound..=bound)).collect()
}

fn params(t_bits: u32, q_bits: &[u32], p_bits: &[u32]) -> serde_json::Value {
    // Rotations need a special prime: at n = 4096 that leaves too little room for a 31-bit t.
    // One key-switching digit per ciphertext prime (a special prime no larger than one of them).
    let n = if p_bits.is_empty() { 4096 } else { 8192 };
    json!({"n": n, "q_bits": q_bits, "p_bits": p_bits, "t_bits": t_bits, "digits": if p_bits.is_empty() { 1 } else { q_bits.len() }})
}

/// conv (cheetah, bias) -> relu -> maxpool 2x2 -> conv (gazelle-ia, other t) -> add (skip from
/// the pool: a ring conversion) -> relu -> global sum -> flatten -> fc (cheetah-matvec, a third
/// t). Magnitudes stay within a quarter of every ring.
fn network(truncate: bool, reveal: &str) -> (Program, Weights) {
    let mut rng = rand::rng();
    let p1 = params(30, &[55, 45], &[]);
    let p2 = params(31, &[50, 50], &[50]);
    let p3 = params(36, &[55, 45], &[]);
    let shift = |name: &str, input: &str, output: &str| json!({"op": "truncate", "name": name, "inputs": [input], "output": output, "shift": 3});
    let mut ops = vec![json!({"op": "linear", "name": "conv1", "inputs": ["x"], "output": "a1", "algorithm": "cheetah", "params": p1,
        "shape": {"h": 8, "w": 8, "c_in": 2, "c_out": 4, "k": 3, "stride": 1, "pad": 1}, "has_bias": true})];
    let mut last = "a1";
    if truncate {
        ops.push(shift("t1", "a1", "a1t"));
        last = "a1t";
    }
    ops.extend([
        json!({"op": "relu", "name": "r1", "inputs": [last], "output": "r1"}),
        json!({"op": "maxpool", "name": "p1", "inputs": ["r1"], "output": "p1", "kernel": [2, 2], "stride": [2, 2]}),
        json!({"op": "linear", "name": "conv2", "inputs": ["p1"], "output": "a2", "algorithm": "gazelle-ia", "params": p2,
            "shape": {"h": 4, "w": 4, "c_in": 4, "c_out": 4, "k": 3, "stride": 1, "pad": 1}}),
    ]);
    last = "a2";
    if truncate {
        ops.push(shift("t2", "a2", "a2t"));
        last = "a2t";
    }
    ops.extend([
        json!({"op": "add", "name": "res", "inputs": [last, "p1"], "output": "s"}),
        json!({"op": "relu", "name": "r2", "inputs": ["s"], "output": "r2"}),
        json!({"op": "global_sumpool", "name": "gp", "inputs": ["r2"], "output": "g", "multiplier": 1}),
        json!({"op": "flatten", "name": "fl", "inputs": ["g"], "output": "f"}),
        json!({"op": "linear", "name": "fc", "inputs": ["f"], "output": "logits", "algorithm": "cheetah-matvec", "params": p3,
            "shape": {"h": 1, "w": 1, "c_in": 4, "c_out": 3, "k": 1, "stride": 1}, "has_bias": true}),
    ]);
    let program = Program::from_json(
        &json!({"version": 2, "name": "test-net", "input": "x", "input_shape": [2, 8, 8], "fraction_bits": 4, "output": "logits", "reveal": reveal, "ops": ops, "metadata": {"purpose": "test"}})
            .to_string(),
    )
    .unwrap();
    let mut weights = Weights::default();
    weights.layers.insert("conv1".into(), (random(&mut rng, 4 * 2 * 9, 7), Some(random(&mut rng, 4, 200))));
    weights.layers.insert("conv2".into(), (random(&mut rng, 4 * 4 * 9, 7), None));
    weights.layers.insert("fc".into(), (random(&mut rng, 3 * 4, 7), Some(random(&mut rng, 3, 200))));
    (program, weights)
}

fn conv(shape: ConvShape, x: &[i64], w: &[i64], b: Option<&Vec<i64>>) -> Vec<i64> {
    let t = (1u64 << 61) - 1; // large enough that nothing wraps: read back as signed
    let y = conv_reference(&shape, x, w, t).unwrap();
    let per = shape.out_h() * shape.out_w();
    y.iter().enumerate().map(|(i, &v)| if v > t / 2 { v as i64 - t as i64 } else { v as i64 } + b.map_or(0, |b| b[i / per])).collect()
}

/// The plain integer reference of `network` (floor truncation).
fn reference(weights: &Weights, x: &[i64], truncate: bool) -> Vec<i64> {
    let tr = |v: Vec<i64>| if truncate { v.into_iter().map(|a| a >> 3).collect() } else { v };
    let (w1, b1) = &weights.layers["conv1"];
    let a1 = tr(conv(ConvShape::conv(8, 2, 4, 3, 1), x, w1, b1.as_ref()));
    let r1: Vec<i64> = a1.iter().map(|&v| v.max(0)).collect();
    let mut p1 = vec![0i64; 4 * 16];
    for c in 0..4 {
        for y in 0..4 {
            for xx in 0..4 {
                p1[c * 16 + y * 4 + xx] = (0..4).map(|k| r1[c * 64 + (2 * y + k / 2) * 8 + 2 * xx + k % 2]).max().unwrap();
            }
        }
    }
    let (w2, _) = &weights.layers["conv2"];
    let a2 = tr(conv(ConvShape::conv(4, 4, 4, 3, 1), &p1, w2, None));
    let r2: Vec<i64> = a2.iter().zip(&p1).map(|(&a, &b)| (a + b).max(0)).collect();
    let g: Vec<i64> = r2.chunks(16).map(|c| c.iter().sum::<i64>()).collect();
    let (wf, bf) = &weights.layers["fc"];
    (0..3).map(|o| (0..4).map(|i| wf[o * 4 + i] * g[i]).sum::<i64>() + bf.as_ref().unwrap()[o]).collect()
}

fn no_flooding() -> SessionOptions {
    SessionOptions { flood_bits: 0.0, ..SessionOptions::default() }
}

#[test]
fn linear_relu_pool_residual_and_conversion_are_exact() {
    let (program, weights) = network(false, "logits");
    let model = ServedModel::new(program, &weights, no_flooding()).unwrap();
    let x = random(&mut rand::rng(), 2 * 64, 30);
    let (client, server) = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
    assert_eq!(client.logits.as_deref(), Some(&reference(&weights, &x, false)[..]));
    assert_eq!(client.layers.len(), 9);
    assert!(client.bytes > 0 && server.bytes == client.bytes, "both ends count the same bytes");
}

#[test]
fn weights_prepared_per_evaluation_give_the_same_logits() {
    let (program, weights) = network(false, "logits");
    // A budget of one byte: no layer is kept prepared, each is prepared when it runs.
    let lean = ServedModel::new(program.clone(), &weights, SessionOptions { prepared_weights_bytes: 1, ..no_flooding() }).unwrap();
    assert!(lean.kept_prepared().iter().all(|(_, kept)| !kept));
    assert!(ServedModel::new(program, &weights, no_flooding()).unwrap().kept_prepared().iter().all(|(_, kept)| *kept));
    let x = random(&mut rand::rng(), 2 * 64, 30);
    let (client, _) = run_local(&lean, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
    assert_eq!(client.logits.as_deref(), Some(&reference(&weights, &x, false)[..]));
}

#[test]
fn truncation_is_exact_and_flooding_must_fit() {
    let (program, weights) = network(true, "logits");
    // The default session floods at 40 bits: conv1 and fc run at q = 55 + 45 bits, which leaves
    // room; conv2 (q = 50 + 50 bits, its noise after key switching) does not, and the server must
    // refuse to start.
    let err = ServedModel::new(program.clone(), &weights, SessionOptions::default()).err().expect("conv2 cannot be flooded");
    assert!(err.to_string().contains("conv2") && err.to_string().contains("flooding"), "{err}");
    // Each truncation writes straight into the ring of the linear layer its value goes to:
    // t1 (conv1's 30-bit ring) through ReLU and max-pool into conv2's; t2 stays in conv2's ring,
    // since a pool's sums (the global sum before fc) need the ring the planner sized for them.
    let compiled = program.clone().compile().unwrap();
    assert_ne!(compiled.rings["a1"], compiled.rings["a2"]);
    assert_eq!((compiled.rings["a1t"], compiled.rings["p1"]), (compiled.rings["a2"], compiled.rings["a2"]));
    assert_eq!((compiled.rings["a2t"], compiled.rings["f"]), (compiled.rings["a2"], compiled.rings["a2"]));
    let model = ServedModel::new(program, &weights, no_flooding()).unwrap();
    for _ in 0..2 {
        let x = random(&mut rand::rng(), 2 * 64, 30);
        let (client, _) = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
        // The exact truncation: bit for bit the reference's floor.
        assert_eq!(client.logits.unwrap(), reference(&weights, &x, true));
    }
    // Faithful truncation (fewer rounds): each off by at most one unit before the fc (weights
    // <= 7, a sum over 16 positions, the residual doubling): a bound that still catches a wrong share.
    let (mut program, weights) = network(true, "logits");
    program.exact_truncation = false;
    let model = ServedModel::new(program, &weights, no_flooding()).unwrap();
    let x = random(&mut rand::rng(), 2 * 64, 30);
    let (client, _) = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
    for (g, w) in client.logits.unwrap().iter().zip(&reference(&weights, &x, true)) {
        assert!((g - w).abs() <= 7 * 4 * 16 * 2 * 40, "logit {g} vs reference {w}");
    }
}

#[test]
fn flooded_layers_stay_exact() {
    // Only the cheetah layers (q = 55 + 45 bits) are flooded at 40 bits of statistical security.
    let mut rng = rand::rng();
    let program = Program::from_json(
        &json!({"version": 2, "name": "flooded", "input": "x", "input_shape": [2, 8, 8], "fraction_bits": 0, "output": "y", "ops": [
            {"op": "linear", "name": "conv", "inputs": ["x"], "output": "a", "algorithm": "cheetah", "params": params(30, &[55, 45], &[]),
             "shape": {"h": 8, "w": 8, "c_in": 2, "c_out": 3, "k": 3, "stride": 2, "pad": 1}},
            {"op": "flatten", "name": "f", "inputs": ["a"], "output": "af"},
            {"op": "linear", "name": "fc", "inputs": ["af"], "output": "y", "algorithm": "cheetah-matvec", "params": params(30, &[55, 45], &[]),
             "shape": {"h": 1, "w": 1, "c_in": 48, "c_out": 5, "k": 1, "stride": 1}}]})
        .to_string(),
    )
    .unwrap();
    let mut weights = Weights::default();
    weights.layers.insert("conv".into(), (random(&mut rng, 3 * 2 * 9, 100), None));
    weights.layers.insert("fc".into(), (random(&mut rng, 5 * 48, 100), None));
    let model = ServedModel::new(program.clone(), &weights, SessionOptions::default()).unwrap();
    assert!(model.flooding().iter().all(|(_, bits)| *bits > 40), "{:?}", model.flooding());
    // The convolution's responses drop low bits within the budget the flooding leaves (c_0's
    // more: its rounding is not multiplied by the secret); the matvec's budget has no room.
    let drops = model.response_drops();
    assert!(drops[0].1.c1 > 0 && drops[0].1.c0 > drops[0].1.c1, "{drops:?}");
    let x = random(&mut rng, 2 * 64, 100);
    let (client, _) = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
    let a = conv(ConvShape { stride: 2, ..ConvShape::conv(8, 2, 3, 3, 2) }, &x, &weights.layers["conv"].0, None);
    let want: Vec<i64> = (0..5).map(|o| (0..48).map(|i| weights.layers["fc"].0[o * 48 + i] * a[i]).sum()).collect();
    assert_eq!(client.logits.unwrap(), want);
    // The same through two workers, which mask, flood and cut the responses themselves.
    let fanout = local_fanout(&program, &weights, SessionOptions::default(), 2);
    let model = ServedModel::with_fanout(program, &weights, SessionOptions::default(), fanout.clone()).unwrap();
    let (client, _) = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
    assert_eq!(client.logits.unwrap(), want);
    assert_eq!(fanout.calls.lock().unwrap().len(), 2);
}

#[test]
fn label_only_reveals_the_argmax() {
    let (program, weights) = network(false, "label");
    let model = ServedModel::new(program, &weights, no_flooding()).unwrap();
    let x = random(&mut rand::rng(), 2 * 64, 30);
    let (client, _) = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
    let want = reference(&weights, &x, false);
    assert!(client.logits.is_none());
    assert_eq!(want[client.label], *want.iter().max().unwrap());
}

#[test]
fn tcp_server_survives_garbage_and_serves_concurrent_clients() {
    let (program, weights) = network(false, "logits");
    let model = Arc::new(ServedModel::new(program, &weights, no_flooding()).unwrap());
    let server = Server::bind(Served::Hybrid(model), "127.0.0.1:0", ServerOptions { timeout: Duration::from_secs(20), ..ServerOptions::default() }).unwrap();
    let addr = server.local_addr();
    let stop = server.stopper();
    let log = server.log.clone();
    /// Stops the accept loop however the test ends, so a failed assertion fails instead of hanging.
    struct StopOnDrop(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    std::thread::scope(|scope| {
        scope.spawn(|| server.run());
        let _guard = StopOnDrop(stop.clone());
        let mut clients = Vec::new();
        for k in 0..4 {
            let weights = &weights;
            clients.push(scope.spawn(move || {
                let mut ch = TcpChannel::connect(addr, LinkModel::UNLIMITED, Duration::from_secs(20)).unwrap();
                if k == 1 {
                    // Garbage: a wrong hello, then a well-formed hello followed by a bogus key upload.
                    ch.send(b"GET / HTTP/1.1\r\n\r\n").unwrap();
                    let reply = ch.recv().unwrap();
                    assert_eq!(reply[0], 0xEE, "the server names the error");
                    assert!(String::from_utf8_lossy(&reply[1..]).contains("hello"));
                    let mut ch = TcpChannel::connect(addr, LinkModel::UNLIMITED, Duration::from_secs(20)).unwrap();
                    let hello = lycaon_runtime::hello::Hello { want: lycaon_runtime::hello::Want::Inference, mode: Some(lycaon_runtime::Mode::Hybrid) };
                    ch.send(&hello.to_bytes()).unwrap();
                    let _program = ch.recv().unwrap();
                    ch.send(&[1, 9, 9, 9, 9, 9]).unwrap();
                    let reply = ch.recv().unwrap();
                    assert_eq!(reply[0], 0xEE);
                    return None;
                }
                let x = random(&mut rand::rng(), 2 * 64, 30);
                let outcome = run_client(&mut ch, &x, &mut |_, _, _| {}).unwrap();
                Some((outcome.logits.unwrap(), reference(weights, &x, false)))
            }));
        }
        for c in clients {
            if let Some((got, want)) = c.join().unwrap() {
                assert_eq!(got, want);
            }
        }
        // Still serving after the garbage: one more client, and the public program on request.
        let mut ch = TcpChannel::connect(addr, LinkModel::UNLIMITED, Duration::from_secs(20)).unwrap();
        assert_eq!(fetch_program(&mut ch).unwrap().name, "test-net");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    // The last session's thread logs its end just after its answer went out: wait for it.
    let ended = |lines: &[String]| lines.iter().filter(|l| l.contains("session_end")).count();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while ended(&log.lines()) < 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let lines = log.lines();
    assert!(ended(&lines) >= 4, "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("session_error")), "{lines:?}");
    // Each inference logged its progress, at least its last op (the 9 ops of `network`).
    let finished = lines.iter().filter(|l| l.contains("session_progress") && l.contains("\"done\":9") && l.contains("\"total\":9")).count();
    assert!(finished >= 3, "{lines:?}");
}

/// What crosses the wire: the client receives only ciphertexts, two-party messages and the final
/// output; the server receives only seeded ciphertexts, public keys and two-party messages. A
/// recording channel checks that no plaintext intermediate value (the exact accumulators) appears
/// in what the server receives, and that no secret key object is ever sent.
#[test]
fn nothing_unmasked_crosses_the_wire() {
    struct Recording {
        inner: MemoryChannel,
        sent: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    }
    impl Channel for Recording {
        fn send(&mut self, m: &[u8]) -> lycaon_mpc::Result<()> {
            self.sent.lock().unwrap().push(m.to_vec());
            self.inner.send(m)
        }
        fn recv(&mut self) -> lycaon_mpc::Result<Vec<u8>> {
            self.inner.recv()
        }
        fn stats(&self) -> lycaon_mpc::channel::ChannelStats {
            self.inner.stats()
        }
    }
    let (program, weights) = network(false, "logits");
    let model = ServedModel::new(program, &weights, no_flooding()).unwrap();
    let x = random(&mut rand::rng(), 2 * 64, 30);
    let (a, b) = MemoryChannel::pair();
    let client_sent = Arc::new(std::sync::Mutex::new(Vec::new()));
    let server_sent = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut client_end = Recording { inner: b, sent: client_sent.clone() };
    let mut server_end = Recording { inner: a, sent: server_sent.clone() };
    let outcome = std::thread::scope(|s| {
        let c = s.spawn(|| run_client(&mut client_end, &x, &mut |_, _, _| {}));
        lycaon_runtime::session::serve_session(&model, &mut server_end).unwrap();
        c.join().unwrap().unwrap()
    });
    let client_sent = client_sent.lock().unwrap();
    let server_sent = server_sent.lock().unwrap();
    // No serialised secret key: the envelope kind byte of a secret key never appears as a
    // message start, and the client's messages are the hello, the key upload (public key and
    // Galois keys), layer requests (seeded ciphertexts) and two-party traffic.
    let secret_envelope = lycaon_bfv::rlwe::SecretKey::generate(
        &lycaon_bfv::rlwe::Parameters::new(lycaon_bfv::rlwe::ParametersLiteral::bfv_from_bits(4096, &[55, 45], &[], 30).unwrap()).unwrap(),
        &mut lycaon_math::Sampler::from_os().unwrap(),
    )
    .unwrap()
    .to_bytes();
    let header = &secret_envelope[..8.min(secret_envelope.len())];
    assert!(!client_sent.iter().any(|m| m.windows(header.len()).any(|w| w == header)), "a secret-key envelope was sent");
    // The exact first-layer accumulators (as 64-bit little-endian words) never cross in either
    // direction; the input itself never reaches the server.
    let (w1, b1) = &weights.layers["conv1"];
    let acc = conv(ConvShape::conv(8, 2, 4, 3, 1), &x, w1, b1.as_ref());
    let needle = |v: &[i64]| -> Vec<u8> { v.iter().take(4).flat_map(|&a| (a as u64).to_le_bytes()).collect() };
    for (who, msgs) in [("client", &*client_sent), ("server", &*server_sent)] {
        for m in msgs.iter() {
            for probe in [needle(&acc), needle(&x)] {
                assert!(!m.windows(probe.len()).any(|w| w == probe.as_slice()), "{who} sent a plaintext intermediate");
            }
        }
    }
    assert_eq!(outcome.logits.unwrap(), reference(&weights, &x, false));
}

/// floor(v / 2^shift) of every value.
fn floor_shift(v: Vec<i64>, shift: u32) -> Vec<i64> {
    v.into_iter().map(|a| a >> shift).collect()
}

/// conv (cheetah, bias) -> truncate -> clip (ReLU6 at 4 fraction bits: max = 96) -> conv
/// (cheetah, other t, stride 2): the logits equal the plain integer reference bit for bit, on an
/// input whose clip sees values below 0, between 0 and max, and above max.
#[test]
fn clip_is_relu6_exactly() {
    let mut rng = rand::rng();
    let max = 6 * 16;
    let clip_program = |max: i64| {
        Program::from_json(
            &json!({"version": 2, "name": "relu6", "input": "x", "input_shape": [2, 8, 8], "fraction_bits": 4, "output": "y", "ops": [
                {"op": "linear", "name": "conv1", "inputs": ["x"], "output": "a", "algorithm": "cheetah", "params": params(30, &[55, 45], &[]),
                 "shape": {"h": 8, "w": 8, "c_in": 2, "c_out": 3, "k": 3, "stride": 1, "pad": 1}, "has_bias": true},
                {"op": "truncate", "name": "t", "inputs": ["a"], "output": "at", "shift": 3},
                {"op": "clip", "name": "six", "inputs": ["at"], "output": "c", "max": max},
                {"op": "linear", "name": "conv2", "inputs": ["c"], "output": "y", "algorithm": "cheetah", "params": params(36, &[55, 45], &[]),
                 "shape": {"h": 8, "w": 8, "c_in": 3, "c_out": 2, "k": 3, "stride": 2, "pad": 1}}]})
            .to_string(),
        )
        .unwrap()
    };
    // A clip must have a positive max, small against its ring.
    for bad in [0, -5, 1 << 40] {
        let err = clip_program(bad).compile().err().expect("a bad clip bound is refused");
        assert!(err.to_string().contains("clip 'six'"), "{err}");
    }
    let program = clip_program(max);
    let compiled = program.clone().compile().unwrap();
    // The truncation writes straight into conv2's ring through the clip.
    assert_eq!(compiled.rings["at"], compiled.rings["y"]);
    assert_eq!(compiled.rings["c"], compiled.rings["y"]);
    let mut weights = Weights::default();
    weights.layers.insert("conv1".into(), (random(&mut rng, 3 * 2 * 9, 7), Some(random(&mut rng, 3, 300))));
    weights.layers.insert("conv2".into(), (random(&mut rng, 2 * 3 * 9, 7), None));
    let shape1 = ConvShape::conv(8, 2, 3, 3, 1);
    let shape2 = ConvShape::conv(8, 3, 2, 3, 2);
    let clipped = |x: &[i64]| -> Vec<i64> {
        let (w1, b1) = &weights.layers["conv1"];
        floor_shift(conv(shape1, x, w1, b1.as_ref()), 3).into_iter().map(|v| v.clamp(0, max)).collect()
    };
    let unclipped = |x: &[i64]| floor_shift(conv(shape1, x, &weights.layers["conv1"].0, weights.layers["conv1"].1.as_ref()), 3);
    // An input on which the clip meets all three cases.
    let x = (0..100)
        .map(|_| random(&mut rng, 2 * 64, 60))
        .find(|x| {
            let a = unclipped(x);
            a.iter().any(|&v| v < 0) && a.iter().any(|&v| v > max) && a.iter().any(|&v| v > 0 && v < max)
        })
        .expect("some input covers every case");
    let want = conv(shape2, &clipped(&x), &weights.layers["conv2"].0, None);
    let model = ServedModel::new(program, &weights, no_flooding()).unwrap();
    let (client, _) = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
    assert_eq!(client.logits.unwrap(), want);
    assert_eq!(client.layers.iter().map(|l| l.op.as_str()).collect::<Vec<_>>(), ["linear", "truncate", "clip", "linear"]);
}

/// Every tensor is freed after the op that reads it last; the output is kept for the reveal.
#[test]
fn tensors_are_freed_after_their_last_reader() {
    let (program, _) = network(true, "logits");
    let compiled = program.compile().unwrap();
    let freed: Vec<(&str, Vec<&str>)> =
        compiled.program.ops.iter().zip(&compiled.drop_after).map(|(op, d)| (op.name.as_str(), d.iter().map(String::as_str).collect())).collect();
    // p1 is read by conv2 and by the residual add; everything else by the next op only.
    let want: Vec<(&str, Vec<&str>)> = vec![
        ("conv1", vec!["x"]),
        ("t1", vec!["a1"]),
        ("r1", vec!["a1t"]),
        ("p1", vec!["r1"]),
        ("conv2", vec![]),
        ("t2", vec!["a2"]),
        ("res", vec!["a2t", "p1"]),
        ("r2", vec!["s"]),
        ("gp", vec!["r2"]),
        ("fl", vec!["g"]),
        ("fc", vec!["f"]),
    ];
    assert_eq!(freed, want);
    assert!(!compiled.drop_after.iter().flatten().any(|t| t == "logits"));
}

/// A non-square 3 x 12 x 10 input: a grouped convolution (groups = 3, gazelle) -> truncate ->
/// relu -> 2x2 sum pool, concatenated with a strided convolution (cheetah) -> truncate of the
/// same input (in its own ring: converted at the concat), flattened into a fully connected layer.
#[test]
fn non_square_input_with_grouped_conv_pool_and_concat_is_exact() {
    let mut rng = rand::rng();
    let program = Program::from_json(
        &json!({"version": 2, "name": "non-square", "input": "x", "input_shape": [3, 12, 10], "fraction_bits": 4, "output": "logits", "ops": [
            {"op": "linear", "name": "gconv", "inputs": ["x"], "output": "a", "algorithm": "gazelle-IA", "params": params(31, &[50, 50], &[50]),
             "shape": {"h": 12, "w": 10, "c_in": 3, "c_out": 6, "k": 3, "stride": 1, "pad": 1, "groups": 3}, "has_bias": true},
            {"op": "truncate", "name": "ta", "inputs": ["a"], "output": "at", "shift": 3},
            {"op": "relu", "name": "r", "inputs": ["at"], "output": "r"},
            {"op": "sumpool", "name": "pool", "inputs": ["r"], "output": "s", "kernel": [2, 2], "stride": [2, 2], "multiplier": 1},
            {"op": "linear", "name": "sconv", "inputs": ["x"], "output": "b", "algorithm": "cheetah", "params": params(30, &[55, 45], &[]),
             "shape": {"h": 12, "w": 10, "c_in": 3, "c_out": 2, "k": 3, "stride": 2, "pad": 1}},
            {"op": "truncate", "name": "tb", "inputs": ["b"], "output": "bt", "shift": 3},
            {"op": "concat", "name": "cat", "inputs": ["s", "bt"], "output": "c"},
            {"op": "flatten", "name": "fl", "inputs": ["c"], "output": "f"},
            {"op": "linear", "name": "fc", "inputs": ["f"], "output": "logits", "algorithm": "cheetah-matvec", "params": params(36, &[55, 45], &[]),
             "shape": {"h": 1, "w": 1, "c_in": 240, "c_out": 5, "k": 1, "stride": 1}, "has_bias": true}]})
        .to_string(),
    )
    .unwrap();
    let compiled = program.clone().compile().unwrap();
    assert_eq!((&compiled.shapes["s"], &compiled.shapes["bt"], &compiled.shapes["c"]), (&vec![6, 6, 5], &vec![2, 6, 5], &vec![8, 6, 5]));
    // The second part's truncation writes straight into the first part's ring: no conversion.
    assert_ne!(compiled.rings["b"], compiled.rings["s"]);
    assert_eq!(compiled.rings["bt"], compiled.rings["s"]);
    let mut weights = Weights::default();
    weights.layers.insert("gconv".into(), (random(&mut rng, 6 * 9, 7), Some(random(&mut rng, 6, 100))));
    weights.layers.insert("sconv".into(), (random(&mut rng, 2 * 3 * 9, 7), None));
    weights.layers.insert("fc".into(), (random(&mut rng, 5 * 240, 7), Some(random(&mut rng, 5, 200))));
    let x = random(&mut rng, 3 * 12 * 10, 30);

    // The plain integer reference.
    let gshape = ConvShape { c_in: 3, h: 12, w: 10, c_out: 6, kh: 3, kw: 3, stride: 1, pad_h: 1, pad_w: 1, groups: 3 };
    let sshape = ConvShape { c_out: 2, stride: 2, groups: 1, ..gshape };
    let (wg, bg) = &weights.layers["gconv"];
    let r: Vec<i64> = floor_shift(conv(gshape, &x, wg, bg.as_ref()), 3).into_iter().map(|v| v.max(0)).collect();
    let mut c = Vec::with_capacity(240);
    for ch in 0..6 {
        for y in 0..6 {
            for xx in 0..5 {
                c.push((0..4).map(|k| r[ch * 120 + (2 * y + k / 2) * 10 + 2 * xx + k % 2]).sum::<i64>());
            }
        }
    }
    c.extend(floor_shift(conv(sshape, &x, &weights.layers["sconv"].0, None), 3));
    let (wf, bf) = &weights.layers["fc"];
    let want: Vec<i64> = (0..5).map(|o| (0..240).map(|i| wf[o * 240 + i] * c[i]).sum::<i64>() + bf.as_ref().unwrap()[o]).collect();

    let model = ServedModel::new(program, &weights, no_flooding()).unwrap();
    let (client, _) = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
    assert_eq!(client.logits.unwrap(), want);
}

#[test]
fn ops_larger_than_one_two_party_batch_are_exact() {
    // 1 x 400 x 350 = 140,000 elements: the truncation, ReLU, clip and max-pool each run in two
    // chunks of at most NONLINEAR_CHUNK (2^17) elements.
    const { assert!(400 * 350 > lycaon_runtime::session::NONLINEAR_CHUNK) };
    let mut rng = rand::rng();
    let program = Program::from_json(
        &json!({"version": 2, "name": "wide", "input": "x", "input_shape": [1, 400, 350], "fraction_bits": 4, "output": "out", "ops": [
            {"op": "linear", "name": "conv", "inputs": ["x"], "output": "a", "algorithm": "cheetah", "params": params(30, &[55, 45], &[]),
             "shape": {"h": 400, "w": 350, "c_in": 1, "c_out": 1, "k": 1, "stride": 1, "pad": 0}},
            {"op": "truncate", "name": "t", "inputs": ["a"], "output": "at", "shift": 2},
            {"op": "relu", "name": "r", "inputs": ["at"], "output": "r"},
            {"op": "clip", "name": "c", "inputs": ["r"], "output": "c", "max": 40},
            {"op": "maxpool", "name": "p", "inputs": ["c"], "output": "p", "kernel": [2, 2], "stride": [1, 1]},
            {"op": "flatten", "name": "fl", "inputs": ["p"], "output": "out"}]})
        .to_string(),
    )
    .unwrap();
    let mut weights = Weights::default();
    weights.layers.insert("conv".into(), (vec![3], None));
    let model = ServedModel::new(program, &weights, no_flooding()).unwrap();
    let x = random(&mut rng, 400 * 350, 60);
    let c: Vec<i64> = x.iter().map(|&v| ((3 * v) >> 2).clamp(0, 40)).collect();
    let want: Vec<i64> = (0..399 * 349)
        .map(|i| {
            let (y, xx) = (i / 349, i % 349);
            [c[y * 350 + xx], c[y * 350 + xx + 1], c[(y + 1) * 350 + xx], c[(y + 1) * 350 + xx + 1]].into_iter().max().unwrap()
        })
        .collect();
    let (client, _) = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
    assert_eq!(client.logits.unwrap(), want);
}

/// Plain max-pooling of a (C, H, W) tensor, padding as minus infinity.
fn max_pool_reference(x: &[i64], [c, h, w]: [usize; 3], k: usize, s: usize, pad: usize) -> Vec<i64> {
    let (oh, ow) = ((h + 2 * pad - k) / s + 1, (w + 2 * pad - k) / s + 1);
    let mut out = Vec::with_capacity(c * oh * ow);
    for ch in 0..c {
        for oy in 0..oh {
            for ox in 0..ow {
                let taps = (0..k * k).filter_map(|t| {
                    let (y, xx) = ((oy * s + t / k) as isize - pad as isize, (ox * s + t % k) as isize - pad as isize);
                    ((0..h as isize).contains(&y) && (0..w as isize).contains(&xx)).then(|| x[ch * h * w + y as usize * w + xx as usize])
                });
                out.push(taps.max().unwrap());
            }
        }
    }
    out
}

#[test]
fn overlapping_max_pools_are_exact_row_then_column_bounded_or_not() {
    // 3x3 windows at stride 2 with padding 1 on a 7x9 map (rows then columns: 6 comparisons per
    // output instead of 8), on signed values as they come out of a truncation (the compiler
    // puts max-pooling before the ReLU that used to precede it) and on raw accumulators (no
    // bound from the program: the full-range ReLU).
    let mut rng = rand::rng();
    for truncate in [true, false] {
        let mut ops =
            vec![json!({"op": "linear", "name": "conv", "inputs": ["x"], "output": "a", "algorithm": "cheetah", "params": params(30, &[55, 45], &[]),
            "shape": {"h": 7, "w": 9, "c_in": 2, "c_out": 3, "k": 3, "stride": 1, "pad": 1}, "has_bias": true})];
        let pooled_input = if truncate {
            ops.push(json!({"op": "truncate", "name": "t", "inputs": ["a"], "output": "at", "shift": 3}));
            "at"
        } else {
            "a"
        };
        ops.extend([
            json!({"op": "maxpool", "name": "p", "inputs": [pooled_input], "output": "p", "kernel": [3, 3], "stride": [2, 2], "pads": [1, 1, 1, 1]}),
            json!({"op": "relu", "name": "r", "inputs": ["p"], "output": "r"}),
            json!({"op": "flatten", "name": "fl", "inputs": ["r"], "output": "out"}),
        ]);
        let program = Program::from_json(
            &json!({"version": 2, "name": "pool", "input": "x", "input_shape": [2, 7, 9], "fraction_bits": 4, "output": "out", "ops": ops}).to_string(),
        )
        .unwrap();
        let compiled = program.clone().compile().unwrap();
        assert_eq!(compiled.bounds.contains_key("at"), truncate);
        let mut weights = Weights::default();
        weights.layers.insert("conv".into(), (random(&mut rng, 3 * 2 * 9, 7), Some(random(&mut rng, 3, 200))));
        let x = random(&mut rng, 2 * 63, 40);
        let a = conv(ConvShape { w: 9, ..ConvShape::conv(7, 2, 3, 3, 1) }, &x, &weights.layers["conv"].0, weights.layers["conv"].1.as_ref());
        let a = if truncate { floor_shift(a, 3) } else { a };
        assert!(a.iter().any(|&v| v < 0) && a.iter().any(|&v| v > 0));
        let want: Vec<i64> = max_pool_reference(&a, [3, 7, 9], 3, 2, 1).into_iter().map(|v| v.max(0)).collect();
        let model = ServedModel::new(program, &weights, no_flooding()).unwrap();
        let (client, _) = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
        assert_eq!(client.logits.unwrap(), want, "truncate {truncate}");
    }
}

/// Keys cross once, just before the first layer that needs them, and are dropped after the last
/// one: three convolutions of one parameter set with different rotations (3x3, 1x1, 3x3),
/// then a matrix-vector product in another set. Walking the schedule, every layer finds the public
/// key and every Galois key it rotates by held, and nothing is held at the end.
#[test]
fn keys_cross_before_their_first_layer_and_go_after_their_last() {
    let p2 = params(31, &[50, 50], &[50]);
    let p3 = params(36, &[55, 45], &[]);
    let conv = |name: &str, input: &str, output: &str, c_in: usize, c_out: usize, k: usize| {
        json!({"op": "linear", "name": name, "inputs": [input], "output": output, "algorithm": "gazelle-ia", "params": p2,
            "shape": {"h": 4, "w": 4, "c_in": c_in, "c_out": c_out, "k": k, "stride": 1, "pad": k / 2}})
    };
    let ops = vec![
        conv("a", "x", "a", 2, 4, 3),
        json!({"op": "relu", "name": "ra", "inputs": ["a"], "output": "ra"}),
        conv("b", "ra", "b", 4, 4, 1),
        json!({"op": "relu", "name": "rb", "inputs": ["b"], "output": "rb"}),
        conv("c", "rb", "c", 4, 2, 3),
        json!({"op": "flatten", "name": "fl", "inputs": ["c"], "output": "f"}),
        json!({"op": "linear", "name": "fc", "inputs": ["f"], "output": "y", "algorithm": "cheetah-matvec", "params": p3,
            "shape": {"h": 1, "w": 1, "c_in": 32, "c_out": 3, "k": 1, "stride": 1}}),
    ];
    let program = Program::from_json(
        &json!({"version": 2, "name": "keys", "input": "x", "input_shape": [2, 4, 4], "fraction_bits": 0, "output": "y", "ops": ops}).to_string(),
    )
    .unwrap();
    let compiled = program.compile().unwrap();
    let mut held: std::collections::HashSet<(usize, Option<u64>)> = Default::default();
    let mut crossed = 0;
    for name in ["a", "b", "c", "fc"] {
        let (step, keys) = (&compiled.linear[name], &compiled.keys[name]);
        if keys.public_key_arrives {
            assert!(held.insert((step.set, None)), "{name}: the public key crossed twice");
        }
        for &g in &keys.arrive {
            assert!(held.insert((step.set, Some(g))), "{name}: the key of {g} crossed twice");
            crossed += 1;
        }
        assert!(held.contains(&(step.set, None)), "{name}: no public key held");
        for g in step.plan.galois_elements().into_iter().filter(|&g| g != 1) {
            assert!(held.contains(&(step.set, Some(g))), "{name}: the key of {g} is not held");
        }
        for &g in &keys.depart {
            assert!(held.remove(&(step.set, Some(g))), "{name}: drops the key of {g}, not held");
        }
        if keys.public_key_departs {
            assert!(held.remove(&(step.set, None)));
        }
    }
    assert!(held.is_empty(), "keys left after the last layer: {held:?}");
    assert_eq!(crossed, compiled.param_sets.iter().map(|(_, _, g)| g.len()).sum::<usize>(), "each needed key crosses once");
    // Keys the first layer alone uses go after it; keys the last 3x3 also uses stay held.
    let (a, c) = (&compiled.keys["a"], &compiled.keys["c"]);
    assert!(!a.depart.is_empty() && a.arrive.iter().any(|g| c.depart.contains(g)), "{a:?} {c:?}");
    assert!(compiled.keys["c"].public_key_departs && compiled.keys["fc"].public_key_arrives && compiled.keys["fc"].public_key_departs);
}

/// A fanout of in-process workers: each layer's units split over them in contiguous ranges,
/// evaluated on threads; `fail_layer` makes the first call of that layer fail.
struct LocalFanout {
    workers: Vec<lycaon_runtime::fanout::LinearWorker>,
    calls: std::sync::Mutex<Vec<(String, usize)>>,
    fail_layer: std::sync::Mutex<Option<String>>,
}

impl lycaon_runtime::fanout::Fanout for LocalFanout {
    fn key_arrived(&self, session: u64, set: usize, element: u64, message: &[u8]) -> lycaon_runtime::Result<()> {
        self.workers.iter().try_for_each(|w| w.add_key(session, set, element, message))
    }
    fn key_departed(&self, session: u64, set: usize, element: u64) -> lycaon_runtime::Result<()> {
        self.workers.iter().try_for_each(|w| w.drop_key(session, set, element))
    }
    fn evaluate(&self, session: u64, layer: &str, units: usize, _block: usize, inputs: Vec<Vec<u8>>) -> lycaon_runtime::Result<Vec<lycaon_runtime::fanout::Answered>> {
        if self.fail_layer.lock().unwrap().take_if(|l| l == layer).is_some() {
            return Err(lycaon_runtime::RuntimeError::Cluster(format!("linear '{layer}': every worker died")));
        }
        self.calls.lock().unwrap().push((layer.to_string(), units));
        let n = self.workers.len().min(units);
        let parts: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n).map(|k| {
                let (w, inputs) = (&self.workers[k], &inputs);
                s.spawn(move || w.evaluate(session, layer, units * k / n..units * (k + 1) / n, inputs))
            }).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        parts.into_iter().collect()
    }
    fn session_ended(&self, session: u64) {
        for w in &self.workers {
            w.end_session(session).unwrap();
        }
    }
}

/// `n` workers in this process for `program`, each with the server's options.
fn local_fanout(program: &Program, weights: &Weights, options: SessionOptions, n: usize) -> Arc<LocalFanout> {
    let workers = (0..n).map(|_| lycaon_runtime::fanout::LinearWorker::new(program.clone(), weights, options.clone()).unwrap()).collect();
    Arc::new(LocalFanout { workers, calls: Default::default(), fail_layer: Default::default() })
}

#[test]
fn workers_evaluating_the_linear_layers_give_the_same_logits_and_keep_no_keys() {
    let (program, weights) = network(true, "logits");
    let fanout = local_fanout(&program, &weights, no_flooding(), 3);
    let model = ServedModel::with_fanout(program.clone(), &weights, no_flooding(), fanout.clone()).unwrap();
    let x = random(&mut rand::rng(), 2 * 64, 30);
    let (client, _) = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
    assert_eq!(client.logits.as_deref(), Some(&reference(&weights, &x, true)[..]));
    // Every linear layer went to the workers, and conv2 (gazelle, 1 output ciphertext per
    // unit) and conv1 (cheetah, output groups) with their units as the plans state them.
    let calls = fanout.calls.lock().unwrap().clone();
    let compiled = program.compile().unwrap();
    let expected: Vec<(String, usize)> = ["conv1", "conv2", "fc"].iter().map(|&l| (l.to_string(), compiled.linear[l].plan.output_units())).collect();
    assert_eq!(calls, expected);
    for w in &fanout.workers {
        assert_eq!(w.keys_held().unwrap(), 0, "a worker kept keys after the session");
    }
    // A layer that fails on the workers ends its session with an error naming the cluster; the
    // next session on the same model completes.
    *fanout.fail_layer.lock().unwrap() = Some("conv2".into());
    let err = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).err().expect("the failed layer ends the session");
    assert!(err.to_string().contains("every worker died"), "{err}");
    let (client, _) = run_local(&model, &x, LinkModel::UNLIMITED, &mut |_, _, _| {}).unwrap();
    assert_eq!(client.logits.as_deref(), Some(&reference(&weights, &x, true)[..]));
}
