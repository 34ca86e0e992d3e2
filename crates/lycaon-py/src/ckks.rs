//! Bindings of the CKKS scheme: parameters, keys, encoding of float64/complex128 vectors,
//! encryption, the evaluator (products, rescaling, rotations, linear transforms, Chebyshev
//! polynomials) and precision in bits. Long calls release the GIL; objects pickle through the
//! versioned wire format.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use lycaon_ckks::{CkksContext, CkksError, Complex64};
use lycaon_math::Sampler;
use lycaon_rlwe as rlwe;
use numpy::{PyArray1, PyReadonlyArray1, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::{param_err, parse_err, rlwe_err, LycaonError, MissingKeyError, ParameterError, SecurityError, SerializationError};

fn ckks_err(e: CkksError) -> PyErr {
    let msg = e.to_string();
    match e {
        CkksError::Rlwe(r) => rlwe_err(r),
        CkksError::MissingRelinKey | CkksError::MissingGaloisKeys { .. } | CkksError::MissingRotationKey { .. } => MissingKeyError::new_err(msg),
        CkksError::NotCkks => ParameterError::new_err(msg),
        _ => LycaonError::new_err(msg),
    }
}

fn ckks_parse_err(e: CkksError) -> PyErr {
    match e {
        CkksError::Rlwe(r) => parse_err(r),
        other => SerializationError::new_err(other.to_string()),
    }
}

fn sampler() -> PyResult<Sampler> {
    Sampler::from_os().map_err(|e| LycaonError::new_err(e.to_string()))
}

// ---------------------------------------------------------------------------------------------
// Parameters

/// Validated CKKS parameters (128-bit security enforced) with the top-level scale.
#[pyclass(module = "lycaon._native", frozen)]
#[derive(Clone)]
pub struct CkksParameters {
    params: Arc<rlwe::Parameters>,
    ctx: Arc<CkksContext>,
}

impl CkksParameters {
    fn build(py: Python<'_>, lit: rlwe::ParametersLiteral, scale: f64) -> PyResult<Self> {
        py.detach(|| {
            // Every core of this machine: the runtime chooses the backend for the device.
            let backend = lycaon_runtime::device::Device::Cpu.backend().map_err(crate::hybrid::err)?;
            let params = rlwe::Parameters::with_backend(lit, backend).map_err(param_err)?;
            let ctx = CkksContext::new(&params, scale).map_err(|e| ParameterError::new_err(e.to_string()))?;
            Ok(Self { params, ctx })
        })
    }

    fn same(&self, id: &rlwe::wire::ParamsId, what: &str) -> PyResult<()> {
        if self.params.id() != id {
            return Err(LycaonError::new_err(format!("{what} made under different parameters")));
        }
        Ok(())
    }
}

#[pymethods]
impl CkksParameters {
    /// Primes from bit sizes (the largest NTT-friendly primes below each, as SEAL), digits
    /// chosen so each fits under P, and the top-level scale 2^log_scale.
    #[staticmethod]
    #[pyo3(signature = (n, q_bits, p_bits, log_scale, key_switch_digits=None))]
    fn from_bits(py: Python<'_>, n: usize, q_bits: Vec<u32>, p_bits: Vec<u32>, log_scale: i32, key_switch_digits: Option<usize>) -> PyResult<Self> {
        let mut lit = rlwe::ParametersLiteral::ckks_from_bits(n, &q_bits, &p_bits).map_err(param_err)?;
        if let Some(d) = key_switch_digits {
            lit.key_switch_digits = d;
        }
        Self::build(py, lit, 2f64.powi(log_scale))
    }

    /// Primes chosen so that the canonical scale stays at 2^log_scale at every level: q_0 of
    /// log_q0 bits, `levels` primes near the scale, special primes of `p_bits`.
    #[staticmethod]
    #[pyo3(signature = (n, log_q0, log_scale, levels, p_bits))]
    fn scale_stable(py: Python<'_>, n: usize, log_q0: u32, log_scale: u32, levels: usize, p_bits: Vec<u32>) -> PyResult<Self> {
        let lit = lycaon_ckks::scale_stable_literal(n, log_q0, log_scale, levels, &p_bits).map_err(|e| ParameterError::new_err(e.to_string()))?;
        Self::build(py, lit, 2f64.powi(log_scale as i32))
    }

    #[getter]
    fn n(&self) -> usize {
        self.params.n()
    }
    /// n / 2: the largest slot count.
    #[getter]
    fn max_slots(&self) -> usize {
        self.ctx.max_slots()
    }
    #[getter]
    fn max_level(&self) -> usize {
        self.params.max_level()
    }
    #[getter]
    fn ciphertext_moduli(&self) -> Vec<u64> {
        self.params.literal().ciphertext_moduli.clone()
    }
    #[getter]
    fn special_moduli(&self) -> Vec<u64> {
        self.params.literal().special_moduli.clone()
    }
    #[getter]
    fn key_switch_digits(&self) -> usize {
        self.params.literal().key_switch_digits
    }
    #[getter]
    fn log2_qp(&self) -> f64 {
        self.params.log2_qp()
    }
    /// The scale of the top level.
    #[getter]
    fn scale(&self) -> f64 {
        self.ctx.default_scale()
    }
    /// The canonical scale of a level (fresh encryptions there, and products landing there).
    fn scale_at(&self, level: usize) -> PyResult<f64> {
        self.ctx.scale_at(level).map_err(ckks_err)
    }
    #[getter]
    fn id(&self) -> String {
        self.params.id().iter().map(|b| format!("{b:02x}")).collect()
    }
    /// Versioned bytes of the prime chain, followed by the top-level scale.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut out = self.params.to_bytes();
        out.extend_from_slice(&self.ctx.default_scale().to_le_bytes());
        PyBytes::new(py, &out)
    }
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: Cow<'_, [u8]>) -> PyResult<Self> {
        if data.len() < 8 {
            return Err(SerializationError::new_err("CKKS parameter bytes are truncated"));
        }
        let (body, scale) = data.split_at(data.len() - 8);
        let scale = f64::from_le_bytes(scale.try_into().map_err(|_| SerializationError::new_err("bad scale"))?);
        let params = rlwe::Parameters::from_bytes(body).map_err(parse_err)?;
        if params.literal().security != rlwe::Security::Bits128 {
            return Err(SecurityError::new_err("these bytes describe a test-only parameter set without the 128-bit security check; Python refuses it"));
        }
        Self::build(py, params.literal().clone(), scale)
    }
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        Ok((py.get_type::<CkksParameters>().getattr("from_bytes")?, (self.to_bytes(py),)))
    }
    fn __repr__(&self) -> String {
        format!(
            "CkksParameters(n={}, levels={}, log2_qp={:.1}, scale=2^{:.2}, digits={})",
            self.params.n(),
            self.params.max_level(),
            self.params.log2_qp(),
            self.ctx.default_scale().log2(),
            self.params.literal().key_switch_digits
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Wire objects

macro_rules! ckks_object {
    ($name:ident, $inner:ty, $doc:literal, |$p:ident, $b:ident| $parse:expr $(, { $($extra:tt)* })?) => {
        #[doc = $doc]
        #[pyclass(module = "lycaon._native", frozen)]
        #[derive(Clone)]
        pub struct $name {
            inner: Arc<$inner>,
            params: CkksParameters,
        }

        impl $name {
            fn wrap(params: &CkksParameters, inner: $inner) -> Self {
                Self { inner: Arc::new(inner), params: params.clone() }
            }
        }

        #[pymethods]
        impl $name {
            /// Versioned, checksummed bytes (pickling uses them too).
            fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
                let inner = &self.inner;
                let bytes = py.detach(|| inner.to_bytes());
                PyBytes::new(py, &bytes)
            }
            /// Parses bytes made by `to_bytes` under the same parameters.
            #[staticmethod]
            fn from_bytes(py: Python<'_>, params: &CkksParameters, data: Cow<'_, [u8]>) -> PyResult<Self> {
                let ($p, $b) = (params, &*data);
                let inner = py.detach(|| $parse)?;
                Ok(Self::wrap(params, inner))
            }
            #[getter]
            fn params(&self) -> CkksParameters {
                self.params.clone()
            }
            fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (CkksParameters, Bound<'py, PyBytes>))> {
                Ok((py.get_type::<$name>().getattr("from_bytes")?, (self.params.clone(), self.to_bytes(py))))
            }
            $($($extra)*)?
        }
    };
}

/// The CKKS secret key (client side). It neither pickles nor has `to_bytes`: storing it takes
/// the explicit `export_secret_key_bytes`, so no generic serialisation path (pickle, Ray,
/// multiprocessing, a cache) can carry it off by accident.
#[pyclass(module = "lycaon._native", frozen)]
#[derive(Clone)]
pub struct CkksSecretKey {
    inner: Arc<rlwe::SecretKey>,
    params: CkksParameters,
}

#[pymethods]
impl CkksSecretKey {
    /// The secret key's versioned bytes, for the client to store it on purpose (encrypted at
    /// rest, say); never send them. `import_secret_key_bytes` reads them back.
    fn export_secret_key_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let inner = &self.inner;
        let bytes = py.detach(|| inner.to_bytes());
        PyBytes::new(py, &bytes)
    }
    /// Reads bytes made by `export_secret_key_bytes` under the same parameters.
    #[staticmethod]
    fn import_secret_key_bytes(py: Python<'_>, params: &CkksParameters, data: Cow<'_, [u8]>) -> PyResult<Self> {
        let p = &params.params;
        let inner = py.detach(|| rlwe::SecretKey::from_bytes(p, &data)).map_err(parse_err)?;
        Ok(Self { inner: Arc::new(inner), params: params.clone() })
    }
    #[getter]
    fn params(&self) -> CkksParameters {
        self.params.clone()
    }
    /// Refuses: a secret key is never pickled (see the class documentation).
    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(SECRET_KEY_NOT_PICKLED))
    }
    /// The same key (it is immutable); copying within a process serialises nothing.
    fn __copy__(&self) -> Self {
        self.clone()
    }
    fn __deepcopy__(&self, _memo: &Bound<'_, PyAny>) -> Self {
        self.clone()
    }
    fn __repr__(&self) -> String {
        format!("CkksSecretKey(<secret>, n={})", self.params.params.n())
    }
}

