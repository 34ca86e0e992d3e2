//! The FHE compiler end to end, without Python: small model-front graphs (a convolution with
//! stride and padding, a general per-channel quadratic, average pooling, a replicated fully
//! connected layer, a residual MLP) compiled by `fhe::compile`, served in memory, queried by a
//! client, and the decrypted logits checked against the graph run in float64.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lycaon_mpc::channel::MemoryChannel;
use lycaon_mpc::LinkModel;
use lycaon_runtime::fhe::graph::{GraphNode, ModelGraph, NodeAttrs, NodeOp, Tensor, GRAPH_FORMAT, GRAPH_VERSION};
use lycaon_runtime::fhe::session::serve_session;
use lycaon_runtime::fhe::{compile, open_session, CompileOptions, CompilePath, FheExecutable, FheServed, FheSessionOptions};
use rand::{RngExt, SeedableRng};

struct Builder {
    graph: ModelGraph,
    rng: rand::rngs::StdRng,
}

impl Builder {
    fn new(input_shape: &[usize], seed: u64) -> Self {
        let graph = ModelGraph {
            format: GRAPH_FORMAT.into(),
            version: GRAPH_VERSION,
            name: "g".into(),
            input: "x".into(),
            input_shape: input_shape.to_vec(),
            output: "x".into(),
            nodes: vec![],
        };
        Self { graph, rng: rand::rngs::StdRng::seed_from_u64(seed) }
    }

    fn random(&mut self, shape: &[usize], scale: f64) -> Tensor {
        let n = shape.iter().product();
        Tensor::new(shape.to_vec(), (0..n).map(|_| self.rng.random_range(-scale..scale)).collect())
    }

    fn add(&mut self, op: NodeOp, name: &str, inputs: &[&str], shape: &[usize], attrs: NodeAttrs, params: &[(&str, Tensor)]) -> String {
        let output = format!("{name}:o");
        let params: BTreeMap<String, Option<Tensor>> = params.iter().map(|(k, t)| (k.to_string(), Some(t.clone()))).collect();
        self.graph.nodes.push(GraphNode {
            op,
            name: name.into(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            output: output.clone(),
            shape: shape.to_vec(),
            attrs,
            params,
        });
        self.graph.output = output.clone();
        output
    }
}

/// The graph in float64 (the reference the encrypted run approximates).
fn run_float(g: &ModelGraph, x: &[f64]) -> Vec<f64> {
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::from([(g.input.clone(), x.to_vec())]);
    let shapes: BTreeMap<String, Vec<usize>> =
        std::iter::once((g.input.clone(), g.input_shape.clone())).chain(g.nodes.iter().map(|n| (n.output.clone(), n.shape.clone()))).collect();
    for n in &g.nodes {
        let src = &values[&n.inputs[0]];
        let ins = &shapes[&n.inputs[0]];
        let out: Vec<f64> = match n.op {
            NodeOp::Conv | NodeOp::Avgpool => {
                let (ci, hi, wi) = (ins[0], ins[1], ins[2]);
                let (co, ho, wo) = (n.shape[0], n.shape[1], n.shape[2]);
                let (w, kh, kw, stride, pads): (Vec<f64>, usize, usize, [usize; 2], [usize; 4]) = if n.op == NodeOp::Conv {
                    let w = n.param("weight").unwrap();
                    (w.data.clone(), w.shape[2], w.shape[3], n.attrs.stride(), n.attrs.pads())
                } else {
                    let k = n.attrs.kernel.unwrap();
                    let mut w = vec![0.0; co * ci * k[0] * k[1]];
                    for c in 0..co {
                        for t in 0..k[0] * k[1] {
                            w[(c * ci + c) * k[0] * k[1] + t] = 1.0 / (k[0] * k[1]) as f64;
                        }
                    }
                    (w, k[0], k[1], n.attrs.stride.unwrap_or(k), n.attrs.pads())
                };
                let bias = n.param("bias").map(|b| b.data.clone()).unwrap_or(vec![0.0; co]);
                let mut out = vec![0.0; co * ho * wo];
                for o in 0..co {
                    for y in 0..ho {
                        for xx in 0..wo {
                            let mut acc = bias[o];
                            for c in 0..ci {
                                for dy in 0..kh {
                                    for dx in 0..kw {
                                        let (iy, ix) = ((stride[0] * y + dy) as i64 - pads[0] as i64, (stride[1] * xx + dx) as i64 - pads[1] as i64);
                                        if iy >= 0 && ix >= 0 && (iy as usize) < hi && (ix as usize) < wi {
                                            acc += w[((o * ci + c) * kh + dy) * kw + dx] * src[(c * hi + iy as usize) * wi + ix as usize];
                                        }
                                    }
                                }
                            }
                            out[(o * ho + y) * wo + xx] = acc;
                        }
                    }
                }
                out
            }
            NodeOp::Poly => {
                let c = n.param("coefficients").unwrap();
                let width = *c.shape.last().unwrap();
                let inner = src.len() / ins[0];
                src.iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let row = if c.shape.len() == 1 { &c.data[..] } else { c.row(i / inner) };
                        row.iter().take(width).rev().fold(0.0, |acc, &k| acc * v + k)
                    })
                    .collect()
            }
            NodeOp::Flatten => src.clone(),
            NodeOp::Linear => {
                let w = n.param("weight").unwrap();
                let b = n.param("bias").map(|b| b.data.clone()).unwrap_or(vec![0.0; w.shape[0]]);
                (0..w.shape[0]).map(|o| b[o] + w.row(o).iter().zip(src).map(|(a, v)| a * v).sum::<f64>()).collect()
            }
            NodeOp::Add => src.iter().zip(&values[&n.inputs[1]]).map(|(a, b)| a + b).collect(),
            other => panic!("no float reference for {other:?}"),
        };
        values.insert(n.output.clone(), out);
    }
    values.remove(&g.output).unwrap()
}

