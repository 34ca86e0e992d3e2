//! Fuzz targets: one per deserialiser, seeded with valid objects from toy parameters (n = 64, so a
//! million inputs take seconds) and from a real 128-bit set at n = 4096.

use std::sync::Arc;

use lycaon_bfv::{BatchEncoder, BfvContext, Evaluator, Plaintext, PreparedPlaintext, PublicKeyEncryptor};
use lycaon_math::Sampler;
use lycaon_rlwe::wire::open_envelope;
use lycaon_rlwe::{
    encrypt_zero_public, encrypt_zero_symmetric, Ciphertext, GaloisKeys, KeySwitchKey, Parameters, ParametersLiteral, PublicKey, RelinKey, SecretKey,
    Security, SeededCiphertext,
};

use crate::FuzzTarget;

fn toy() -> Arc<Parameters> {
    let mut lit = ParametersLiteral::bfv_from_bits(64, &[40, 40, 41], &[45], 17).unwrap();
    lit.key_switch_digits = 2;
    lit.security = Security::InsecureTestOnly;
    Parameters::new(lit).unwrap()
}

fn target(name: &'static str, seeds: Vec<Vec<u8>>, run: impl Fn(&[u8]) -> bool + Sync + Send + 'static) -> FuzzTarget {
    FuzzTarget { name, seeds, run: Box::new(run) }
}

/// Every deserialiser, with valid seeds.
pub fn targets() -> Vec<FuzzTarget> {
    let params = toy();
    let real = Parameters::new(ParametersLiteral::bfv_default(4096).unwrap()).unwrap();
    let mut s = Sampler::from_seed([5; 32]);
    let sk = SecretKey::generate(&params, &mut s).unwrap();
    let pk = PublicKey::generate(&sk, &mut s).unwrap();
    let rk = RelinKey::generate(&sk, &mut s).unwrap();
    let gk = GaloisKeys::for_rotations(&sk, &[1, 5], true, &mut s).unwrap();
    let seeded = encrypt_zero_symmetric(&sk, 2, &mut s).unwrap();
    let ct = encrypt_zero_public(&params, &pk, 1, &mut s).unwrap();
    let ctx = BfvContext::new(&params).unwrap();
    let pt = BatchEncoder::new(&params).unwrap().encode(&[1, 2, 3, 65536]).unwrap();
    let real_ct = {
        let rctx = BfvContext::new(&real).unwrap();
        let rsk = SecretKey::generate(&real, &mut s).unwrap();
        let rpk = PublicKey::generate(&rsk, &mut s).unwrap();
        let rpt = BatchEncoder::new(&real).unwrap().encode(&[7; 16]).unwrap();
        PublicKeyEncryptor::new(&rctx, Arc::new(rpk)).unwrap().encrypt(&rpt).unwrap()
    };

    let p = params.clone();
    let mut out = vec![
        target("envelope", vec![ct.to_bytes(), pk.to_bytes(), params.to_bytes()], |b| open_envelope(b).is_ok()),
        target("parameters", vec![params.to_bytes(), real.to_bytes()], |b| Parameters::from_bytes(b).is_ok()),
    ];
    macro_rules! object_target {
        ($name:literal, $ty:ty, $seed:expr) => {{
            let p = p.clone();
            out.push(target($name, vec![$seed], move |b| <$ty>::from_bytes(&p, b).is_ok()));
        }};
    }
    object_target!("secret_key", SecretKey, sk.to_bytes());
    object_target!("public_key", PublicKey, pk.to_bytes());
    object_target!("relin_key", RelinKey, rk.to_bytes());
    object_target!("key_switch_key", KeySwitchKey, rk.key().to_bytes());
    object_target!("galois_keys", GaloisKeys, gk.to_bytes());
    object_target!("ciphertext", Ciphertext, ct.to_bytes());
    object_target!("seeded_ciphertext", SeededCiphertext, seeded.to_bytes());
    object_target!("plaintext", Plaintext, pt.to_bytes());
    let prepared = Evaluator::new(&ctx).prepare_plain(&pt, 1).unwrap();
    object_target!("prepared_plaintext", PreparedPlaintext, prepared.to_bytes());
    let r = real.clone();
    out.push(target("ciphertext_n4096", vec![real_ct.to_bytes()], move |b| Ciphertext::from_bytes(&r, b).is_ok()));
    out.extend(runtime_targets());
    out
}

