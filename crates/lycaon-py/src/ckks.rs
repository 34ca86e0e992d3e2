//! Bindings of the CKKS scheme's client side: parameters, keys, encoding of float64/complex128
//! vectors, encryption and decryption, and what the Python compilers read at compile time
//! (linear transforms' rotation steps, bootstrappable shapes, the FHE layers' keys and counts)
//! and precision in bits. Homomorphic evaluation is not bound: it runs in the runtime
//! (`lycaon_runtime::fhe`, on `lycaon_ckks::Evaluator`). Long calls release the GIL; objects
//! pickle through the versioned wire format.

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
    /// 2, or 3 after a product without relinearisation.
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
// Linear transforms and bootstrapping shapes (compile time)

/// A plaintext matrix by its non-zero diagonals, with its baby-step giant-step split: the
/// rotation steps its evaluation (in the runtime) needs keys for, and its product in the clear.
#[pyclass(module = "lycaon._native", frozen)]
pub struct CkksLinearTransform {
    lt: lycaon_ckks::LinearTransform,
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
        Ok(Self { lt })
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

/// Threads of the pool CKKS evaluation runs on in this process (the runtime's CPU backend on
/// rayon's global pool; RAYON_NUM_THREADS, read when the pool first starts, sets it).
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
    m.add_class::<CkksKeyGenerator>()?;
    m.add_class::<CkksPlaintext>()?;
    m.add_class::<CkksCiphertext>()?;
    m.add_class::<CkksSeededCiphertext>()?;
    m.add_class::<CkksEncoder>()?;
    m.add_class::<CkksPublicEncryptor>()?;
    m.add_class::<CkksSecretEncryptor>()?;
    m.add_class::<CkksDecryptor>()?;
    m.add_class::<CkksLinearTransform>()?;
    m.add_class::<CkksBootstrapParams>()?;
    m.add_function(wrap_pyfunction!(ckks_threads, m)?)?;
    m.add_function(wrap_pyfunction!(chebyshev_coefficients, m)?)?;
    m.add_function(wrap_pyfunction!(composite_relu, m)?)?;
    m.add_function(wrap_pyfunction!(precision_stats, m)?)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// FHE-mode network layers (lycaon-nn's fhe module): multiplexed packing, MPConv, CAConv/RAConv,
// pool + fc, for the compiler (layouts, rotation steps, counts); the runtime evaluates them

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

/// A multiplexed convolution on one ciphertext: padding f/2, stride 1 or 2, two levels; the
/// output is in the layout `output_layout` (gap times the stride). `method`: "mpconv" (Lee et al.
/// 2022), "bsgs" (block diagonals by baby and giant steps) or "auto" (the lower estimated time,
/// what the compiler takes).
#[pyclass(module = "lycaon._native", frozen)]
pub struct FheMpConv {
    conv: lycaon_nn::fhe::MultiplexedConv,
}

#[pymethods]
impl FheMpConv {
    /// `input` = (C, h, w, gap, slots); `weights` = [C_out][C][f][f] flattened.
    #[new]
    #[pyo3(signature = (input, c_out, kernel, stride, weights, method = "auto"))]
    fn new(input: (usize, usize, usize, usize, usize), c_out: usize, kernel: usize, stride: usize, weights: PyReadonlyArray1<'_, f64>, method: &str) -> PyResult<Self> {
        use lycaon_nn::fhe::{ConvMethod, MultiplexedConv};
        let l = layout(input.0, input.1, input.2, input.3, input.4)?;
        let w = weights.as_slice()?;
        let conv = match method {
            "auto" => MultiplexedConv::cheapest(l, c_out, kernel, stride, w, None),
            name => ConvMethod::parse(name).and_then(|m| MultiplexedConv::with_method(m, l, c_out, kernel, stride, w, None)),
        }
        .map_err(fhe_err)?;
        Ok(Self { conv })
    }
    #[getter]
    fn output_layout(&self) -> (usize, usize, usize, usize, usize) {
        layout_tuple(self.conv.output_layout())
    }
    /// "mpconv" or "bsgs".
    #[getter]
    fn method(&self) -> &'static str {
        self.conv.method().name()
    }
    fn rotation_steps(&self) -> Vec<i64> {
        self.conv.rotation_steps()
    }
    /// (rotations, plaintext products, rescales, depth) from the algorithm's structure.
    fn counts(&self) -> (u64, u64, u64, u64) {
        let c = self.conv.counts();
        (c.rotations, c.plain_mults, c.rescales, c.depth)
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
