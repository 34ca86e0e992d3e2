//! What a served model keeps in memory for its linear layers: the prepared weights
//! (`ServedModel::prepared_bytes`, the algorithm's stated size: plaintexts in NTT form at their
//! serialised width) against the raw i64 weights, and what they take in memory (a 64-bit word
//! per coefficient and limb). ResNet-50-sized layers with the cheetah algorithm; run with
//! `cargo test --release -p lycaon-runtime --test prepared_memory -- --ignored --nocapture`.

use lycaon_nn::algorithm::Algorithm;
use lycaon_nn::layout::prepared_plaintext_bytes;
use lycaon_nn::ConvShape;
use lycaon_plan::hybrid::ParamChoice;
use lycaon_runtime::session::ServedModel;
use lycaon_runtime::{Program, SessionOptions, Weights};
use serde_json::json;

const MIB: f64 = (1 << 20) as f64;

fn param_sets() -> [ParamChoice; 2] {
    [
        ParamChoice { n: 4096, q_bits: vec![60, 49], p_bits: vec![], t_bits: 37, digits: 1, t_n: None },
        ParamChoice { n: 8192, q_bits: vec![60, 60], p_bits: vec![], t_bits: 37, digits: 1, t_n: None },
    ]
}

/// Bytes in memory of `stated` bytes of prepared plaintexts (each coefficient a u64 per limb).
fn in_memory(stated: usize, choice: &ParamChoice) -> usize {
    let params = choice.parameters().unwrap();
    stated / prepared_plaintext_bytes(&params) * params.n() * (params.max_level() + 1) * 8
}

#[test]
#[ignore = "prints memory figures of ResNet-50-sized layers (a few seconds)"]
fn prepared_weights_of_resnet50_layers() {
    // (c_in, c_out, k, h): the widest 1x1 projection, a 3x3 conv of the first and of the third stage.
    let layers = [(512, 2048, 1, 7), (64, 64, 3, 56), (1024, 256, 1, 14), (256, 256, 3, 14)];
    for choice in &param_sets() {
        for &(c_in, c_out, k, h) in &layers {
            let program = Program::from_json(
                &json!({"version": 2, "name": "one-layer", "input": "x", "input_shape": [c_in, h, h], "fraction_bits": 0, "output": "y", "ops": [
                    {"op": "linear", "name": "conv", "inputs": ["x"], "output": "y", "algorithm": "cheetah", "params": choice,
                     "shape": {"h": h, "w": h, "c_in": c_in, "c_out": c_out, "k": k, "stride": 1}}]})
                .to_string(),
            )
            .unwrap();
            let raw: Vec<i64> = (0..c_out * c_in * k * k).map(|i| (i % 255) as i64 - 127).collect();
            let raw_bytes = raw.len() * 8;
            let mut weights = Weights::default();
            weights.layers.insert("conv".into(), (raw, None));
            let model = ServedModel::new(program, &weights, SessionOptions { flood_bits: 0.0, ..SessionOptions::default() }).unwrap();
            let stated = model.prepared_bytes()[0].1;
            let memory = in_memory(stated, choice);
            println!(
                "{} c_in={c_in} c_out={c_out} k={k} h=w={h}: raw i64 {:.2} MiB, prepared {:.1} MiB stated ({:.0}x raw), {:.1} MiB in memory ({:.0}x raw)",
                choice.label(),
                raw_bytes as f64 / MIB,
                stated as f64 / MIB,
                stated as f64 / raw_bytes as f64,
                memory as f64 / MIB,
                memory as f64 / raw_bytes as f64,
            );
        }
    }
}

/// Every convolution of ResNet-50 (torchvision, stride on the 3x3) and its fc, summed.
#[test]
#[ignore = "prints the prepared weights of a whole ResNet-50 (plans only, a few seconds)"]
fn prepared_weights_of_resnet50() {
    let conv = |c_in, c_out, k, stride, h| ConvShape { c_in, h, w: h, c_out, kh: k, kw: k, stride, pad_h: k / 2, pad_w: k / 2, groups: 1 };
    let mut convs = vec![conv(3, 64, 7, 2, 224)];
    let mut c_in = 64;
    for (stage, (width, blocks, h)) in [(64, 3, 56), (128, 4, 56), (256, 6, 28), (512, 3, 14)].into_iter().enumerate() {
        let stride = if stage == 0 { 1 } else { 2 };
        let out_h = h / stride;
        for b in 0..blocks {
            let (s, hh) = if b == 0 { (stride, h) } else { (1, out_h) };
            convs.push(conv(c_in, width, 1, 1, hh));
            convs.push(conv(width, width, 3, s, hh));
            convs.push(conv(width, 4 * width, 1, 1, out_h));
            if b == 0 {
                convs.push(conv(c_in, 4 * width, 1, s, hh));
            }
            c_in = 4 * width;
        }
    }
    assert_eq!(convs.len(), 53);
    let raw: usize = convs.iter().map(|s| s.weight_len() * 8).sum::<usize>() + 2048 * 1000 * 8;
    for choice in &param_sets() {
        let params = choice.parameters().unwrap();
        let mut stated: usize = convs.iter().map(|s| Algorithm::Cheetah.build(s, &params).unwrap().weight_bytes()).sum();
        stated += Algorithm::CheetahMatVec.build(&ConvShape::fully_connected(2048, 1000), &params).unwrap().weight_bytes();
        println!(
            "ResNet-50, cheetah, {}: raw i64 weights {:.0} MiB, prepared {:.2} GiB stated, {:.2} GiB in memory",
            choice.label(),
            raw as f64 / MIB,
            stated as f64 / MIB / 1024.0,
            in_memory(stated, choice) as f64 / MIB / 1024.0
        );
    }
}
