//! One layer through every algorithm at secure parameters, printed as JSON lines:
//! cargo run --release -p lycaon-nn --example linear_bench -- H C_IN C_OUT K [STRIDE] [N]
use std::sync::Arc;

use lycaon_bfv::rlwe::{Parameters, ParametersLiteral};
use lycaon_nn::coeff::CoeffConv;
use lycaon_nn::harness::run_layer;
use lycaon_nn::packed::{PackedConv, PackedOptions, Schedule};
use lycaon_nn::padded::PaddedConv;
use lycaon_nn::walsh::WalshConv;
use lycaon_nn::{ConvShape, LinearPlan};
use rand::{RngExt, SeedableRng};

fn main() {
    let a: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().unwrap()).collect();
    let shape = ConvShape::conv(a[0], a[1], a[2], a[3], *a.get(4).unwrap_or(&1));
    let n = *a.get(5).unwrap_or(&4096);
    let mk = |q: &[u32], p: &[u32]| Parameters::new(ParametersLiteral::bfv_from_bits(n, q, p, 20).unwrap()).unwrap();
    let (gz, wh, co): (Arc<Parameters>, Arc<Parameters>, Arc<Parameters>) = match n {
        4096 => (mk(&[36, 36], &[37]), mk(&[36, 36], &[37]), mk(&[55, 54], &[])),
        8192 => (mk(&[43, 43, 44, 44], &[44]), mk(&[54, 54], &[55]), mk(&[55, 54], &[])),
        _ => panic!("n"),
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let x: Vec<i64> = (0..shape.input_len()).map(|_| rng.random_range(-128..128)).collect();
    let w: Vec<i64> = (0..shape.weight_len()).map(|_| rng.random_range(-128..128)).collect();
    let plans: Vec<Box<dyn LinearPlan>> = vec![
        Box::new(PackedConv::new(&shape, &gz, PackedOptions::default()).unwrap()),
        Box::new(PackedConv::new(&shape, &gz, PackedOptions { schedule: Schedule::PartialAligned, ..Default::default() }).unwrap()),
        Box::new(WalshConv::new(&shape, &wh, None).unwrap()),
        Box::new(PaddedConv::new(&shape, &wh, None).unwrap()),
        Box::new(CoeffConv::new(&shape, &co).unwrap()),
    ];
    for plan in plans {
        let r = run_layer(plan.as_ref(), &x, &w, 1).unwrap();
        println!(
            "{{\"layer\": \"{:?}\", \"algorithm\": \"{}\", \"server_s\": {:.3}, \"client_s\": {:.3}, \"up\": {}, \"down\": {}, \"weights\": {}, \"keys\": {}, \"rot\": {}, \"ntt\": {}, \"exact\": {}, \"budget\": {:.1}}}",
            (shape.h, shape.c_in, shape.c_out, shape.kh, shape.stride), plan.name(), r.server_s, r.encrypt_s + r.decrypt_s, r.cost.up_bytes, r.cost.down_bytes, r.weight_bytes, r.cost.key_bytes, r.counts.rotations, r.counts.ntts, r.exact, r.min_noise_budget
        );
    }
}
