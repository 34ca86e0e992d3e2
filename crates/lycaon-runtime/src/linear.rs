//! One linear layer of the hybrid protocol, both halves.
//!
//! Client: encrypts its share x_c in the plan's input layout (seeded ciphertexts), later decrypts
//! the response and unpacks its share of the output. Server: adds its share x_s to the input
//! ciphertexts as a plaintext, evaluates W (x_c + x_s) with the planned algorithm up to the level
//! where the algorithm ends, subtracts a fresh uniform mask m from every slot (or coefficient),
//! re-randomises with a public-key encryption of zero, adds flooding noise (`lycaon_nn::Flooding`)
//! and only then switches down to level 0 and sends (with a fanout its workers evaluate and
//! answer, `fanout`). Its own share of the output is the unpacked mask plus the bias; the
//! client's is the unpacked decryption. The sum is W x + b modulo t.

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use lycaon_bfv::noise::NoiseModel;
use lycaon_bfv::rlwe::{encrypt_zero_public, Ciphertext, GaloisKeys, Parameters, PublicKey, SecretKey, SeededCiphertext};
use lycaon_bfv::{BfvContext, Decryptor, Encryptor, Evaluator};
use lycaon_math::{Coeff, Poly, Sampler, Seed};
use lycaon_mpc::channel::{pack_words, unpack_words};
use lycaon_nn::coeff::kept_positions;
use lycaon_nn::harness::LayoutCodec;
use lycaon_nn::{HeOps, PreparedLayer, ResponseDrop, ValueBounds};

use crate::fanout::Remote;
use crate::program::LinearStep;
use crate::wire::{Reader, Writer};
use crate::{Result, RuntimeError};

/// The client's keys and tools for one parameter set. Never leaves the client.
pub struct ClientKeySet {
    pub params: Arc<Parameters>,
    decryptor: Decryptor,
    encryptor: Encryptor,
    secret: Arc<SecretKey>,
    codec: LayoutCodec,
}

impl ClientKeySet {
    /// A fresh secret key for one parameter set. Its public half crosses one key per message
    /// ([`ClientKeySet::public_key_upload`], [`ClientKeySet::galois_key_upload`]) when the
    /// layers need it (`program::KeyStep`).
    pub fn generate(params: &Arc<Parameters>) -> Result<Self> {
        let secret = Arc::new(SecretKey::generate(params, &mut Sampler::from_os()?)?);
        let ctx = BfvContext::new(params)?;
        Ok(Self {
            params: params.clone(),
            decryptor: Decryptor::new(&ctx, secret.clone())?,
            encryptor: Encryptor::new(&ctx)?,
            secret,
            codec: LayoutCodec::new(params)?,
        })
    }

    /// A fresh public key, serialised.
    pub fn public_key_upload(&self) -> Result<Vec<u8>> {
        Ok(PublicKey::generate(&self.secret, &mut Sampler::from_os()?)?.to_bytes())
    }

    /// The Galois key of `element`, seeded, alone in its envelope.
    pub fn galois_key_upload(&self, element: u64) -> Result<Vec<u8>> {
        Ok(GaloisKeys::generate(&self.secret, &[element], &mut Sampler::from_os()?)?.to_bytes())
    }

