//! Every algorithm decrypts to exactly the plain integer convolution modulo t, and performs
//! exactly the operations its plan states (NTTs counted by an instrumented backend).

use std::sync::Arc;

use lycaon_bfv::rlwe::{Ciphertext, GaloisKeys, Parameters, ParametersLiteral, SecretKey, Security};
use lycaon_bfv::{BatchEncoder, BfvContext, CoeffEncoder, Decryptor, Encryptor, Evaluator};
use lycaon_math::Sampler;
use lycaon_nn::packed::{PackedConv, PackedOptions, Schedule};
use lycaon_nn::padded::PaddedConv;
use lycaon_nn::walsh::WalshConv;
use lycaon_nn::{conv_reference, ConvShape, CountingBackend, Encoding, HeOps, LinearPlan, NttCounter};
use rand::{RngExt, SeedableRng};

fn literal(n: usize) -> ParametersLiteral {
    let mut lit = if n >= 4096 { ParametersLiteral::bfv_from_bits(n, &[36, 36], &[37], 20).unwrap() } else { ParametersLiteral::bfv_from_bits(n, &[50, 50], &[51], 20).unwrap() };
    if n < 4096 {
        lit.security = Security::InsecureTestOnly;
    }
    lit
}

/// Runs a plan on random inputs and weights; checks values and counts.
fn check(plan: &dyn LinearPlan, lit: &ParametersLiteral, seed: u64) {
    let params = plan.params().clone();
    let shape = *plan.shape();
    let t = params.plaintext_modulus().unwrap().value();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let x: Vec<i64> = (0..shape.input_len()).map(|_| rng.random_range(-8..8)).collect();
    let w: Vec<i64> = (0..shape.weight_len()).map(|_| rng.random_range(-8..8)).collect();
    let expected = conv_reference(&shape, &x, &w, t).unwrap();

    let mut sampler = Sampler::from_os().unwrap();
    let sk = Arc::new(SecretKey::generate(&params, &mut sampler).unwrap());
    let gk = GaloisKeys::generate(&sk, &plan.galois_elements(), &mut sampler).unwrap();
    let ctx = BfvContext::new(&params).unwrap();
    let n = params.n();
    let layout_in = plan.input_layout();
    let batch = BatchEncoder::new(&params).ok();
    let coeff = CoeffEncoder::new(&params).unwrap();
    let encode = |enc: Encoding, v: &[u64]| match enc {
        Encoding::Batch => batch.as_ref().unwrap().encode(v).unwrap(),
        Encoding::Coeff => coeff.encode(v).unwrap(),
    };
    let mut encryptor = Encryptor::new(&ctx).unwrap();
    let inputs: Vec<Ciphertext> = layout_in
        .pack(&x, n, t)
        .unwrap()
        .iter()
        .map(|v| encryptor.encrypt_symmetric(&sk, &encode(layout_in.encoding, v)).unwrap().expand(&params).unwrap())
        .collect();

    // The server side runs on instrumented parameters (same id, NTT-counting backend).
    let counter = NttCounter::default();
    let counting = Parameters::with_backend(lit.clone(), Arc::new(CountingBackend::new(counter.clone()))).unwrap();
    assert_eq!(counting.id(), params.id());
    let prepared = plan.prepare(&w).unwrap();
    let ops = HeOps::new(Evaluator::new(&BfvContext::new(&counting).unwrap()), gk);
    counter.reset();
    let outputs = prepared.evaluate(&ops, &inputs).unwrap();
    let mut counts = ops.counts();
    counts.ntts = counter.get();
    assert_eq!(counts, plan.counts(), "{}: stated counts differ from the instrumented run", plan.name());

    let layout_out = plan.output_layout();
    assert_eq!(outputs.len(), layout_out.num_ciphertexts);
    let dec = Decryptor::new(&ctx, sk).unwrap();
    let decoded: Vec<Vec<u64>> = outputs
        .iter()
        .map(|ct| {
            assert_eq!(ct.level(), 0, "outputs are sent at the lowest level");
            let pt = dec.decrypt(ct).unwrap();
            match layout_out.encoding {
                Encoding::Batch => batch.as_ref().unwrap().decode(&pt).unwrap(),
                Encoding::Coeff => coeff.decode(&pt).unwrap(),
            }
        })
        .collect();
    let got = layout_out.unpack(&decoded, t).unwrap();
    assert_eq!(got, expected, "{} on {shape:?}", plan.name());
}