/// Why `pickle.dumps(secret_key)` fails, and what to do instead.
pub(crate) const SECRET_KEY_NOT_PICKLED: &str = "a secret key cannot be pickled: it must never leave the client by accident (pickle is how Ray, multiprocessing and caches move objects). To store it on purpose, use secret_key.export_secret_key_bytes() and import_secret_key_bytes(params, data).";
ckks_object!(CkksPublicKey, rlwe::PublicKey, "The CKKS public key.", |p, b| rlwe::PublicKey::from_bytes(&p.params, b).map_err(parse_err));
ckks_object!(CkksRelinKey, rlwe::RelinKey, "The relinearisation key.", |p, b| rlwe::RelinKey::from_bytes(&p.params, b).map_err(parse_err), {
    /// Bytes the key occupies in memory (8 bytes per residue).
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.inner.key().memory_bytes()
    }
    /// The highest ciphertext level the key serves.
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
});
ckks_object!(CkksGaloisKeys, rlwe::GaloisKeys, "Rotation (5^k) and conjugation keys.", |p, b| rlwe::GaloisKeys::from_bytes(&p.params, b).map_err(parse_err), {
    #[getter]
    fn galois_elements(&self) -> Vec<u64> {
        self.inner.galois_elements().collect()
    }
    /// Bytes all keys occupy in memory (8 bytes per residue).
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }
});
ckks_object!(CkksPlaintext, lycaon_ckks::Plaintext, "An encoded message at a level and scale.", |p, b| lycaon_ckks::Plaintext::from_bytes(&p.ctx, b).map_err(ckks_parse_err), {
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
    #[getter]
    fn scale(&self) -> f64 {
        self.inner.scale()
    }
    #[getter]
    fn slots(&self) -> usize {
        self.inner.slots()
    }
});
ckks_object!(CkksCiphertext, lycaon_ckks::Ciphertext, "A CKKS ciphertext with its level, scale and slot count.", |p, b| lycaon_ckks::Ciphertext::from_bytes(&p.ctx, b).map_err(ckks_parse_err), {
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
    #[getter]
    fn scale(&self) -> f64 {
        self.inner.scale()
    }
    #[getter]
    fn slots(&self) -> usize {
        self.inner.slots()
    }
    /// 2, or 3 after `multiply` without relinearisation.
    #[getter]
    fn size(&self) -> usize {
        self.inner.len()
    }
    fn __repr__(&self) -> String {
        format!("CkksCiphertext(level={}, scale=2^{:.3}, slots={}, size={})", self.inner.level(), self.inner.scale().log2(), self.inner.slots(), self.inner.len())
    }
});
ckks_object!(CkksSeededCiphertext, lycaon_ckks::SeededCiphertext, "A fresh symmetric encryption as (c0, seed): half the bytes.", |p, b| lycaon_ckks::SeededCiphertext::from_bytes(&p.ctx, b).map_err(ckks_parse_err), {
    /// The full ciphertext.
    fn expand(&self, py: Python<'_>) -> PyResult<CkksCiphertext> {
        let (inner, ctx) = (&self.inner, &self.params.ctx);
        let ct = py.detach(|| inner.expand(ctx)).map_err(ckks_err)?;
        Ok(CkksCiphertext::wrap(&self.params, ct))
    }
});

/// Relinearisation and Galois keys an evaluator may use (public material).
#[pyclass(module = "lycaon._native", frozen)]
#[derive(Clone)]
pub struct CkksEvaluationKeys {
    keys: lycaon_ckks::EvaluationKeys,
}

#[pymethods]
impl CkksEvaluationKeys {
    #[new]
    #[pyo3(signature = (relin_key=None, galois_keys=None))]
    fn new(relin_key: Option<&CkksRelinKey>, galois_keys: Option<&CkksGaloisKeys>) -> Self {
        Self { keys: lycaon_ckks::EvaluationKeys { relin: relin_key.map(|k| k.inner.clone()), galois: galois_keys.map(|k| k.inner.clone()) } }
    }
    /// Bytes of the relinearisation and Galois keys in memory.
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.keys.relin.as_ref().map_or(0, |r| r.key().memory_bytes()) + self.keys.galois.as_ref().map_or(0, |g| g.memory_bytes())
    }
}

// ---------------------------------------------------------------------------------------------
// Keys, encoding, encryption

/// Samples the secret key from the OS CSPRNG and derives the other keys from it.
#[pyclass(module = "lycaon._native")]
pub struct CkksKeyGenerator {
    params: CkksParameters,
    sk: Arc<rlwe::SecretKey>,
    sampler: Sampler,
}

