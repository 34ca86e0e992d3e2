//! A suite every resident backend runs: the FHE layers (MPConv, the BSGS convolution, HyPHEN's
//! CAConv and RAConv, pooling + fully connected) through a `ResidentEvaluator` on that backend
//! must return what they return through the host [`Evaluator`], bit for bit, with the same
//! operation counts. lycaon-nn's tests run it on host memory, lycaon-cuda's on the emulated GPU.

use std::sync::Arc;

use lycaon_backend::ResidentBackend;
use lycaon_ckks::rlwe::{Parameters, PublicKey, SecretKey, Security};
use lycaon_ckks::{Ciphertext, CkksContext, Encoder, EvaluationKeys, Evaluator, PublicKeyEncryptor, ResidentCiphertext, ResidentEvaluator};
use lycaon_math::Sampler;

use super::{AvgPoolFc, BsgsConv, CaConv, FheOps, MpConv, MultiplexedLayout, RaConv};

/// Runs a small network of every layer kind at degree 2^log_n (5 levels of 40 bits; insecure
/// test parameters) through `backend` and the host, and panics naming the first layer whose
/// output differs.
pub fn check_resident_layers<B: ResidentBackend + 'static>(backend: Arc<B>, log_n: u32) {
    let mut lit = lycaon_ckks::scale_stable_literal(1 << log_n, 50, 40, 5, &[50]).expect("parameters");
    lit.security = Security::InsecureTestOnly;
    let params = Parameters::new(lit).expect("parameters");
    let ctx = CkksContext::new(&params, 2f64.powi(40)).expect("context");
    let mut sampler = Sampler::from_seed([5; 32]);
    let sk = SecretKey::generate(&params, &mut sampler).expect("secret key");
    let pk = Arc::new(PublicKey::generate(&sk, &mut sampler).expect("public key"));
    let slots = ctx.max_slots();
    let mut state = 77u64;
    let mut values = |len: usize, scale: f64| -> Vec<f64> {
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale
            })
            .collect()
    };
    let (c0, c1, c2, hw, classes) = (4, 8, 16, 8, 10);
    let x = values(c0 * hw * hw, 1.0);
    let l0 = MultiplexedLayout::new(c0, hw, hw, 1, slots).expect("layout");
    let mp = MpConv::new(l0, c1, 3, 1, &values(c1 * c0 * 9, 1.0 / 6.0)).expect("MPConv");
    let bsgs = BsgsConv::new(*mp.output_layout(), c2, 3, 2, &values(c2 * c1 * 9, 1.0 / 8.5)).expect("BSGS convolution");
    let ca = CaConv::new(l0, c1, 3, &values(c1 * c0 * 9, 1.0 / 6.0)).expect("CAConv");
    let ra = RaConv::new(c1, hw, hw, slots, c2, 3, &values(c2 * c1 * 9, 1.0 / 8.5)).expect("RAConv");
    let fc = AvgPoolFc::new(&ctx, *bsgs.output_layout(), classes, &values(classes * c2, 0.5), &values(classes, 0.1)).expect("pooling + FC");
    let mut steps: Vec<i64> = [mp.rotation_steps(), bsgs.rotation_steps(), ca.rotation_steps(), ra.rotation_steps(), fc.rotation_steps()].concat();
    steps.sort_unstable();
    steps.dedup();
    let keys = EvaluationKeys::generate(&sk, &steps, false, &mut sampler).expect("keys");
    let host = FheOps::new(Evaluator::new(&ctx, keys.clone()));
    let resident = FheOps::new(ResidentEvaluator::new(&ctx, backend, &keys).expect("resident keys"));
    let re = resident.evaluator();
    let same = |what: &str, got: &ResidentCiphertext<B>, want: &Ciphertext| {
        let got = re.download(got).expect("download");
        assert_eq!((got.level(), got.scale().to_bits()), (want.level(), want.scale().to_bits()), "{what}");
        assert!(got.inner().parts() == want.inner().parts(), "{what}: differs from the host");
    };
    let pt = Encoder::new(&ctx).encode_real(&l0.pack(&x).expect("pack"), ctx.max_level(), ctx.scale_at(ctx.max_level()).expect("scale")).expect("encode");
    let ct = PublicKeyEncryptor::new(&ctx, pk).expect("encryptor").encrypt(&pt).expect("encrypt");
    let rct = re.upload(&ct).expect("upload");

    let a1 = mp.evaluate(&host, &ct).expect("MPConv on the host");
    let ra1 = mp.evaluate(&resident, &rct).expect("MPConv resident");
    same("MPConv", &ra1, &a1);
    let a2 = bsgs.evaluate(&host, &a1).expect("BSGS on the host");
    let ra2 = bsgs.evaluate(&resident, &ra1).expect("BSGS resident");
    same("BSGS convolution, stride 2", &ra2, &a2);
    same("average pooling + fully connected", &fc.evaluate(&resident, &ra2).expect("FC resident"), &fc.evaluate(&host, &a2).expect("FC on the host"));
    let mids = ca.evaluate(&host, &ct).expect("CAConv on the host");
    let rmids = ca.evaluate(&resident, &rct).expect("CAConv resident");
    for (m, rm) in mids.iter().zip(&rmids) {
        same("CAConv", rm, m);
    }
    same("RAConv", &ra.evaluate(&resident, &rmids).expect("RAConv resident"), &ra.evaluate(&host, &mids).expect("RAConv on the host"));
    assert_eq!(resident.counts(), host.counts(), "operation counts");
}