    /// The client's share (values mod t) packed and encrypted, seeded: one blob per ciphertext.
    pub fn encrypt_share(&mut self, step: &LinearStep, share: &[u64]) -> Result<Vec<u8>> {
        let layout = step.plan.input_layout();
        let t = step.params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
        let values: Vec<i64> = share.iter().map(|&v| v as i64).collect();
        let mut w = Writer::default();
        for v in layout.pack(&values, step.params.n(), t)? {
            let ct: SeededCiphertext = self.encryptor.encrypt_symmetric(&self.secret, &self.codec.encode(layout.encoding, &v)?)?;
            let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::Serialize);
            w.blob(&ct.to_bytes());
        }
        Ok(w.finish())
    }

    /// The client's share of the layer output from the server's response.
    pub fn decrypt_response(&self, step: &LinearStep, response: &[u8]) -> Result<Vec<u64>> {
        let layout = step.plan.output_layout();
        let t = step.params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
        let mut r = Reader::new(response);
        let dropped = ResponseDrop { c0: r.u32()?, c1: r.u32()? };
        let positions = layout.kept_coefficients.as_ref().map(|_| kept_positions(layout));
        let mut decoded = Vec::with_capacity(layout.num_ciphertexts);
        for k in 0..layout.num_ciphertexts {
            let blob = r.blob()?;
            let timer = lycaon_math::profile::time(lycaon_math::profile::Kernel::Serialize);
            let ct = read_response_ciphertext(&step.params, positions.as_ref().map(|p| &p[k][..]), blob, dropped)
                .map_err(|e| RuntimeError::Protocol(format!("response ciphertext {k}: {e}")))?;
            drop(timer);
            if ct.level() != 0 || ct.len() != 2 {
                return Err(RuntimeError::Protocol(format!(
                    "response ciphertext {k} is at level {} with {} parts, expected level 0 and 2",
                    ct.level(),
                    ct.len()
                )));
            }
            decoded.push(self.codec.decode(layout.encoding, &self.decryptor.decrypt(&ct)?)?);
        }
        r.finish("layer response")?;
        Ok(layout.unpack(&decoded, t)?)
    }
}

/// What the server holds of a client for one parameter set: public material only.
pub struct ServerKeySet {
    pub params: Arc<Parameters>,
    public_key: PublicKey,
    /// The Galois keys of the layers in flight (shared with the evaluation, not copied).
    galois: Arc<GaloisKeys>,
    eval: Evaluator,
    codec: LayoutCodec,
}

impl ServerKeySet {
    /// A client's public key for one parameter set, from its message; the Galois keys follow
    /// one by one ([`ServerKeySet::receive_galois_key`]).
    pub fn from_public_key(params: &Arc<Parameters>, message: &[u8]) -> Result<Self> {
        let public_key = PublicKey::from_bytes(params, message).map_err(|e| RuntimeError::Protocol(format!("public key: {e}")))?;
        let ctx = BfvContext::new(params)?;
        Ok(Self {
            params: params.clone(),
            public_key,
            galois: Arc::new(GaloisKeys::empty(params)),
            eval: Evaluator::new(&ctx),
            codec: LayoutCodec::new(params)?,
        })
    }

    /// Adds the Galois key of `element` from a message that must hold exactly that key.
    pub fn receive_galois_key(&mut self, element: u64, message: &[u8]) -> Result<()> {
        let key = GaloisKeys::from_bytes(&self.params, message).map_err(|e| RuntimeError::Protocol(format!("Galois key {element}: {e}")))?;
        if key.len() != 1 || key.get(element).is_none() {
            let got: Vec<u64> = key.galois_elements().collect();
            return Err(RuntimeError::Protocol(format!("expected the Galois key of element {element} alone, got the keys of {got:?}")));
        }
        Arc::make_mut(&mut self.galois).merge(key)?;
        Ok(())
    }

    /// Drops the Galois key of `element` (no later layer uses it).
    pub fn drop_galois_key(&mut self, element: u64) {
        Arc::make_mut(&mut self.galois).remove(element);
    }
}

/// A linear layer on the server: weights in evaluation form, bias, and the flooding it adds.
/// A layer's weights as the server keeps them between sessions.
enum LayerWeights {
    /// Prepared once (plaintexts in NTT form): the fastest, and 60-900 times the raw size.
    Prepared(Box<dyn PreparedLayer>),
    /// The integer weights only, prepared at each evaluation (a block of output channels at a
    /// time where the algorithm can: `LinearPlan::evaluate_streaming`) and dropped after it: what
    /// keeps an ImageNet network's server within a few GiB (ResNet-50 prepared takes about 58 GiB).
    OnDemand(Vec<i64>),
}

pub struct ServerLayer {
    weights: LayerWeights,
    /// Bytes of the prepared weights (stated by the algorithm), whether kept or not.
    prepared_bytes: usize,
    bias: Option<Vec<i64>>,
    /// Flooding noise is uniform in [-2^flood_log2, 2^flood_log2] (0: no flooding).
    flood_log2: u32,
    /// The level at which the evaluation ends (before the final switch to level 0).
    eval_level: usize,
    /// Low bits each response coefficient drops before it travels.
    drop: ResponseDrop,
}