#[pymethods]
impl CkksKeyGenerator {
    #[new]
    fn new(py: Python<'_>, params: &CkksParameters) -> PyResult<Self> {
        let mut sampler = sampler()?;
        let p = &params.params;
        let sk = py.detach(|| rlwe::SecretKey::generate(p, &mut sampler)).map_err(rlwe_err)?;
        Ok(Self { params: params.clone(), sk: Arc::new(sk), sampler })
    }
    fn secret_key(&self) -> CkksSecretKey {
        CkksSecretKey { inner: self.sk.clone(), params: self.params.clone() }
    }
    fn public_key(&mut self, py: Python<'_>) -> PyResult<CkksPublicKey> {
        let (sk, s) = (&self.sk, &mut self.sampler);
        let pk = py.detach(|| rlwe::PublicKey::generate(sk, s)).map_err(rlwe_err)?;
        Ok(CkksPublicKey::wrap(&self.params, pk))
    }
    /// The relinearisation key; with `level`, it serves ciphertexts at levels <= `level` only.
    #[pyo3(signature = (level=None))]
    fn relin_key(&mut self, py: Python<'_>, level: Option<usize>) -> PyResult<CkksRelinKey> {
        let (sk, s) = (&self.sk, &mut self.sampler);
        let rk = match level {
            None => py.detach(|| rlwe::RelinKey::generate(sk, s)),
            Some(l) => py.detach(|| rlwe::RelinKey::generate_at(sk, l, s)),
        }
        .map_err(rlwe_err)?;
        Ok(CkksRelinKey::wrap(&self.params, rk))
    }
    /// Keys for slot rotations by `steps` (negative: right) and, when asked, conjugation; with
    /// `level`, each key serves ciphertexts at levels <= `level` only (fewer limbs and digits);
    /// with `levels` (one per step, 004's level-aware keyset), each step's key at its own level.
    #[pyo3(signature = (steps, conjugate=false, level=None, levels=None))]
    fn galois_keys(&mut self, py: Python<'_>, steps: Vec<i64>, conjugate: bool, level: Option<usize>, levels: Option<Vec<usize>>) -> PyResult<CkksGaloisKeys> {
        let (sk, s) = (&self.sk, &mut self.sampler);
        if let Some(ls) = &levels {
            if ls.len() != steps.len() {
                return Err(LycaonError::new_err(format!("galois_keys: {} levels for {} steps (give one level per step)", ls.len(), steps.len())));
            }
            if level.is_some() {
                return Err(LycaonError::new_err("galois_keys: give level (one for all) or levels (one per step), not both"));
            }
        }
        let gk = match (level, levels) {
            (None, None) => py.detach(|| lycaon_ckks::EvaluationKeys::galois_keys(sk, &steps, conjugate, s)).map_err(ckks_err)?,
            (l, ls) => {
                let n = self.params.params.n();
                let top = self.params.ctx.max_level();
                let per_step = ls.unwrap_or_else(|| vec![l.unwrap_or(top); steps.len()]);
                let l = per_step.iter().copied().max().unwrap_or(top);
                let mut pairs: Vec<(u64, usize)> = steps.iter().zip(&per_step).map(|(&st, &lv)| (lycaon_ckks::rotation_galois_element(st, n), lv)).filter(|&(g, _)| g != 1).collect();
                if conjugate {
                    pairs.push((lycaon_ckks::conjugation_galois_element(n), l));
                }
                py.detach(|| rlwe::GaloisKeys::generate_at(sk, &pairs, s)).map_err(rlwe_err)?
            }
        };
        Ok(CkksGaloisKeys::wrap(&self.params, gk))
    }
    /// A relinearisation key and Galois keys for `steps` (and conjugation), bundled.
    #[pyo3(signature = (steps=Vec::new(), conjugate=false))]
    fn evaluation_keys(&mut self, py: Python<'_>, steps: Vec<i64>, conjugate: bool) -> PyResult<CkksEvaluationKeys> {
        let (sk, s) = (&self.sk, &mut self.sampler);
        let keys = py.detach(|| lycaon_ckks::EvaluationKeys::generate(sk, &steps, conjugate, s)).map_err(ckks_err)?;
        Ok(CkksEvaluationKeys { keys })
    }
}

/// Complex values from a 1-D numpy array (float or complex) or a sequence of numbers.
fn complex_values(values: &Bound<'_, PyAny>) -> PyResult<Vec<Complex64>> {
    if let Ok(arr) = values.cast::<PyUntypedArray>() {
        if arr.shape().len() != 1 {
            return Err(LycaonError::new_err(format!("values must be one-dimensional; got {} dimensions", arr.shape().len())));
        }
        let cast = values.call_method1("astype", ("complex128",))?;
        let a: PyReadonlyArray1<'_, Complex64> = cast.extract()?;
        return Ok(a.as_array().to_vec());
    }
    let bad = |_| LycaonError::new_err("values must be a 1-D numpy array or a sequence of real or complex numbers");
    let arr = values.py().import("numpy")?.call_method1("asarray", (values, "complex128")).map_err(bad)?;
    let a: PyReadonlyArray1<'_, Complex64> = arr.extract().map_err(bad)?;
    Ok(a.as_array().to_vec())
}

/// Encodes vectors into plaintexts through the canonical embedding, and decodes them.
#[pyclass(module = "lycaon._native", frozen)]
pub struct CkksEncoder {
    params: CkksParameters,
    encoder: lycaon_ckks::Encoder,
}

#[pymethods]
impl CkksEncoder {
    #[new]
    fn new(params: &CkksParameters) -> Self {
        Self { params: params.clone(), encoder: lycaon_ckks::Encoder::new(&params.ctx) }
    }
    /// Encodes real or complex values into len(values) rounded up to a power of two slots (or
    /// exactly `slots`), at `level` (default: top) and `scale` (default: that level's canonical scale).
    #[pyo3(signature = (values, level=None, scale=None, slots=None))]
    fn encode(&self, py: Python<'_>, values: &Bound<'_, PyAny>, level: Option<usize>, scale: Option<f64>, slots: Option<usize>) -> PyResult<CkksPlaintext> {
        let v = complex_values(values)?;
        let level = level.unwrap_or(self.params.params.max_level());
        let scale = match scale {
            Some(s) => s,
            None => self.params.ctx.scale_at(level).map_err(ckks_err)?,
        };
        let enc = &self.encoder;
        let pt = py
            .detach(|| match slots {
                Some(s) => enc.encode_with_slots(&v, s, level, scale),
                None => enc.encode(&v, level, scale),
            })
            .map_err(ckks_err)?;
        Ok(CkksPlaintext::wrap(&self.params, pt))
    }
    /// All slots as a complex128 array.
    fn decode<'py>(&self, py: Python<'py>, plaintext: &CkksPlaintext) -> PyResult<Bound<'py, PyArray1<Complex64>>> {
        let (enc, pt) = (&self.encoder, &plaintext.inner);
        let v = py.detach(|| enc.decode(pt)).map_err(ckks_err)?;
        Ok(PyArray1::from_vec(py, v))
    }
    /// The real parts of all slots as a float64 array.
    fn decode_real<'py>(&self, py: Python<'py>, plaintext: &CkksPlaintext) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let (enc, pt) = (&self.encoder, &plaintext.inner);
        let v = py.detach(|| enc.decode_real(pt)).map_err(ckks_err)?;
        Ok(PyArray1::from_vec(py, v))
    }
}

/// Public-key encryption (server side, or anyone): encrypts for the key's owner and
/// re-randomises answers. It takes a public key only, so it can never hold a secret key.
#[pyclass(module = "lycaon._native")]
pub struct CkksPublicEncryptor {
    params: CkksParameters,
    enc: lycaon_ckks::PublicKeyEncryptor,
}

