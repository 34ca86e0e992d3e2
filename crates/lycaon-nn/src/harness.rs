//! Runs one layer as client and server would, in one process: key generation, packing and
//! encryption of the client's input, the server's evaluation (instrumented), compression of
//! coefficient outputs, decryption and unpacking. Benchmarks and tests use it; it measures times
//! and checks the result against the integer reference.

use std::sync::Arc;
use std::time::Instant;

use lycaon_bfv::rlwe::{Ciphertext, GaloisKeys, Parameters, SecretKey};
use lycaon_bfv::{BatchEncoder, BfvContext, CoeffEncoder, Decryptor, Evaluator, Plaintext, SecretKeyEncryptor};
use lycaon_math::Sampler;

use crate::coeff::{kept_positions, PartialCiphertext};
use crate::{conv_reference, CountingBackend, Encoding, HeOps, LayerCost, LinearPlan, NnError, NttCounter, OpCounts};

/// What one run measured.
#[derive(Clone, Debug)]
pub struct LayerRun {
    /// Server evaluation (median over repetitions), seconds.
    pub server_s: f64,
    /// Client packing + encryption, and decryption + unpacking, seconds.
    pub encrypt_s: f64,
    pub decrypt_s: f64,
    pub cost: LayerCost,
    /// Measured bytes of the seeded input ciphertexts as serialised.
    pub up_bytes_measured: usize,
    pub weight_bytes: usize,
    /// Instrumented counts (NTTs from the counting backend) and the plan's statement.
    pub counts: OpCounts,
    pub stated: OpCounts,
    /// The decrypted outputs (batch x C_out x H_out x W_out, modulo t).
    pub output: Vec<u64>,
    /// Decrypted outputs equal the integer reference.
    pub exact: bool,
    /// Smallest remaining noise budget over the outputs, bits (over the coefficients that carry
    /// outputs for coefficient-encoded layers).
    pub min_noise_budget: f64,
    /// With an output level above 0 ([`run_layer_to_level`]): the smallest budget measured at that
    /// level, before the harness switches the outputs down to level 0 for the rest.
    pub min_noise_budget_unswitched: Option<f64>,
}

/// The encoders a layout needs: batching (when t = 1 mod 2n) and coefficient encoding.
pub struct LayoutCodec {
    batch: Option<BatchEncoder>,
    coeff: CoeffEncoder,
}

impl LayoutCodec {
    pub fn new(params: &Arc<Parameters>) -> Result<Self, NnError> {
        Ok(Self { batch: BatchEncoder::new(params).ok(), coeff: CoeffEncoder::new(params)? })
    }

    /// One plaintext of `n` values (mod t) in `encoding`.
    pub fn encode(&self, encoding: Encoding, v: &[u64]) -> Result<Plaintext, NnError> {
        Ok(match (encoding, &self.batch) {
            (Encoding::Batch, Some(b)) => b.encode(v)?,
            (Encoding::Batch, None) => return Err(NnError::Shape("batch encoding needs t = 1 mod 2n".into())),
            (Encoding::Coeff, _) => self.coeff.encode(v)?,
        })
    }

    pub fn decode(&self, encoding: Encoding, pt: &Plaintext) -> Result<Vec<u64>, NnError> {
        Ok(match (encoding, &self.batch) {
            (Encoding::Batch, Some(b)) => b.decode(pt)?,
            (Encoding::Batch, None) => return Err(NnError::Shape("batch encoding needs t = 1 mod 2n".into())),
            (Encoding::Coeff, _) => self.coeff.decode(pt)?,
        })
    }
}

/// Runs `plan` on input `x` and weights `w`, `reps` server evaluations.
pub fn run_layer(plan: &dyn LinearPlan, x: &[i64], w: &[i64], reps: usize) -> Result<LayerRun, NnError> {
    run_layer_to_level(plan, x, w, reps, 0)
}