impl ServerLayer {
    /// Prepares the weights and works out the flooding for `flood_bits` of statistical security
    /// (0: none, for tests of the bare protocol only). Errors when the plan's parameters leave no
    /// room for it: the planner must then be asked with the same `flood_bits`.
    /// The prepared weights are kept when they fit in `budget` (bytes in memory, decreased by
    /// what they take); otherwise they are prepared at each evaluation (see
    /// [`LayerWeights::OnDemand`]).
    pub fn new(
        name: &str,
        step: &LinearStep,
        weights: &[i64],
        bias: Option<Vec<i64>>,
        flood_bits: f64,
        failure_probability: f64,
        budget: &mut usize,
    ) -> Result<Self> {
        let prepared_bytes = step.plan.weight_bytes();
        // In memory each coefficient takes a 64-bit word per limb (weight_bytes counts bits(q_i)).
        let q_bits: u32 = step.choice.q_bits.iter().sum();
        let in_memory = prepared_bytes.saturating_mul(64 * step.choice.q_bits.len()) / q_bits.max(1) as usize;
        let weight_max = weights.iter().map(|w| w.unsigned_abs()).max().unwrap_or(0).max(1);
        let weights = if in_memory <= *budget {
            *budget -= in_memory;
            LayerWeights::Prepared(step.plan.prepare(weights)?)
        } else {
            LayerWeights::OnDemand(weights.to_vec())
        };
        let model = NoiseModel::from_params(&step.params).ok_or(lycaon_bfv::BfvError::NotBfv)?;
        let t = model.t;
        let bounds = ValueBounds { weight: weight_max.next_power_of_two(), input: (t as u64).div_ceil(2) };
        let noise = step.plan.noise(&model, model.fresh_symmetric(step.params.max_level()), bounds)?;
        let (flood_log2, drop) = if flood_bits > 0.0 {
            let f = noise.flooding(&model, flood_bits, failure_probability, step.params.n() as f64);
            if f.practical_budget < 0.0 || f.log2_bound >= 120.0 {
                return Err(RuntimeError::Program(format!(
                    "linear '{name}': parameters {} leave no room for {flood_bits} bits of noise flooding (it needs 2^{:.1} and leaves {:.1} bits); plan with flood_bits = {flood_bits}",
                    step.choice.label(),
                    f.log2_bound,
                    f.practical_budget
                )));
            }
            (f.log2_bound.ceil() as u32, f.drop)
        } else {
            (0, noise.unflooded_drop(&model, failure_probability, step.params.n() as f64)?)
        };
        Ok(Self { weights, prepared_bytes, bias, flood_log2, eval_level: noise.level, drop })
    }

    /// Bytes of the prepared weights as the algorithm states them
    /// ([`lycaon_nn::PreparedLayer::weight_bytes`]: plaintexts in NTT form at the top level,
    /// counted at their serialised width of bits(q_i) per coefficient and limb; in memory each
    /// coefficient takes a whole 64-bit word per limb).
    pub fn prepared_bytes(&self) -> usize {
        self.prepared_bytes
    }

    /// Whether the prepared weights stay in memory between sessions.
    pub fn keeps_prepared(&self) -> bool {
        matches!(self.weights, LayerWeights::Prepared(_))
    }

    pub fn flood_log2(&self) -> u32 {
        self.flood_log2
    }

    /// The low bits its responses drop.
    pub fn response_drop(&self) -> ResponseDrop {
        self.drop
    }

    /// Output units `units` of the layer (before masking) on its input ciphertexts, the server's
    /// share already added: what a worker computes for a server's fanout.
    pub(crate) fn evaluate_units(&self, step: &LinearStep, eval: &Evaluator, galois: Arc<GaloisKeys>, inputs: &[Ciphertext], units: Range<usize>) -> Result<Vec<Ciphertext>> {
        let ops = HeOps::new(eval.clone(), galois).with_output_level(self.eval_level);
        Ok(match &self.weights {
            LayerWeights::OnDemand(weights) => step.plan.evaluate_units(&ops, inputs, weights, units)?,
            LayerWeights::Prepared(prepared) if units == (0..step.plan.output_units()) => prepared.evaluate(&ops, inputs)?,
            LayerWeights::Prepared(_) => return Err(RuntimeError::Program("a layer kept prepared evaluates all its units at once".into())),
        })
    }