#[pymethods]
impl CkksPublicEncryptor {
    #[new]
    fn new(params: &CkksParameters, public_key: &CkksPublicKey) -> PyResult<Self> {
        params.same(public_key.inner.params_id(), "the public key was")?;
        Ok(Self { params: params.clone(), enc: lycaon_ckks::PublicKeyEncryptor::new(&params.ctx, public_key.inner.clone()).map_err(ckks_err)? })
    }
    /// Encrypts at the plaintext's level and scale.
    fn encrypt(&mut self, py: Python<'_>, plaintext: &CkksPlaintext) -> PyResult<CkksCiphertext> {
        let (enc, pt) = (&mut self.enc, &plaintext.inner);
        let ct = py.detach(|| enc.encrypt(pt)).map_err(ckks_err)?;
        Ok(CkksCiphertext::wrap(&self.params, ct))
    }
    /// The ciphertext plus a fresh encryption of zero at its level: same message and scale,
    /// fresh randomness (the noise is not flooded).
    fn rerandomise(&mut self, py: Python<'_>, ciphertext: &CkksCiphertext) -> PyResult<CkksCiphertext> {
        let (enc, ct) = (&mut self.enc, &ciphertext.inner);
        let out = py.detach(|| enc.rerandomise(ct)).map_err(ckks_err)?;
        Ok(CkksCiphertext::wrap(&self.params, out))
    }
}

/// Secret-key encryption (client side), seeded: half the bytes of a public-key ciphertext.
#[pyclass(module = "lycaon._native")]
pub struct CkksSecretEncryptor {
    params: CkksParameters,
    enc: lycaon_ckks::SecretKeyEncryptor,
}

#[pymethods]
impl CkksSecretEncryptor {
    #[new]
    fn new(params: &CkksParameters, secret_key: &CkksSecretKey) -> PyResult<Self> {
        params.same(secret_key.inner.params().id(), "the secret key was")?;
        Ok(Self { params: params.clone(), enc: lycaon_ckks::SecretKeyEncryptor::new(&params.ctx, secret_key.inner.clone()).map_err(ckks_err)? })
    }
    /// Encrypts at the plaintext's level and scale, seeded (`expand()` gives the full ciphertext).
    fn encrypt(&mut self, py: Python<'_>, plaintext: &CkksPlaintext) -> PyResult<CkksSeededCiphertext> {
        let (enc, pt) = (&mut self.enc, &plaintext.inner);
        let ct = py.detach(|| enc.encrypt(pt)).map_err(ckks_err)?;
        Ok(CkksSeededCiphertext::wrap(&self.params, ct))
    }
}

/// Decrypts; holds the secret key (client side).
#[pyclass(module = "lycaon._native", frozen)]
pub struct CkksDecryptor {
    params: CkksParameters,
    sk: Arc<rlwe::SecretKey>,
}