/// Compiles `g`, serves it in memory, queries it with `inputs`; the largest error against the
/// float reference, relative to the largest logit.
fn encrypted_error(g: &ModelGraph, inputs: &[Vec<f64>]) -> f64 {
    let program = compile(g, &CompileOptions::default()).unwrap();
    // The executor's own rotation plan is covered by the compiler's keyset.
    let needed = FheExecutable::rotation_plan(program.clone(), cpu()).unwrap();
    for (step, level) in &needed {
        assert!(program.rotation_levels.get(step).is_some_and(|l| l >= level), "rotation {step} at level {level}: {:?}", program.rotation_levels.get(step));
    }
    let served = Arc::new(FheServed::new(program, cpu(), FheSessionOptions::default()).unwrap());
    let (mut server_end, mut client_end) = MemoryChannel::pair_with(LinkModel::UNLIMITED, Duration::from_secs(120));
    let server = std::thread::spawn(move || serve_session(&served, &mut server_end));
    let (mut client, _, _) = open_session(&mut client_end, cpu(), false, &mut |_| {}).unwrap();
    let mut worst: f64 = 0.0;
    for x in inputs {
        let got = client.query(&mut client_end, x, &mut |_, _, _| {}).unwrap().logits;
        let want = run_float(g, x);
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        worst = worst.max(got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max) / scale);
    }
    drop(client);
    drop(client_end);
    server.join().unwrap().unwrap();
    worst
}