    /// Evaluates on the client's ciphertexts plus the server's share; returns the response bytes
    /// and the server's share of the output.
    /// With `remote`, the outputs are computed by its fanout's workers.
    pub fn evaluate(&self, step: &LinearStep, keys: &ServerKeySet, request: &[u8], server_share: &[u64], remote: Option<Remote<'_>>) -> Result<(Vec<u8>, Vec<u64>)> {
        let params = &step.params;
        let t = params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
        let layout_in = step.plan.input_layout();
        let mut r = Reader::new(request);
        let own: Vec<i64> = server_share.iter().map(|&v| v as i64).collect();
        let own_packed = layout_in.pack(&own, params.n(), t)?;
        let blobs = (0..own_packed.len()).map(|_| r.blob()).collect::<Result<Vec<_>>>()?;
        r.finish("layer request")?;
        // Each input ciphertext on its own thread: the share added to c_0 (still seeded).
        let inputs = blobs
            .par_iter()
            .zip(&own_packed)
            .enumerate()
            .map(|(k, (blob, own))| -> Result<SeededCiphertext> {
                let timer = lycaon_math::profile::time(lycaon_math::profile::Kernel::Serialize);
                let ct = SeededCiphertext::from_bytes(params, blob).map_err(|e| RuntimeError::Protocol(format!("input ciphertext {k}: {e}")))?;
                drop(timer);
                if ct.level() != params.max_level() {
                    return Err(RuntimeError::Protocol(format!("input ciphertext {k} is at level {}, expected the top level {}", ct.level(), params.max_level())));
                }
                Ok(keys.eval.add_plain_seeded(&ct, &keys.codec.encode(layout_in.encoding, own)?)?)
            })
            .collect::<Result<Vec<_>>>()?;
        let layout_out = step.plan.output_layout();
        let (responses, masks) = match remote {
            Some(remote) => {
                // Seeded: each worker expands them (half the bytes of full ciphertexts).
                let sent = inputs.iter().map(SeededCiphertext::to_bytes).collect();
                drop(inputs);
                let ranges = remote.fanout.evaluate(remote.session, remote.layer, step.plan.output_units(), step.plan.unit_block(), sent)?;
                let count: usize = ranges.iter().map(|r| r.responses.len()).sum();
                if count != layout_out.num_ciphertexts {
                    return Err(RuntimeError::Cluster(format!("the workers returned {count} responses, the layer has {} output ciphertexts", layout_out.num_ciphertexts)));
                }
                // The masks the workers subtracted, from their seeds: the k-th response overall
                // is output ciphertext k (a unit is one output ciphertext), masked with stream k
                // of its range's seed.
                let seeds: Vec<&Seed> = ranges.iter().flat_map(|r| r.responses.iter().map(|_| &r.mask_seed)).collect();
                let masks = seeds.par_iter().enumerate().map(|(k, seed)| output_mask(params, seed, k)).collect::<Result<Vec<_>>>()?;
                (ranges.into_iter().flat_map(|r| r.responses).collect::<Vec<_>>(), masks)
            }
            None => {
                let inputs = inputs.par_iter().map(|ct| ct.expand(params)).collect::<std::result::Result<Vec<_>, _>>()?;
                let ops = HeOps::new(keys.eval.clone(), keys.galois.clone()).with_output_level(self.eval_level);
                let outputs = match &self.weights {
                    LayerWeights::Prepared(prepared) => prepared.evaluate(&ops, &inputs)?,
                    LayerWeights::OnDemand(weights) => step.plan.evaluate_streaming(&ops, &inputs, weights)?,
                };
                let seed = Sampler::from_os()?.seed();
                self.answer(step, &keys.eval, &keys.codec, &keys.public_key, &outputs, 0, &seed)?.into_iter().unzip()
            }
        };
        let mut w = Writer::default();
        w.u32(self.drop.c0);
        w.u32(self.drop.c1);
        for bytes in &responses {
            w.blob(bytes);
        }
        let mut share = layout_out.unpack(&masks, t)?;
        if let Some(bias) = &self.bias {
            let per_channel = share.len() / bias.len();
            for (i, s) in share.iter_mut().enumerate() {
                *s = (*s + bias[i / per_channel].rem_euclid(t as i64) as u64) % t;
            }
        }
        Ok((w.finish(), share))
    }