#[pymethods]
impl CkksDecryptor {
    #[new]
    fn new(params: &CkksParameters, secret_key: &CkksSecretKey) -> PyResult<Self> {
        params.same(secret_key.inner.params().id(), "the secret key was")?;
        Ok(Self { params: params.clone(), sk: secret_key.inner.clone() })
    }
    fn decrypt(&self, py: Python<'_>, ciphertext: &CkksCiphertext) -> PyResult<CkksPlaintext> {
        let (ctx, sk, ct) = (&self.params.ctx, &self.sk, &ciphertext.inner);
        let pt = py.detach(|| lycaon_ckks::Decryptor::new(ctx, sk)?.decrypt(ct)).map_err(ckks_err)?;
        Ok(CkksPlaintext::wrap(&self.params, pt))
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation

/// Homomorphic CKKS operations; holds evaluation keys, never the secret key.
#[pyclass(module = "lycaon._native", frozen)]
pub struct CkksEvaluator {
    params: CkksParameters,
    ev: lycaon_ckks::Evaluator,
}

impl CkksEvaluator {
    fn run<F>(&self, py: Python<'_>, f: F) -> PyResult<CkksCiphertext>
    where
        F: FnOnce(&lycaon_ckks::Evaluator) -> Result<lycaon_ckks::Ciphertext, CkksError> + Send,
    {
        let ev = &self.ev;
        py.detach(|| f(ev)).map(|c| CkksCiphertext::wrap(&self.params, c)).map_err(ckks_err)
    }
}

fn constant(value: &Bound<'_, PyAny>) -> PyResult<Complex64> {
    let bad = |_| LycaonError::new_err("the constant must be a real or complex number");
    if let Ok(x) = value.extract::<f64>() {
        return Ok(Complex64::new(x, 0.0));
    }
    let re = value.getattr("real").and_then(|v| v.extract::<f64>()).map_err(bad)?;
    let im = value.getattr("imag").and_then(|v| v.extract::<f64>()).map_err(bad)?;
    Ok(Complex64::new(re, im))
}

#[pymethods]
impl CkksEvaluator {
    #[new]
    #[pyo3(signature = (params, keys=None))]
    fn new(params: &CkksParameters, keys: Option<&CkksEvaluationKeys>) -> Self {
        let keys = keys.map(|k| k.keys.clone()).unwrap_or_default();
        Self { params: params.clone(), ev: lycaon_ckks::Evaluator::new(&params.ctx, keys) }
    }
    /// a + b (levels and scales aligned; ScaleMismatch errors say how to fix them).
    fn add(&self, py: Python<'_>, a: &CkksCiphertext, b: &CkksCiphertext) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.add(&a.inner, &b.inner))
    }
    fn sub(&self, py: Python<'_>, a: &CkksCiphertext, b: &CkksCiphertext) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.sub(&a.inner, &b.inner))
    }
    fn negate(&self, py: Python<'_>, a: &CkksCiphertext) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.negate(&a.inner))
    }
    fn add_plain(&self, py: Python<'_>, a: &CkksCiphertext, p: &CkksPlaintext) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.add_plain(&a.inner, &p.inner))
    }
    fn sub_plain(&self, py: Python<'_>, a: &CkksCiphertext, p: &CkksPlaintext) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.sub_plain(&a.inner, &p.inner))
    }
    /// a * p, not rescaled.
    fn mul_plain(&self, py: Python<'_>, a: &CkksCiphertext, p: &CkksPlaintext) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.mul_plain(&a.inner, &p.inner))
    }
    /// The plaintext scale that makes a product with `a` rescale to the canonical scale.
    fn plaintext_scale_for(&self, a: &CkksCiphertext) -> PyResult<f64> {
        self.ev.plaintext_scale_for(&a.inner).map_err(ckks_err)
    }
    /// Adds a real or complex constant to every slot.
    fn add_const(&self, py: Python<'_>, a: &CkksCiphertext, c: &Bound<'_, PyAny>) -> PyResult<CkksCiphertext> {
        let c = constant(c)?;
        self.run(py, |ev| ev.add_const(&a.inner, c))
    }
    /// Multiplies every slot by a real or complex constant, not rescaled.
    fn mul_const(&self, py: Python<'_>, a: &CkksCiphertext, c: &Bound<'_, PyAny>) -> PyResult<CkksCiphertext> {
        let c = constant(c)?;
        self.run(py, |ev| ev.mul_const_complex(&a.inner, c))
    }
    fn mul_integer(&self, py: Python<'_>, a: &CkksCiphertext, k: i64) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.mul_integer(&a.inner, k))
    }
    /// a * b without relinearisation (size 3), not rescaled.
    fn multiply(&self, py: Python<'_>, a: &CkksCiphertext, b: &CkksCiphertext) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.mul(&a.inner, &b.inner))
    }
    /// a * b relinearised, not rescaled.
    fn mul_relin(&self, py: Python<'_>, a: &CkksCiphertext, b: &CkksCiphertext) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.mul_relin(&a.inner, &b.inner))
    }
    fn relinearize(&self, py: Python<'_>, a: &CkksCiphertext) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.relinearize(&a.inner))
    }
    /// Divides by the last prime: level - 1, scale / q_l.
    fn rescale(&self, py: Python<'_>, a: &CkksCiphertext) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.rescale(&a.inner))
    }
    #[pyo3(signature = (a, levels=1))]
    fn drop_level(&self, py: Python<'_>, a: &CkksCiphertext, levels: usize) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.drop_level(&a.inner, levels))
    }
    /// Brings the ciphertext to `scale` exactly, using one level.
    fn set_scale(&self, py: Python<'_>, a: &CkksCiphertext, scale: f64) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.set_scale(&a.inner, scale))
    }
    /// Slot j receives slot j + step.
    fn rotate(&self, py: Python<'_>, a: &CkksCiphertext, step: i64) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.rotate(&a.inner, step))
    }
    /// Several rotations sharing one decomposition.
    fn rotate_hoisted(&self, py: Python<'_>, a: &CkksCiphertext, steps: Vec<i64>) -> PyResult<Vec<CkksCiphertext>> {
        let (ev, ct) = (&self.ev, &a.inner);
        let out = py.detach(|| ev.rotate_hoisted(ct, &steps)).map_err(ckks_err)?;
        Ok(out.into_iter().map(|c| CkksCiphertext::wrap(&self.params, c)).collect())
    }
    fn conjugate(&self, py: Python<'_>, a: &CkksCiphertext) -> PyResult<CkksCiphertext> {
        self.run(py, |ev| ev.conjugate(&a.inner))
    }
    /// M a for M given by its diagonals {k: d_k} with d_k[t] = M[t][(t + k) mod slots} (one
    /// level), or by a `CkksLinearTransform` (whose diagonals may be encoded ahead with `prepare`).
    fn linear_transform(&self, py: Python<'_>, a: &CkksCiphertext, diagonals: &Bound<'_, PyAny>) -> PyResult<CkksCiphertext> {
        if let Ok(lt) = diagonals.cast::<CkksLinearTransform>() {
            let lt = lt.get().lt.clone();
            return self.run(py, |ev| ev.linear_transform(&a.inner, &lt));
        }
        let diagonals: BTreeMap<i64, Bound<'_, PyAny>> = diagonals.extract().map_err(|_| LycaonError::new_err("diagonals must be a dict {index: values} or a CkksLinearTransform"))?;
        let diags = diagonals.iter().map(|(&k, v)| Ok((k, complex_values(v)?))).collect::<PyResult<Vec<_>>>()?;
        let (ctx, slots) = (&self.params.ctx, a.inner.slots());
        self.run(py, |ev| {
            let lt = lycaon_ckks::LinearTransform::new(ctx, slots, diags)?;
            ev.linear_transform(&a.inner, &lt)
        })
    }
    /// sum_i coeffs[i] T_i((2x - a - b) / (b - a)) in minimal depth, at the canonical scale.
    #[pyo3(signature = (x, coeffs, a=-1.0, b=1.0))]
    fn evaluate_chebyshev(&self, py: Python<'_>, x: &CkksCiphertext, coeffs: Vec<f64>, a: f64, b: f64) -> PyResult<CkksCiphertext> {
        let poly = lycaon_ckks::ChebyshevPoly::new(coeffs, a, b).map_err(ckks_err)?;
        self.run(py, |ev| ev.evaluate_chebyshev(&x.inner, &poly))
    }
}

// ---------------------------------------------------------------------------------------------
// Linear transforms and bootstrapping

/// A plaintext matrix by its non-zero diagonals, with its baby-step giant-step split; its
/// diagonals can be encoded ahead (`prepare`) so that evaluations only multiply.
#[pyclass(module = "lycaon._native", frozen)]
pub struct CkksLinearTransform {
    params: CkksParameters,
    lt: Arc<lycaon_ckks::LinearTransform>,
}

#[pymethods]
impl CkksLinearTransform {
    /// Diagonals {k: d_k} with d_k[t] = M[t][(t + k) mod slots]; `slots` defaults to the length
    /// of the diagonals. Double hoisting (the default) keeps the baby steps over Q_l P.
    #[new]
    #[pyo3(signature = (params, diagonals, slots=None, double_hoisting=true))]
    fn new(py: Python<'_>, params: &CkksParameters, diagonals: BTreeMap<i64, Bound<'_, PyAny>>, slots: Option<usize>, double_hoisting: bool) -> PyResult<Self> {
        let diags = diagonals.iter().map(|(&k, v)| Ok((k, complex_values(v)?))).collect::<PyResult<Vec<_>>>()?;
        let slots = slots.or_else(|| diags.first().map(|d| d.1.len())).unwrap_or(0);
        let ctx = &params.ctx;
        let lt = py.detach(|| lycaon_ckks::LinearTransform::new(ctx, slots, diags)).map_err(ckks_err)?.with_double_hoisting(double_hoisting);
        Ok(Self { params: params.clone(), lt: Arc::new(lt) })
    }
    /// The rotation steps the evaluation needs Galois keys for.
    fn rotations(&self) -> Vec<i64> {
        self.lt.rotations()
    }
    #[getter]
    fn slots(&self) -> usize {
        self.lt.slots()
    }
    #[getter]
    fn baby_steps(&self) -> usize {
        self.lt.baby_steps()
    }
    #[getter]
    fn diagonal_count(&self) -> usize {
        self.lt.diagonals().len()
    }
    /// Encodes every diagonal for inputs like `ciphertext` (its level and scale, result at the
    /// canonical scale of the level below) and keeps them: later evaluations only multiply.
    fn prepare(&self, py: Python<'_>, ciphertext: &CkksCiphertext) -> PyResult<()> {
        let (ctx, lt, ct) = (&self.params.ctx, &self.lt, &ciphertext.inner);
        py.detach(|| {
            if ct.level() == 0 {
                return Err(CkksError::NotEnoughLevels { op: "linear_transform", needed: 1, level: 0 });
            }
            let ev = lycaon_ckks::Evaluator::without_keys(ctx);
            let sigma = ev.linear_transform_scale(ct, ctx.scale_at(ct.level() - 1)?)?;
            lt.prepare(ctx, ct.level(), sigma)
        })
        .map_err(ckks_err)
    }
    /// Encodes every diagonal for inputs at `level` on its canonical scale (what `prepare` does
    /// with a ciphertext there), so a server can prepare before any ciphertext arrives.
    fn prepare_at(&self, py: Python<'_>, level: usize) -> PyResult<()> {
        let (ctx, lt) = (&self.params.ctx, &self.lt);
        py.detach(|| {
            if level == 0 || level > ctx.max_level() {
                return Err(CkksError::InvalidArgument { what: format!("prepare_at: level {level} must be in 1..={}", ctx.max_level()) });
            }
            let sigma = ctx.scale_at(level - 1)? * ctx.prime_at(level)? as f64 / ctx.scale_at(level)?;
            lt.prepare(ctx, level, sigma)
        })
        .map_err(ckks_err)
    }
    /// M v in the clear (complex128), the reference the encrypted result approximates.
    fn apply_plain<'py>(&self, py: Python<'py>, values: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<Complex64>>> {
        let v = complex_values(values)?;
        if v.len() != self.lt.slots() {
            return Err(LycaonError::new_err(format!("{} values for a transform of {} slots", v.len(), self.lt.slots())));
        }
        let lt = &self.lt;
        let out = py.detach(|| lt.apply_plain(&v));
        Ok(PyArray1::from_vec(py, out))
    }
}

/// The shape of a bootstrappable parameter set and of its circuit.
#[pyclass(module = "lycaon._native", frozen)]
#[derive(Clone)]
pub struct CkksBootstrapParams {
    inner: lycaon_ckks::bootstrap::BootstrapParams,
}

#[pymethods]
impl CkksBootstrapParams {
    /// logN = 16, 2^15 slots, 10 residual levels at scale 2^40, 128-bit secure (log QP <= 1772),
    /// with sparse-secret encapsulation for ModRaise.
    #[staticmethod]
    fn logn16_full_slots() -> Self {
        Self { inner: lycaon_ckks::bootstrap::BootstrapParams::logn16_full_slots() }
    }
    /// The logN = 16 circuit at another ring degree and slot count. Parameters below logN = 16
    /// do not fit the 128-bit budget, so `parameters()` refuses them.
    #[staticmethod]
    fn toy(log_n: u32, log_slots: u32, residual_levels: usize) -> Self {
        Self { inner: lycaon_ckks::bootstrap::BootstrapParams::toy(log_n, log_slots, residual_levels) }
    }
    #[getter]
    fn log_n(&self) -> u32 {
        self.inner.log_n
    }
    #[getter]
    fn slots(&self) -> usize {
        self.inner.slots()
    }
    /// Levels left for computation after bootstrapping (the top residual level).
    #[getter]
    fn residual_levels(&self) -> usize {
        self.inner.residual_levels
    }
    #[getter]
    fn log_scale(&self) -> u32 {
        self.inner.log_scale
    }
    #[getter]
    fn top_level(&self) -> usize {
        self.inner.top_level()
    }
    /// Hamming weight of the ephemeral sparse secret used for ModRaise, or None.
    #[getter]
    fn encapsulation_weight(&self) -> Option<usize> {
        self.inner.encapsulation_weight
    }
    /// The CKKS parameters of the shape (128-bit security checked), with the top-level scale
    /// that puts the residual levels at 2^log_scale.
    fn parameters(&self, py: Python<'_>) -> PyResult<CkksParameters> {
        let lit = self.inner.literal().map_err(|e| ParameterError::new_err(e.to_string()))?;
        let scale = self.inner.top_scale(&lit);
        CkksParameters::build(py, lit, scale)
    }
    fn __repr__(&self) -> String {
        let b = &self.inner;
        format!("CkksBootstrapParams(log_n={}, slots={}, residual_levels={}, top_level={}, encapsulation_weight={:?})", b.log_n, b.slots(), b.residual_levels, b.top_level(), b.encapsulation_weight)
    }
}

/// Every key bootstrapping needs: evaluation keys (rotations by level, conjugation,
/// relinearisation) and the two sparse-secret encapsulation keys. Public material.
#[pyclass(module = "lycaon._native", frozen)]
pub struct CkksBootstrapKeys {
    keys: lycaon_ckks::bootstrap::BootstrapKeys,
    params: CkksParameters,
}

#[pymethods]
impl CkksBootstrapKeys {
    /// Versioned, checksummed bytes, every key seeded (about half the memory; pickling uses them
    /// too). What a client uploads once per session.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let (keys, params) = (&self.keys, &self.params.params);
        let bytes = py.detach(|| keys.to_bytes(params)).map_err(ckks_err)?;
        Ok(PyBytes::new(py, &bytes))
    }
    /// Parses bytes made by `to_bytes` under the same parameters.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, params: &CkksParameters, data: Cow<'_, [u8]>) -> PyResult<Self> {
        let (p, b) = (&params.params, &*data);
        let keys = py.detach(|| lycaon_ckks::bootstrap::BootstrapKeys::from_bytes(p, b)).map_err(ckks_err)?;
        Ok(Self { keys, params: params.clone() })
    }
    #[getter]
    fn params(&self) -> CkksParameters {
        self.params.clone()
    }
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (CkksParameters, Bound<'py, PyBytes>))> {
        Ok((py.get_type::<CkksBootstrapKeys>().getattr("from_bytes")?, (self.params.clone(), self.to_bytes(py)?)))
    }
    /// Bytes of all keys in memory (8 bytes per residue).
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.keys.memory_bytes()
    }
    /// Bytes of all keys serialised (seeded: uniform halves as 32-byte seeds).
    #[pyo3(signature = (seeded=true))]
    fn serialized_len(&self, seeded: bool) -> usize {
        self.keys.serialized_len(seeded)
    }
    /// The evaluation keys, for the `CkksEvaluator` that bootstrapping runs on.
    #[getter]
    fn evaluation_keys(&self) -> CkksEvaluationKeys {
        CkksEvaluationKeys { keys: self.keys.evaluation.clone() }
    }
    #[getter]
    fn galois_key_count(&self) -> usize {
        self.keys.evaluation.galois.as_ref().map_or(0, |g| g.galois_elements().count())
    }
}