/// The runtime's messages: the hello, the server's description, the FHE program, the FHE key
/// header, and the CKKS ciphertexts a query and an answer carry.
fn runtime_targets() -> Vec<FuzzTarget> {
    use lycaon_runtime::fhe::session::KeyHeader;
    use lycaon_runtime::fhe::FheProgram;
    use lycaon_runtime::hello::{Hello, Mode, PublicModel, Want};

    let program = FHE_PROGRAM.as_bytes().to_vec();
    let public = PublicModel::json(Mode::Fhe, FHE_PROGRAM).unwrap().into_bytes();
    let utf8 = |b: &[u8]| std::str::from_utf8(b).ok().map(str::to_owned);
    let mut out = vec![
        target("hello", vec![Hello { want: Want::Inference, mode: Some(Mode::Fhe) }.to_bytes()], |b| Hello::parse(b).is_ok()),
        target("public_model", vec![public], |b| PublicModel::parse(b).is_ok()),
        target("fhe_program", vec![program], move |b| utf8(b).is_some_and(|t| FheProgram::from_json(&t).is_ok())),
        target("fhe_key_header", vec![br#"{"galois":3,"relin":true,"encapsulation":false}"#.to_vec()], |b| KeyHeader::parse(b).is_ok()),
    ];
    let mut lit = lycaon_ckks::scale_stable_literal(64, 40, 30, 2, &[45]).unwrap();
    lit.security = Security::InsecureTestOnly;
    let params = Parameters::new(lit).unwrap();
    let ctx = lycaon_ckks::CkksContext::new(&params, 2f64.powi(30)).unwrap();
    let mut s = Sampler::from_seed([9; 32]);
    let sk = SecretKey::generate(&params, &mut s).unwrap();
    let pk = PublicKey::generate(&sk, &mut s).unwrap();
    let pt = lycaon_ckks::Encoder::new(&ctx).encode_real(&[0.5, -0.25], 2, ctx.scale_at(2).unwrap()).unwrap();
    let seeded = lycaon_ckks::SecretKeyEncryptor::new(&ctx, Arc::new(sk)).unwrap().encrypt(&pt).unwrap().to_bytes();
    let ct = lycaon_ckks::PublicKeyEncryptor::new(&ctx, Arc::new(pk)).unwrap().encrypt(&pt).unwrap().to_bytes();
    let c = ctx.clone();
    out.push(target("ckks_seeded_ciphertext", vec![seeded], move |b| lycaon_ckks::SeededCiphertext::from_bytes(&c, b).is_ok()));
    out.push(target("ckks_ciphertext", vec![ct], move |b| lycaon_ckks::Ciphertext::from_bytes(&ctx, b).is_ok()));
    out
}

/// A small valid FHE program (two ops) as the fuzzer's seed.
const FHE_PROGRAM: &str = r#"{"format":1,"name":"seed","parameters":{"kind":"scale_stable","n":8192,"log_q0":50,"log_scale":36,"levels":2,"p_bits":[54]},"input":"x","input_shape":[4],"input_packing":{"kind":"slots","index":[0,1,2,3],"period":4},"input_level":2,"output":"y","output_slots":[0,1],"ops":[{"name":"fc","inputs":["x"],"output":"h","level":2,"depth":1,"kind":"linear","rows":[0,1],"cols":[1,2],"values":[0.5,-0.5],"period":4,"sum_steps":[],"bias":{"slots":[0],"values":[0.1]}},{"name":"sq","inputs":["h"],"output":"y","level":1,"depth":1,"refresh":[],"kind":"quadratic","a":null,"b":{"slots":[1],"values":[0.5]},"c":null}],"rotation_levels":{"1":2,"3":2},"relin_level":1,"metadata":{}}"#;