    /// The responses to output ciphertexts `first..first + outputs.len()` of the layer, with the
    /// masks they carry. Each on its own thread: the mask from `mask_seed` (stream = its index)
    /// subtracted, re-randomised with a public-key encryption of zero and flooded (from the
    /// operating system's randomness), switched to level 0 and cut for the wire. The server
    /// answers so when it evaluates a layer itself, a worker when it evaluates units for it.
    pub(crate) fn answer(
        &self,
        step: &LinearStep,
        eval: &Evaluator,
        codec: &LayoutCodec,
        public_key: &PublicKey,
        outputs: &[Ciphertext],
        first: usize,
        mask_seed: &Seed,
    ) -> Result<Vec<(Vec<u8>, Vec<u64>)>> {
        let params = &step.params;
        let layout_out = step.plan.output_layout();
        let positions = layout_out.kept_coefficients.as_ref().map(|_| kept_positions(layout_out));
        if first + outputs.len() > layout_out.num_ciphertexts {
            return Err(RuntimeError::Program(format!("output ciphertexts {first}..{} of a layer that has {}", first + outputs.len(), layout_out.num_ciphertexts)));
        }
        outputs
            .par_iter()
            .enumerate()
            .map(|(j, ct)| -> Result<(Vec<u8>, Vec<u64>)> {
                let k = first + j;
                let mut sampler = Sampler::from_os()?;
                let mask = output_mask(params, mask_seed, k)?;
                let mut ct = eval.sub_plain(ct, &codec.encode(layout_out.encoding, &mask)?)?;
                let level = ct.level();
                ct = eval.add(&ct, &encrypt_zero_public(params, public_key, level, &mut sampler)?)?;
                if self.flood_log2 > 0 {
                    let sent: Vec<usize> = match &positions {
                        Some(pos) => pos[k].iter().map(|&p| p as usize).collect(),
                        None => (0..params.n()).collect(),
                    };
                    let flood = flooding_poly(params, level, &sent, self.flood_log2, &mut sampler)?;
                    ct.parts_mut()[0].add_assign(&flood)?;
                }
                let ct = eval.mod_switch_to(&ct, 0)?;
                let _t = lycaon_math::profile::time(lycaon_math::profile::Kernel::Serialize);
                Ok((response_ciphertext(params, &ct, positions.as_ref().map(|p| &p[k][..]), self.drop)?, mask))
            })
            .collect()
    }
}

/// The mask of output ciphertext `k` (n values mod t): stream k of the layer's mask seed.
pub(crate) fn output_mask(params: &Parameters, mask_seed: &Seed, k: usize) -> Result<Vec<u64>> {
    let t = params.plaintext_modulus().ok_or(lycaon_bfv::BfvError::NotBfv)?.value();
    let modulus = lycaon_math::Modulus::new(t)?;
    let mut sampler = Sampler::from_seed_stream(*mask_seed, k as u64);
    Ok((0..params.n()).map(|_| sampler.uniform_mod(&modulus)).collect())
}

/// A polynomial (NTT form, at `level`) with independent uniform noise in [-2^log2, 2^log2] at
/// the coefficients `positions` and zero elsewhere.
pub(crate) fn flooding_poly(params: &Parameters, level: usize, positions: &[usize], log2: u32, sampler: &mut Sampler) -> Result<Poly<lycaon_math::Ntt>> {
    let basis = params.q_at(level)?;
    let n = params.n();
    let bound: u128 = 1u128 << log2;
    let range = 2 * bound + 1;
    let mask = range.next_power_of_two() - 1;
    let mut data = vec![0u64; basis.len() * n];
    for &p in positions {
        let v = loop {
            let r = ((u128::from(sampler.next_u64()) << 64) | u128::from(sampler.next_u64())) & mask;
            if r < range {
                break r as i128 - bound as i128;
            }
        };
        for (limb, q) in basis.moduli().iter().enumerate() {
            data[limb * n + p] = v.rem_euclid(i128::from(q.value())) as u64;
        }
    }
    Ok(params.backend().ntt(Poly::<Coeff>::from_data(basis, data)?)?)
}