/// The bootstrapping circuit (ModRaise, CoeffsToSlots, EvalMod, SlotsToCoeffs) for one
/// parameter set and shape. Server side: holds public keys only.
#[pyclass(module = "lycaon._native", frozen)]
pub struct CkksBootstrapper {
    params: CkksParameters,
    boot: std::sync::RwLock<Option<lycaon_ckks::bootstrap::Bootstrapper>>,
}

impl CkksBootstrapper {
    fn with<T>(&self, f: impl FnOnce(&lycaon_ckks::bootstrap::Bootstrapper) -> Result<T, CkksError>) -> PyResult<T> {
        let guard = self.boot.read().map_err(|_| LycaonError::new_err("the bootstrapper's lock is poisoned"))?;
        let boot = guard.as_ref().ok_or_else(|| LycaonError::new_err("the bootstrapper is being updated"))?;
        f(boot).map_err(ckks_err)
    }
}

#[pymethods]
impl CkksBootstrapper {
    /// Builds the transforms and the EvalMod polynomial for parameters made by `shape.parameters()`.
    #[new]
    fn new(py: Python<'_>, params: &CkksParameters, shape: &CkksBootstrapParams) -> PyResult<Self> {
        let (ctx, bp) = (&params.ctx, shape.inner.clone());
        let boot = py.detach(|| lycaon_ckks::bootstrap::Bootstrapper::new(ctx, bp)).map_err(ckks_err)?;
        Ok(Self { params: params.clone(), boot: std::sync::RwLock::new(Some(boot)) })
    }
    /// Generates the keys the circuit uses, each only up to the level where it is used (client
    /// side: uses the key generator's secret key).
    fn generate_keys(&self, py: Python<'_>, keygen: &mut CkksKeyGenerator) -> PyResult<CkksBootstrapKeys> {
        keygen.params.same(self.params.params.id(), "the key generator was")?;
        let (sk, s) = (&keygen.sk, &mut keygen.sampler);
        let keys = py.detach(|| self.with(|b| b.generate_keys(sk, s)))?;
        Ok(CkksBootstrapKeys { keys, params: self.params.clone() })
    }
    /// The bytes of the keys `generate_keys` makes (what `CkksBootstrapKeys.to_bytes` writes),
    /// made without holding the keys: each is written and dropped before the next (client side:
    /// about 2.5 GB at logN 16 instead of 6.9 GB of keys plus their bytes).
    fn generate_keys_bytes<'py>(&self, py: Python<'py>, keygen: &mut CkksKeyGenerator) -> PyResult<Bound<'py, PyBytes>> {
        keygen.params.same(self.params.params.id(), "the key generator was")?;
        let (sk, s) = (&keygen.sk, &mut keygen.sampler);
        let bytes = py.detach(|| self.with(|b| b.generate_keys_bytes(sk, s)))?;
        Ok(PyBytes::new(py, &bytes))
    }
    /// Attaches the encapsulation keys of `keys` (needed before `bootstrap`).
    fn attach_keys(&self, keys: &CkksBootstrapKeys) -> PyResult<()> {
        let mut guard = self.boot.write().map_err(|_| LycaonError::new_err("the bootstrapper's lock is poisoned"))?;
        let boot = guard.take().ok_or_else(|| LycaonError::new_err("the bootstrapper is being updated"))?;
        *guard = Some(boot.with_encapsulation_keys(keys.keys.encapsulation.clone()));
        Ok(())
    }
    /// The bytes in memory of the keys `generate_keys` makes, computed without making them.
    fn key_memory_estimate(&self) -> PyResult<usize> {
        self.with(|b| b.key_memory_estimate())
    }
    /// Number of (rotation, level) pairs the circuit uses.
    #[getter]
    fn rotation_count(&self) -> PyResult<usize> {
        self.with(|b| Ok(b.rotations().rotations.len()))
    }
    /// Refreshes `ciphertext` (the shape's slot count, any level) to the top residual level at
    /// its canonical scale; `evaluator` must hold the keys' `evaluation_keys`. `keys`: their
    /// encapsulation keys, in place of attached ones (a server's one bootstrapper serves every
    /// client's session). The first call also encodes the transforms' diagonals and keeps them.
    #[pyo3(signature = (evaluator, ciphertext, keys=None))]
    fn bootstrap(&self, py: Python<'_>, evaluator: &CkksEvaluator, ciphertext: &CkksCiphertext, keys: Option<&CkksBootstrapKeys>) -> PyResult<CkksCiphertext> {
        if let Some(k) = keys {
            k.params.same(self.params.params.id(), "the bootstrapping keys were")?;
        }
        let (ev, ct) = (&evaluator.ev, &ciphertext.inner);
        let out = py.detach(|| {
            self.with(|b| match keys {
                Some(k) => b.bootstrap_with(ev, ct, k.keys.encapsulation.as_ref()),
                None => b.bootstrap(ev, ct),
            })
        })?;
        Ok(CkksCiphertext::wrap(&self.params, out))
    }
}