/// As [`run_layer`], with the outputs switched down only to `output_level` (to measure a layer's
/// own noise before the final modulus switch; operation counts then differ from the plan's).
pub fn run_layer_to_level(plan: &dyn LinearPlan, x: &[i64], w: &[i64], reps: usize, output_level: usize) -> Result<LayerRun, NnError> {
    let params = plan.params().clone();
    let shape = *plan.shape();
    let t = params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
    let batch = plan.batch();
    if x.len() != batch * shape.input_len() {
        return Err(NnError::Count { what: "input elements (batch x C x H x W)", expected: batch * shape.input_len(), found: x.len() });
    }
    let mut expected = Vec::with_capacity(batch * shape.output_len());
    for image in x.chunks(shape.input_len()) {
        expected.extend(conv_reference(&shape, image, w, t)?);
    }
    let mut sampler = Sampler::from_os()?;
    let sk = Arc::new(SecretKey::generate(&params, &mut sampler)?);
    let gk = GaloisKeys::generate(&sk, &plan.galois_elements(), &mut sampler)?;
    let ctx = BfvContext::new(&params)?;
    let enc = LayoutCodec::new(&params)?;
    let n = params.n();

    let began = Instant::now();
    let layout_in = plan.input_layout();
    let mut encryptor = SecretKeyEncryptor::new(&ctx, sk.clone())?;
    let seeded = layout_in
        .pack(x, n, t)?
        .iter()
        .map(|v| Ok(encryptor.encrypt(&enc.encode(layout_in.encoding, v)?)?))
        .collect::<Result<Vec<_>, NnError>>()?;
    let encrypt_s = began.elapsed().as_secs_f64();
    let up_bytes_measured = seeded.iter().map(|c| c.to_bytes().len()).sum();
    let inputs: Vec<Ciphertext> = seeded.iter().map(|c| c.expand(&params)).collect::<Result<_, _>>()?;

    // The server runs on instrumented parameters: same id, NTT-counting backend.
    let counter = NttCounter::default();
    let counting = Parameters::with_backend(params.literal().clone(), Arc::new(CountingBackend::new(counter.clone())))?;
    let prepared = plan.prepare(w)?;
    let eval = Evaluator::new(&BfvContext::new(&counting)?);
    let mut times = Vec::with_capacity(reps.max(1));
    let mut outputs = Vec::new();
    let mut counts = OpCounts::default();
    for rep in 0..reps.max(1) {
        let ops = HeOps::new(eval.clone(), gk.clone()).with_output_level(output_level);
        counter.reset();
        let began = Instant::now();
        outputs = prepared.evaluate(&ops, &inputs)?;
        times.push(began.elapsed().as_secs_f64());
        if rep == 0 {
            counts = ops.counts();
            counts.ntts = counter.get();
        }
    }
    times.sort_by(f64::total_cmp);

    let layout_out = plan.output_layout();
    let dec = Decryptor::new(&ctx, sk)?;
    // Noise over the coefficients that carry outputs (all of them for batch encodings); the
    // compression below keeps exactly those coefficients of c_0, so it does not change them.
    let positions: Option<Vec<Vec<usize>>> = layout_out.kept_coefficients.as_ref().map(|_| kept_positions(layout_out).into_iter().map(|v| v.into_iter().map(|p| p as usize).collect()).collect());
    let min_budget = |outputs: &[Ciphertext]| -> Result<f64, NnError> {
        let budgets: Vec<f64> = match &positions {
            Some(pos) => outputs.iter().zip(pos).map(|(ct, p)| dec.noise_budget_at(ct, p)).collect::<Result<_, _>>()?,
            None => outputs.iter().map(|ct| dec.noise_budget(ct)).collect::<Result<_, _>>()?,
        };
        Ok(budgets.into_iter().fold(f64::INFINITY, f64::min))
    };
    let mut min_noise_budget_unswitched = None;
    if outputs.iter().any(|ct| ct.level() > 0) {
        min_noise_budget_unswitched = Some(min_budget(&outputs)?);
        let eval = Evaluator::new(&ctx);
        outputs = outputs.iter().map(|ct| eval.mod_switch_to(ct, 0)).collect::<Result<_, _>>()?;
    }
    let min_noise_budget = min_budget(&outputs)?;
    let began = Instant::now();
    // Coefficient outputs travel with only the coefficients that carry outputs.
    if layout_out.kept_coefficients.is_some() {
        let positions = kept_positions(layout_out);
        outputs = outputs
            .iter()
            .zip(&positions)
            .map(|(ct, pos)| PartialCiphertext::from_ciphertext(&params, ct, pos)?.to_ciphertext(&params))
            .collect::<Result<_, _>>()?;
    }
    let decoded = outputs.iter().map(|ct| enc.decode(layout_out.encoding, &dec.decrypt(ct)?)).collect::<Result<Vec<_>, NnError>>()?;
    let got = layout_out.unpack(&decoded, t)?;
    let decrypt_s = began.elapsed().as_secs_f64();
    Ok(LayerRun {
        server_s: times[times.len() / 2],
        encrypt_s,
        decrypt_s,
        cost: plan.cost(),
        up_bytes_measured,
        weight_bytes: prepared.weight_bytes(),
        counts,
        stated: plan.counts(),
        exact: got == expected,
        output: got,
        min_noise_budget,
        min_noise_budget_unswitched,
    })
}

/// Whether [`LinearPlan::evaluate_streaming`], and [`LinearPlan::evaluate_units`] over up to
/// three consecutive ranges of units, return the very ciphertexts that `prepare(w)?.evaluate(..)`
/// does on an encryption of `x` (a server streams a layer whose prepared weights do not fit in
/// its memory, and fans units out over workers).
pub fn split_evaluations_equal_prepared(plan: &dyn LinearPlan, x: &[i64], w: &[i64]) -> Result<bool, NnError> {
    let params = plan.params().clone();
    let t = params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
    let mut sampler = Sampler::from_os()?;
    let sk = Arc::new(SecretKey::generate(&params, &mut sampler)?);
    let gk = GaloisKeys::generate(&sk, &plan.galois_elements(), &mut sampler)?;
    let ctx = BfvContext::new(&params)?;
    let enc = LayoutCodec::new(&params)?;
    let layout_in = plan.input_layout();
    let mut encryptor = SecretKeyEncryptor::new(&ctx, sk)?;
    let inputs = layout_in
        .pack(x, params.n(), t)?
        .iter()
        .map(|v| Ok(encryptor.encrypt(&enc.encode(layout_in.encoding, v)?)?.expand(&params)?))
        .collect::<Result<Vec<_>, NnError>>()?;
    let ops = HeOps::new(Evaluator::new(&ctx), gk);
    let prepared = plan.prepare(w)?.evaluate(&ops, &inputs)?;
    let units = plan.output_units();
    let cuts = [0, units / 3, (2 * units).div_ceil(3), units];
    let mut split = Vec::new();
    for part in cuts.windows(2) {
        split.extend(plan.evaluate_units(&ops, &inputs, w, part[0]..part[1])?);
    }
    Ok(prepared == plan.evaluate_streaming(&ops, &inputs, w)? && prepared == split)
}