fn q0_bits(params: &Parameters) -> Result<(u64, u32)> {
    let q0 = params.q_at(0)?.moduli()[0].value();
    Ok((q0, 64 - q0.leading_zeros()))
}

/// One response ciphertext as it travels: c_0 (only the coefficients at `positions` for a
/// coefficient layout, whose other coefficients carry no output) and all of c_1, both in
/// coefficient form with `drop`'s low bits rounded away, packed at the widths left.
fn response_ciphertext(params: &Parameters, ct: &Ciphertext, positions: Option<&[u32]>, drop: ResponseDrop) -> Result<Vec<u8>> {
    if ct.level() != 0 || ct.len() != 2 {
        return Err(RuntimeError::Program(format!("a response ciphertext at level {} with {} parts", ct.level(), ct.len())));
    }
    let (q0, bits) = q0_bits(params)?;
    let backend = params.backend();
    let c0: Poly<Coeff> = backend.intt(ct.parts()[0].clone())?;
    let c1: Poly<Coeff> = backend.intt(ct.parts()[1].clone())?;
    let (c0, c1) = (c0.limb(0), c1.limb(0));
    let high = |v: u64, d: u32| round_away_low_bits(v, q0, d);
    let kept: Vec<u64> = match positions {
        Some(pos) => pos.iter().map(|&p| high(c0[p as usize], drop.c0)).collect(),
        None => c0.iter().map(|&v| high(v, drop.c0)).collect(),
    };
    let mut blob = pack_words(&kept, bits - drop.c0);
    blob.extend(pack_words(&c1.iter().map(|&v| high(v, drop.c1)).collect::<Vec<_>>(), bits - drop.c1));
    Ok(blob)
}

/// round(v / 2^d) for v < q0, as a value whose multiple of 2^d is below q0 (the top one wraps to
/// 0 = q0, which is as close), so it fits in bits(q0) - d bits.
fn round_away_low_bits(v: u64, q0: u64, d: u32) -> u64 {
    if d == 0 {
        return v;
    }
    let r = (v + (1 << (d - 1))) >> d;
    if r << d >= q0 {
        0
    } else {
        r
    }
}

/// The ciphertext a response blob carries (zeros in c_0 where no output is).
fn read_response_ciphertext(params: &Parameters, positions: Option<&[u32]>, blob: &[u8], drop: ResponseDrop) -> Result<Ciphertext> {
    let (q0, bits) = q0_bits(params)?;
    if drop.c0 >= bits || drop.c1 >= bits {
        return Err(RuntimeError::Protocol(format!("a response dropping {} and {} of the {bits} bits of q_0", drop.c0, drop.c1)));
    }
    let n = params.n();
    let kept = positions.map_or(n, <[u32]>::len);
    let (w0, w1) = (bits - drop.c0, bits - drop.c1);
    let kept_len = (kept * w0 as usize).div_ceil(8);
    let c1_len = (n * w1 as usize).div_ceil(8);
    if blob.len() != kept_len + c1_len {
        return Err(RuntimeError::Protocol(format!("{} bytes, expected {}", blob.len(), kept_len + c1_len)));
    }
    let lift = |words: Vec<u64>, d: u32| -> Result<Vec<u64>> {
        let v: Vec<u64> = words.into_iter().map(|w| w << d).collect();
        if v.iter().any(|&x| x >= q0) {
            return Err(RuntimeError::Protocol("a coefficient is not reduced modulo q_0".into()));
        }
        Ok(v)
    };
    let c0_kept = lift(unpack_words(&blob[..kept_len], kept, w0), drop.c0)?;
    let c1 = lift(unpack_words(&blob[kept_len..], n, w1), drop.c1)?;
    let c0 = match positions {
        Some(pos) => {
            let mut c0 = vec![0u64; n];
            for (&p, v) in pos.iter().zip(c0_kept) {
                c0[p as usize] = v;
            }
            c0
        }
        None => c0_kept,
    };
    let backend = params.backend();
    let parts = vec![backend.ntt(Poly::<Coeff>::from_data(params.q_at(0)?, c0)?)?, backend.ntt(Poly::<Coeff>::from_data(params.q_at(0)?, c1)?)?];
    Ok(Ciphertext::from_parts(params, parts)?)
}