/// Threads of the pool the CKKS evaluator runs on (rayon's global pool; RAYON_NUM_THREADS,
/// read when the pool first starts, sets it).
#[pyfunction]
pub fn ckks_threads() -> usize {
    rayon::current_num_threads()
}

/// Chebyshev coefficients of f on [a, b] at `degree` (interpolation at Chebyshev nodes).
#[pyfunction]
pub fn chebyshev_coefficients(f: &Bound<'_, PyAny>, a: f64, b: f64, degree: usize) -> PyResult<Vec<f64>> {
    let err: std::cell::RefCell<Option<PyErr>> = std::cell::RefCell::new(None);
    let c = lycaon_ckks::chebyshev_coefficients(
        |x| match f.call1((x,)).and_then(|v| v.extract::<f64>()) {
            Ok(v) => v,
            Err(e) => {
                err.borrow_mut().get_or_insert(e);
                0.0
            }
        },
        a,
        b,
        degree,
    );
    match err.into_inner() {
        Some(e) => Err(e),
        None => Ok(c),
    }
}

/// The composite minimax sign for ReLU of these stage degrees (odd; gap chosen for ReLU's
/// error): {"stages": Chebyshev coefficients on [-1, 1] per stage, "low", "sign_error",
/// "relu_error", "depth"}. None for `degrees` gives Lee et al.'s 15, 15, 27.
#[pyfunction]
#[pyo3(signature = (degrees=None))]
pub fn composite_relu<'py>(py: Python<'py>, degrees: Option<Vec<usize>>) -> PyResult<Bound<'py, PyDict>> {
    let degrees = degrees.unwrap_or_else(|| lycaon_ckks::LEE_ALPHA13_DEGREES.to_vec());
    let (sign, relu_error) = py.detach(|| lycaon_ckks::CompositeSign::for_relu(&degrees)).map_err(ckks_err)?;
    let d = PyDict::new(py);
    d.set_item("stages", sign.stages.iter().map(|p| p.coeffs.clone()).collect::<Vec<_>>())?;
    d.set_item("low", sign.low)?;
    d.set_item("sign_error", sign.error)?;
    d.set_item("relu_error", relu_error)?;
    d.set_item("depth", sign.depth() + 1)?;
    Ok(d)
}

/// Precision in bits of `got` against `expected` (real or complex): min, mean, median, max.
#[pyfunction]
pub fn precision_stats<'py>(py: Python<'py>, expected: &Bound<'py, PyAny>, got: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let (e, g) = (complex_values(expected)?, complex_values(got)?);
    let s = lycaon_ckks::precision_stats_complex(&e, &g);
    let d = PyDict::new(py);
    d.set_item("min_bits", s.min_bits)?;
    d.set_item("mean_bits", s.mean_bits)?;
    d.set_item("median_bits", s.median_bits)?;
    d.set_item("max_bits", s.max_bits)?;
    d.set_item("max_error", s.max_error)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CkksParameters>()?;
    m.add_class::<CkksSecretKey>()?;
    m.add_class::<CkksPublicKey>()?;
    m.add_class::<CkksRelinKey>()?;
    m.add_class::<CkksGaloisKeys>()?;
    m.add_class::<CkksEvaluationKeys>()?;
    m.add_class::<CkksKeyGenerator>()?;
    m.add_class::<CkksPlaintext>()?;
    m.add_class::<CkksCiphertext>()?;
    m.add_class::<CkksSeededCiphertext>()?;
    m.add_class::<CkksEncoder>()?;
    m.add_class::<CkksPublicEncryptor>()?;
    m.add_class::<CkksSecretEncryptor>()?;
    m.add_class::<CkksDecryptor>()?;
    m.add_class::<CkksEvaluator>()?;
    m.add_class::<CkksLinearTransform>()?;
    m.add_class::<CkksBootstrapParams>()?;
    m.add_class::<CkksBootstrapKeys>()?;
    m.add_class::<CkksBootstrapper>()?;
    m.add_function(wrap_pyfunction!(ckks_threads, m)?)?;
    m.add_function(wrap_pyfunction!(chebyshev_coefficients, m)?)?;
    m.add_function(wrap_pyfunction!(composite_relu, m)?)?;
    m.add_function(wrap_pyfunction!(precision_stats, m)?)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// FHE-mode network layers (lycaon-nn's fhe module): multiplexed packing, MPConv, pool + fc

fn fhe_err(e: lycaon_nn::fhe::FheError) -> PyErr {
    match e {
        lycaon_nn::fhe::FheError::Ckks(c) => ckks_err(c),
        other => LycaonError::new_err(other.to_string()),
    }
}

fn layout(channels: usize, height: usize, width: usize, gap: usize, slots: usize) -> PyResult<lycaon_nn::fhe::MultiplexedLayout> {
    lycaon_nn::fhe::MultiplexedLayout::new(channels, height, width, gap, slots).map_err(fhe_err)
}

fn layout_tuple(l: &lycaon_nn::fhe::MultiplexedLayout) -> (usize, usize, usize, usize, usize) {
    (l.channels, l.height, l.width, l.gap, l.slots)
}

/// The multiplexed packing of a (C, h, w) tensor at gap k into `slots` slots, every copy filled
/// (h, w, k, slots powers of two): the slot vector, ready to encode.
#[pyfunction]
pub fn multiplexed_pack<'py>(py: Python<'py>, channels: usize, height: usize, width: usize, gap: usize, slots: usize, tensor: PyReadonlyArray1<'py, f64>) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let l = layout(channels, height, width, gap, slots)?;
    Ok(PyArray1::from_vec(py, l.pack(tensor.as_slice()?).map_err(fhe_err)?))
}

/// The (C, h, w) tensor (flattened) read back from copy 0 of decoded slots.
#[pyfunction]
pub fn multiplexed_unpack<'py>(py: Python<'py>, channels: usize, height: usize, width: usize, gap: usize, slots: usize, values: PyReadonlyArray1<'py, f64>) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let l = layout(channels, height, width, gap, slots)?;
    Ok(PyArray1::from_vec(py, l.unpack(values.as_slice()?).map_err(fhe_err)?))
}

/// Multiplexed parallel convolution (Lee et al. 2022) on one ciphertext: padding f/2, stride 1
/// or 2, two levels; the output is in the layout `output_layout` (gap times the stride).
#[pyclass(module = "lycaon._native", frozen)]
pub struct FheMpConv {
    conv: lycaon_nn::fhe::MpConv,
}