fn params(lit: &ParametersLiteral) -> Arc<Parameters> {
    Parameters::new(lit.clone()).unwrap()
}

fn shapes() -> Vec<ConvShape> {
    let mut odd = ConvShape::conv(7, 3, 5, 3, 1);
    odd.w = 6;
    let mut unpadded = ConvShape::conv(9, 4, 3, 3, 1);
    unpadded.pad_h = 0;
    unpadded.pad_w = 0;
    let mut grouped = ConvShape::conv(6, 4, 6, 3, 1);
    grouped.groups = 2;
    vec![
        ConvShape::conv(8, 2, 3, 3, 1),
        odd,
        ConvShape::conv(8, 3, 4, 3, 2),
        ConvShape::conv(5, 4, 4, 1, 1),
        unpadded,
        grouped,
        ConvShape::depthwise(6, 5, 3, 1),
        ConvShape::conv(5, 3, 2, 5, 1),
        ConvShape::fully_connected(10, 4),
    ]
}

#[test]
fn packed_input_aligned_is_exact() {
    let lit = literal(256);
    for (k, shape) in shapes().iter().enumerate() {
        let plan = PackedConv::new(shape, &params(&lit), PackedOptions::default()).unwrap();
        check(&plan, &lit, k as u64);
    }
}

#[test]
fn packed_partial_aligned_is_exact() {
    let lit = literal(256);
    for (k, shape) in shapes().iter().enumerate() {
        let opts = PackedOptions { schedule: Schedule::PartialAligned, ..Default::default() };
        check(&PackedConv::new(shape, &params(&lit), opts).unwrap(), &lit, 100 + k as u64);
    }
}

#[test]
fn packed_with_plaintext_decomposition_is_exact() {
    let lit = literal(256);
    let opts = PackedOptions { plain_decomposition_bits: Some(10), ..Default::default() };
    check(&PackedConv::new(&ConvShape::conv(8, 3, 4, 3, 1), &params(&lit), opts).unwrap(), &lit, 7);
}

#[test]
fn packed_strips_when_a_channel_exceeds_a_row() {
    // 20 x 20 > 128 slots per row: strips with halos across ciphertexts.
    let lit = literal(256);
    check(&PackedConv::new(&ConvShape::conv(20, 2, 2, 3, 1), &params(&lit), PackedOptions::default()).unwrap(), &lit, 8);
    check(&WalshConv::new(&ConvShape::conv(20, 2, 2, 3, 2), &params(&lit), None).unwrap(), &lit, 9);
}

#[test]
fn walsh_hadamard_is_exact() {
    let lit = literal(256);
    for (k, shape) in shapes().iter().enumerate() {
        check(&WalshConv::new(shape, &params(&lit), None).unwrap(), &lit, 200 + k as u64);
    }
}

#[test]
fn padded_is_exact() {
    let lit = literal(256);
    for (k, shape) in shapes().iter().enumerate() {
        check(&PaddedConv::new(shape, &params(&lit), None).unwrap(), &lit, 300 + k as u64);
    }
}

#[test]
fn secure_parameters_resnet_block() {
    let lit = literal(4096);
    let shape = ConvShape::conv(16, 16, 16, 3, 1);
    check(&PackedConv::new(&shape, &params(&lit), PackedOptions::default()).unwrap(), &lit, 11);
    check(&WalshConv::new(&shape, &params(&lit), None).unwrap(), &lit, 12);
}