#[test]
fn a_compiled_convolutional_network_decrypts_to_its_float_reference() {
    let mut b = Builder::new(&[2, 9, 9], 1);
    let stride = |s: usize, p: usize| NodeAttrs { stride: Some([s, s]), pads: Some([p; 4]), ..Default::default() };
    let (w1, b1) = (b.random(&[4, 2, 3, 3], 0.3), b.random(&[4], 0.1));
    let t = b.add(NodeOp::Conv, "conv1", &["x"], &[4, 5, 5], stride(2, 1), &[("weight", w1), ("bias", b1)]);
    let mut q = b.random(&[4, 3], 0.2);
    for r in q.data.chunks_mut(3) {
        r[2] += 1.0; // a general quadratic (two levels: nothing made it monic)
    }
    let t = b.add(NodeOp::Poly, "act1", &[&t], &[4, 5, 5], NodeAttrs::default(), &[("coefficients", q)]);
    let (w2, b2) = (b.random(&[4, 4, 3, 3], 0.2), b.random(&[4], 0.1));
    let t = b.add(NodeOp::Conv, "conv2", &[&t], &[4, 5, 5], stride(1, 1), &[("weight", w2), ("bias", b2)]);
    let pool = NodeAttrs { kernel: Some([2, 2]), stride: Some([2, 2]), ..Default::default() };
    let t = b.add(NodeOp::Avgpool, "pool", &[&t], &[4, 2, 2], pool, &[]);
    let t = b.add(NodeOp::Flatten, "flat", &[&t], &[16], NodeAttrs::default(), &[]);
    let t = b.add(NodeOp::Poly, "act2", &[&t], &[16], NodeAttrs::default(), &[("coefficients", Tensor::new(vec![3], vec![0.0, 0.0, 1.0]))]);
    let (w3, b3) = (b.random(&[5, 16], 0.3), b.random(&[5], 0.1));
    b.add(NodeOp::Linear, "fc", &[&t], &[5], NodeAttrs::default(), &[("weight", w3), ("bias", b3)]);
    let g = b.graph;
    g.validate().unwrap();
    let choice = lycaon_runtime::fhe::choose_path(&g, &CompileOptions::default()).unwrap();
    assert_eq!(choice.path, CompilePath::Leveled, "{}", choice.reason);
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    let inputs: Vec<Vec<f64>> = (0..2).map(|_| (0..162).map(|_| rng.random_range(0.0..1.0)).collect()).collect();
    let err = encrypted_error(&g, &inputs);
    assert!(err < 2f64.powi(-12), "relative error {err}");
}

#[test]
fn a_compiled_residual_mlp_decrypts_to_its_float_reference() {
    let mut b = Builder::new(&[40], 2);
    let (w1, b1) = (b.random(&[24, 40], 0.2), b.random(&[24], 0.1));
    let h = b.add(NodeOp::Linear, "fc1", &["x"], &[24], NodeAttrs::default(), &[("weight", w1), ("bias", b1)]);
    let a = b.add(NodeOp::Poly, "act", &[&h], &[24], NodeAttrs::default(), &[("coefficients", Tensor::new(vec![3], vec![0.1, 0.5, 1.0]))]);
    let (w2, b2) = (b.random(&[24, 24], 0.2), b.random(&[24], 0.1));
    let h2 = b.add(NodeOp::Linear, "fc2", &[&a], &[24], NodeAttrs::default(), &[("weight", w2), ("bias", b2)]);
    let r = b.add(NodeOp::Add, "res", &[&h2, &a], &[24], NodeAttrs::default(), &[]);
    let (w3, b3) = (b.random(&[6, 24], 0.3), b.random(&[6], 0.1));
    b.add(NodeOp::Linear, "fc3", &[&r], &[6], NodeAttrs::default(), &[("weight", w3), ("bias", b3)]);
    let g = b.graph;
    let program = compile(&g, &CompileOptions::default()).unwrap();
    // The input (40 values) repeats every 64 slots; no replication needed before fc1.
    assert!(matches!(program.input_packing, lycaon_runtime::fhe::InputPacking::Slots { period: 64, .. }));
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let inputs: Vec<Vec<f64>> = (0..2).map(|_| (0..40).map(|_| rng.random_range(-1.0..1.0)).collect()).collect();
    let err = encrypted_error(&g, &inputs);
    assert!(err < 2f64.powi(-12), "relative error {err}");
}

/// Every core of this machine (the runtime's device choice).
fn cpu() -> Arc<dyn lycaon_runtime::Backend> {
    lycaon_runtime::Device::Cpu.backend().expect("the CPU backend is always available")
}