#[pymethods]
impl FheMpConv {
    /// `input` = (C, h, w, gap, slots); `weights` = [C_out][C][f][f] flattened.
    #[new]
    fn new(input: (usize, usize, usize, usize, usize), c_out: usize, kernel: usize, stride: usize, weights: PyReadonlyArray1<'_, f64>) -> PyResult<Self> {
        let l = layout(input.0, input.1, input.2, input.3, input.4)?;
        Ok(Self { conv: lycaon_nn::fhe::MpConv::new(l, c_out, kernel, stride, weights.as_slice()?).map_err(fhe_err)? })
    }
    #[getter]
    fn output_layout(&self) -> (usize, usize, usize, usize, usize) {
        layout_tuple(self.conv.output_layout())
    }
    fn rotation_steps(&self) -> Vec<i64> {
        self.conv.rotation_steps()
    }
    /// (rotations, plaintext products, rescales, depth) from the algorithm's structure.
    fn counts(&self) -> (u64, u64, u64, u64) {
        let c = self.conv.counts();
        (c.rotations, c.plain_mults, c.rescales, c.depth)
    }
    fn evaluate(&self, py: Python<'_>, evaluator: &CkksEvaluator, ciphertext: &CkksCiphertext) -> PyResult<CkksCiphertext> {
        let ops = lycaon_nn::fhe::FheOps::new(evaluator.ev.clone());
        let (conv, ct) = (&self.conv, &ciphertext.inner);
        let out = py.detach(|| conv.evaluate(&ops, ct)).map_err(fhe_err)?;
        Ok(CkksCiphertext::wrap(&evaluator.params, out))
    }
}

/// HyPHEN's CAConv: a convolution from the gap-1 multiplexed packing (CA, one ciphertext) to the
/// RA packing (one ciphertext per output channel, the channel replicated), stride 1, padding
/// f/2, one level.
#[pyclass(module = "lycaon._native", frozen)]
pub struct FheCaConv {
    conv: lycaon_nn::fhe::CaConv,
}

#[pymethods]
impl FheCaConv {
    /// `input` = (C, h, w, 1, slots); `weights` = [C_out][C][f][f] flattened.
    #[new]
    fn new(input: (usize, usize, usize, usize, usize), c_out: usize, kernel: usize, weights: PyReadonlyArray1<'_, f64>) -> PyResult<Self> {
        let l = layout(input.0, input.1, input.2, input.3, input.4)?;
        Ok(Self { conv: lycaon_nn::fhe::CaConv::new(l, c_out, kernel, weights.as_slice()?).map_err(fhe_err)? })
    }
    fn rotation_steps(&self) -> Vec<i64> {
        self.conv.rotation_steps()
    }
    /// (rotations, plaintext products, rescales, depth) from the algorithm's structure.
    fn counts(&self) -> (u64, u64, u64, u64) {
        let c = self.conv.counts();
        (c.rotations, c.plain_mults, c.rescales, c.depth)
    }
    fn evaluate(&self, py: Python<'_>, evaluator: &CkksEvaluator, ciphertext: &CkksCiphertext) -> PyResult<Vec<CkksCiphertext>> {
        let ops = lycaon_nn::fhe::FheOps::new(evaluator.ev.clone());
        let (conv, ct) = (&self.conv, &ciphertext.inner);
        let out = py.detach(|| conv.evaluate(&ops, ct)).map_err(fhe_err)?;
        Ok(out.into_iter().map(|c| CkksCiphertext::wrap(&evaluator.params, c)).collect())
    }
}

/// HyPHEN's RAConv: a convolution from the RA packing (one ciphertext per input channel) to the
/// gap-1 multiplexed packing (CA), stride 1, padding f/2, one level.
#[pyclass(module = "lycaon._native", frozen)]
pub struct FheRaConv {
    conv: lycaon_nn::fhe::RaConv,
}

#[pymethods]
impl FheRaConv {
    /// `c_in` RA channels of h x w in `slots` slots; `weights` = [C_out][C_in][f][f] flattened.
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(c_in: usize, height: usize, width: usize, slots: usize, c_out: usize, kernel: usize, weights: PyReadonlyArray1<'_, f64>) -> PyResult<Self> {
        Ok(Self { conv: lycaon_nn::fhe::RaConv::new(c_in, height, width, slots, c_out, kernel, weights.as_slice()?).map_err(fhe_err)? })
    }
    #[getter]
    fn output_layout(&self) -> (usize, usize, usize, usize, usize) {
        layout_tuple(self.conv.output_layout())
    }
    fn rotation_steps(&self) -> Vec<i64> {
        self.conv.rotation_steps()
    }
    /// (rotations, plaintext products, rescales, depth) from the algorithm's structure.
    fn counts(&self) -> (u64, u64, u64, u64) {
        let c = self.conv.counts();
        (c.rotations, c.plain_mults, c.rescales, c.depth)
    }
    fn evaluate(&self, py: Python<'_>, evaluator: &CkksEvaluator, ciphertexts: Vec<PyRef<'_, CkksCiphertext>>) -> PyResult<CkksCiphertext> {
        let ops = lycaon_nn::fhe::FheOps::new(evaluator.ev.clone());
        let inputs: Vec<_> = ciphertexts.iter().map(|c| c.inner.clone()).collect();
        let conv = &self.conv;
        let out = py.detach(|| conv.evaluate(&ops, &inputs)).map_err(fhe_err)?;
        Ok(CkksCiphertext::wrap(&evaluator.params, out))
    }
}

/// Global average pooling into a fully connected layer on a multiplexed packing (one level);
/// the logits land in slots 0..n_out.
#[pyclass(module = "lycaon._native", frozen)]
pub struct FheAvgPoolFc {
    layer: lycaon_nn::fhe::AvgPoolFc,
}

#[pymethods]
impl FheAvgPoolFc {
    /// `input` = (C, h, w, gap, slots); `weights` = [n_out][C] flattened; `bias` n_out values.
    #[new]
    fn new(py: Python<'_>, params: &CkksParameters, input: (usize, usize, usize, usize, usize), n_out: usize, weights: PyReadonlyArray1<'_, f64>, bias: PyReadonlyArray1<'_, f64>) -> PyResult<Self> {
        let l = layout(input.0, input.1, input.2, input.3, input.4)?;
        let (w, b) = (weights.as_slice()?.to_vec(), bias.as_slice()?.to_vec());
        let ctx = &params.ctx;
        Ok(Self { layer: py.detach(|| lycaon_nn::fhe::AvgPoolFc::new(ctx, l, n_out, &w, &b)).map_err(fhe_err)? })
    }
    fn rotation_steps(&self) -> Vec<i64> {
        self.layer.rotation_steps()
    }
    fn evaluate(&self, py: Python<'_>, evaluator: &CkksEvaluator, ciphertext: &CkksCiphertext) -> PyResult<CkksCiphertext> {
        let ops = lycaon_nn::fhe::FheOps::new(evaluator.ev.clone());
        let (layer, ct) = (&self.layer, &ciphertext.inner);
        let out = py.detach(|| layer.evaluate(&ops, ct)).map_err(fhe_err)?;
        Ok(CkksCiphertext::wrap(&evaluator.params, out))
    }
}

pub fn register_fhe(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FheMpConv>()?;
    m.add_class::<FheCaConv>()?;
    m.add_class::<FheRaConv>()?;
    m.add_class::<FheAvgPoolFc>()?;
    m.add_function(wrap_pyfunction!(multiplexed_pack, m)?)?;
    m.add_function(wrap_pyfunction!(multiplexed_unpack, m)?)?;
    Ok(())
}
