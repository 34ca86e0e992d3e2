//! Python bindings of Lycaon: conversions, GIL release around heavy calls, and error mapping.
//! Nothing here computes; the Rust crates do.
// PyO3's macros expand to unsafe FFI glue; no hand-written unsafe code lives in this crate.
#![allow(unsafe_code)]

use std::sync::Arc;

use lycaon_bfv::rlwe::{self, RlweError};
use lycaon_bfv::{BfvError, BfvContext};
use lycaon_math::Sampler;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

// Allocation dominated key switching with the system allocator (page faults on every large
// polynomial); mimalloc reuses memory and halves rotation time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

create_exception!(_native, LycaonError, PyValueError, "Base class of every Lycaon error.");
create_exception!(_native, ParameterError, LycaonError, "Invalid encryption parameters.");
create_exception!(_native, SecurityError, ParameterError, "Parameters below 128-bit security.");
create_exception!(_native, SerializationError, LycaonError, "Bytes that are not a valid Lycaon object.");
create_exception!(_native, MissingKeyError, LycaonError, "An evaluation key the operation needs is absent.");

fn rlwe_err(e: RlweError) -> PyErr {
    let msg = e.to_string();
    match e {
        RlweError::Insecure { .. } => SecurityError::new_err(msg),
        RlweError::InvalidParameters { .. } => ParameterError::new_err(msg),
        RlweError::Wire(_) => SerializationError::new_err(msg),
        RlweError::MissingGaloisKey { .. } | RlweError::NoSpecialPrimes => MissingKeyError::new_err(msg),
        _ => LycaonError::new_err(msg),
    }
}

fn bfv_err(e: BfvError) -> PyErr {
    match e {
        BfvError::Rlwe(r) => rlwe_err(r),
        other => LycaonError::new_err(other.to_string()),
    }
}

fn sampler() -> PyResult<Sampler> {
    Sampler::from_os().map_err(|e| LycaonError::new_err(e.to_string()))
}

/// BFV encryption parameters, validated at 128-bit security.
#[pyclass(module = "lycaon._native", frozen)]
#[derive(Clone)]
struct BfvParameters {
    params: Arc<rlwe::Parameters>,
    ctx: Arc<BfvContext>,
}

impl BfvParameters {
    fn build(lit: rlwe::ParametersLiteral) -> PyResult<Self> {
        let params = rlwe::Parameters::new(lit).map_err(rlwe_err)?;
        let ctx = BfvContext::new(&params).map_err(bfv_err)?;
        Ok(Self { params, ctx })
    }
}

#[pymethods]
impl BfvParameters {
    #[new]
    #[pyo3(signature = (n, ciphertext_moduli, special_moduli, plaintext_modulus, key_switch_digits=None))]
    fn new(n: usize, ciphertext_moduli: Vec<u64>, special_moduli: Vec<u64>, plaintext_modulus: u64, key_switch_digits: Option<usize>) -> PyResult<Self> {
        let digits = key_switch_digits.unwrap_or(ciphertext_moduli.len());
        Self::build(rlwe::ParametersLiteral {
            n,
            ciphertext_moduli,
            special_moduli,
            plaintext_modulus: Some(plaintext_modulus),
            key_switch_digits: digits,
            security: rlwe::Security::Bits128,
        })
    }

    /// The default set for n (largest 128-bit modulus, SEAL's split, 20-bit batching t).
    #[staticmethod]
    fn default(n: usize) -> PyResult<Self> {
        Self::build(rlwe::ParametersLiteral::bfv_default(n).map_err(rlwe_err)?)
    }

    /// Primes generated from bit sizes (largest NTT-friendly primes below each size).
    #[staticmethod]
    #[pyo3(signature = (n, q_bits, p_bits, t_bits, key_switch_digits=None))]
    fn from_bits(n: usize, q_bits: Vec<u32>, p_bits: Vec<u32>, t_bits: u32, key_switch_digits: Option<usize>) -> PyResult<Self> {
        let mut lit = rlwe::ParametersLiteral::bfv_from_bits(n, &q_bits, &p_bits, t_bits).map_err(rlwe_err)?;
        if let Some(d) = key_switch_digits {
            lit.key_switch_digits = d;
        }
        Self::build(lit)
    }

    #[getter]
    fn n(&self) -> usize {
        self.params.n()
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
    fn plaintext_modulus(&self) -> u64 {
        self.ctx.plaintext_modulus()
    }
    #[getter]
    fn key_switch_digits(&self) -> usize {
        self.params.literal().key_switch_digits
    }
    #[getter]
    fn max_level(&self) -> usize {
        self.params.max_level()
    }
    #[getter]
    fn log2_qp(&self) -> f64 {
        self.params.log2_qp()
    }
    #[getter]
    fn id(&self) -> String {
        self.params.id().iter().map(|b| format!("{b:02x}")).collect()
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.params.to_bytes())
    }

    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        let params = rlwe::Parameters::from_bytes(data).map_err(rlwe_err)?;
        let ctx = BfvContext::new(&params).map_err(bfv_err)?;
        Ok(Self { params, ctx })
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let cls = py.get_type::<BfvParameters>();
        Ok((cls.getattr("from_bytes")?, (self.to_bytes(py),)))
    }

    fn __repr__(&self) -> String {
        format!(
            "BfvParameters(n={}, log2_qp={:.1}, primes={}+{}, t={}, digits={})",
            self.params.n(),
            self.params.log2_qp(),
            self.params.literal().ciphertext_moduli.len(),
            self.params.literal().special_moduli.len(),
            self.ctx.plaintext_modulus(),
            self.params.literal().key_switch_digits
        )
    }
}

/// Objects with a wire form, parsed under given parameters.
trait WireObject: Sized + Send + Sync {
    fn encode(&self) -> Vec<u8>;
    fn parse(params: &Arc<rlwe::Parameters>, bytes: &[u8]) -> PyResult<Self>;
}

macro_rules! rlwe_wire {
    ($($ty:ty),*) => {$(
        impl WireObject for $ty {
            fn encode(&self) -> Vec<u8> {
                self.to_bytes()
            }
            fn parse(params: &Arc<rlwe::Parameters>, bytes: &[u8]) -> PyResult<Self> {
                <$ty>::from_bytes(params, bytes).map_err(rlwe_err)
            }
        }
    )*};
}
rlwe_wire!(rlwe::SecretKey, rlwe::PublicKey, rlwe::RelinKey, rlwe::GaloisKeys, rlwe::SeededCiphertext, rlwe::Ciphertext);

macro_rules! bfv_wire {
    ($($ty:ty),*) => {$(
        impl WireObject for $ty {
            fn encode(&self) -> Vec<u8> {
                self.to_bytes()
            }
            fn parse(params: &Arc<rlwe::Parameters>, bytes: &[u8]) -> PyResult<Self> {
                <$ty>::from_bytes(params, bytes).map_err(bfv_err)
            }
        }
    )*};
}
bfv_wire!(lycaon_bfv::Plaintext, lycaon_bfv::PreparedPlaintext);

/// A Python class around a wire object: bytes in and out, and pickling through the wire format
/// (the parameters travel with the object, so multiprocessing and Ray work).
macro_rules! wire_object {
    ($name:ident, $inner:ty, $doc:literal $(, { $($extra:tt)* })?) => {
        #[doc = $doc]
        #[pyclass(module = "lycaon._native", frozen)]
        #[derive(Clone)]
        struct $name {
            inner: Arc<$inner>,
            params: BfvParameters,
        }

        impl $name {
            fn wrap(params: &BfvParameters, inner: $inner) -> Self {
                Self { inner: Arc::new(inner), params: params.clone() }
            }
        }

        #[pymethods]
        impl $name {
            /// Versioned, checksummed bytes.
            fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
                let inner = self.inner.clone();
                let bytes = py.detach(move || inner.encode());
                PyBytes::new(py, &bytes)
            }

            /// Parses bytes made by `to_bytes` under the same parameters.
            #[staticmethod]
            fn from_bytes(py: Python<'_>, params: &BfvParameters, data: &[u8]) -> PyResult<Self> {
                let p = params.params.clone();
                let data = data.to_vec();
                let inner = py.detach(move || <$inner as WireObject>::parse(&p, &data))?;
                Ok(Self::wrap(params, inner))
            }

            /// The parameters this object belongs to.
            #[getter]
            fn params(&self) -> BfvParameters {
                self.params.clone()
            }

            fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (BfvParameters, Bound<'py, PyBytes>))> {
                let cls = py.get_type::<$name>();
                Ok((cls.getattr("from_bytes")?, (self.params.clone(), self.to_bytes(py))))
            }

            $($($extra)*)?
        }
    };
}

wire_object!(SecretKey, rlwe::SecretKey, "The secret key. It stays with the client.");
wire_object!(PublicKey, rlwe::PublicKey, "The public encryption key.");
wire_object!(RelinKey, rlwe::RelinKey, "The relinearisation key (evaluation key).");
wire_object!(GaloisKeys, rlwe::GaloisKeys, "Rotation keys for a set of Galois elements.", {
    #[getter]
    fn galois_elements(&self) -> Vec<u64> {
        self.inner.galois_elements().collect()
    }
    fn __len__(&self) -> usize {
        self.inner.len()
    }
});
wire_object!(SeededCiphertext, rlwe::SeededCiphertext, "A fresh symmetric ciphertext sent as (c0, seed).", {
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
    /// The full ciphertext, with c1 expanded from the seed.
    fn expand(&self, params: &BfvParameters) -> PyResult<Ciphertext> {
        Ok(Ciphertext::wrap(params, self.inner.expand(&params.params).map_err(rlwe_err)?))
    }
});

wire_object!(Ciphertext, rlwe::Ciphertext, "A BFV ciphertext (NTT form over Q_level).", {
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
    /// Number of polynomials (3 after an unrelinearised product).
    #[getter]
    fn size(&self) -> usize {
        self.inner.len()
    }
    fn __repr__(&self) -> String {
        format!("Ciphertext(level={}, size={})", self.inner.level(), self.inner.len())
    }
});

wire_object!(Plaintext, lycaon_bfv::Plaintext, "A plaintext polynomial with coefficients modulo t.", {
    fn coefficients<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, self.inner.coeffs())
    }
});

wire_object!(PreparedPlaintext, lycaon_bfv::PreparedPlaintext, "A plaintext lifted to Q_level and transformed once, for repeated products with ciphertexts.", {
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
});

/// Makes and keeps the secret key; hands out public and evaluation keys.
#[pyclass(module = "lycaon._native")]
struct KeyGenerator {
    params: BfvParameters,
    sk: Arc<rlwe::SecretKey>,
    sampler: Sampler,
}

#[pymethods]
impl KeyGenerator {
    #[new]
    fn new(py: Python<'_>, params: &BfvParameters) -> PyResult<Self> {
        let mut sampler = sampler()?;
        let p = params.params.clone();
        let sk = py.detach(|| rlwe::SecretKey::generate(&p, &mut sampler)).map_err(rlwe_err)?;
        Ok(Self { params: params.clone(), sk: Arc::new(sk), sampler })
    }
    fn secret_key(&self) -> SecretKey {
        SecretKey { inner: self.sk.clone(), params: self.params.clone() }
    }
    fn public_key(&mut self, py: Python<'_>) -> PyResult<PublicKey> {
        let (sk, s) = (&self.sk, &mut self.sampler);
        Ok(PublicKey::wrap(&self.params, py.detach(|| rlwe::PublicKey::generate(sk, s)).map_err(rlwe_err)?))
    }
    fn relin_key(&mut self, py: Python<'_>) -> PyResult<RelinKey> {
        let (sk, s) = (&self.sk, &mut self.sampler);
        Ok(RelinKey::wrap(&self.params, py.detach(|| rlwe::RelinKey::generate(sk, s)).map_err(rlwe_err)?))
    }
    /// Keys for row rotations by `steps` (and the row swap when asked).
    #[pyo3(signature = (steps, row_swap=false))]
    fn galois_keys(&mut self, py: Python<'_>, steps: Vec<i64>, row_swap: bool) -> PyResult<GaloisKeys> {
        let (sk, s) = (&self.sk, &mut self.sampler);
        Ok(GaloisKeys::wrap(&self.params, py.detach(|| rlwe::GaloisKeys::for_rotations(sk, &steps, row_swap, s)).map_err(rlwe_err)?))
    }
    #[getter]
    fn params(&self) -> BfvParameters {
        self.params.clone()
    }
}

/// Encrypts with the public key, or symmetrically (seeded) with the secret key.
#[pyclass(module = "lycaon._native")]
struct Encryptor {
    params: BfvParameters,
    enc: lycaon_bfv::Encryptor,
    pk: Option<Arc<rlwe::PublicKey>>,
    sk: Option<Arc<rlwe::SecretKey>>,
}

#[pymethods]
impl Encryptor {
    #[new]
    #[pyo3(signature = (params, public_key=None, secret_key=None))]
    fn new(params: &BfvParameters, public_key: Option<PyRef<'_, PublicKey>>, secret_key: Option<PyRef<'_, SecretKey>>) -> PyResult<Self> {
        if public_key.is_none() && secret_key.is_none() {
            return Err(LycaonError::new_err("an Encryptor needs a public key, a secret key, or both"));
        }
        Ok(Self {
            params: params.clone(),
            enc: lycaon_bfv::Encryptor::new(&params.ctx).map_err(bfv_err)?,
            pk: public_key.map(|k| k.inner.clone()),
            sk: secret_key.map(|k| k.inner.clone()),
        })
    }
    /// Public-key encryption.
    fn encrypt(&mut self, py: Python<'_>, plaintext: &Plaintext) -> PyResult<Ciphertext> {
        let pk = self.pk.clone().ok_or_else(|| MissingKeyError::new_err("this Encryptor has no public key"))?;
        let enc = &mut self.enc;
        let ct = py.detach(|| enc.encrypt(&pk, &plaintext.inner)).map_err(bfv_err)?;
        Ok(Ciphertext::wrap(&self.params, ct))
    }
    /// Symmetric encryption, seeded (half the bytes on the wire).
    fn encrypt_symmetric(&mut self, py: Python<'_>, plaintext: &Plaintext) -> PyResult<SeededCiphertext> {
        let sk = self.sk.clone().ok_or_else(|| MissingKeyError::new_err("this Encryptor has no secret key"))?;
        let enc = &mut self.enc;
        let ct = py.detach(|| enc.encrypt_symmetric(&sk, &plaintext.inner)).map_err(bfv_err)?;
        Ok(SeededCiphertext::wrap(&self.params, ct))
    }
}

/// Decrypts and measures the noise budget (client side: holds the secret key).
#[pyclass(module = "lycaon._native", frozen)]
struct Decryptor {
    dec: lycaon_bfv::Decryptor,
    params: BfvParameters,
}

#[pymethods]
impl Decryptor {
    #[new]
    fn new(params: &BfvParameters, secret_key: &SecretKey) -> PyResult<Self> {
        Ok(Self { dec: lycaon_bfv::Decryptor::new(&params.ctx, secret_key.inner.clone()).map_err(bfv_err)?, params: params.clone() })
    }
    fn decrypt(&self, py: Python<'_>, ciphertext: &Ciphertext) -> PyResult<Plaintext> {
        let pt = py.detach(|| self.dec.decrypt(&ciphertext.inner)).map_err(bfv_err)?;
        Ok(Plaintext::wrap(&self.params, pt))
    }
    /// Invariant noise budget in bits (decryption is correct while it is positive).
    fn noise_budget(&self, py: Python<'_>, ciphertext: &Ciphertext) -> PyResult<f64> {
        py.detach(|| self.dec.noise_budget(&ciphertext.inner)).map_err(bfv_err)
    }
}

/// Homomorphic operations; holds no secret.
#[pyclass(module = "lycaon._native", frozen)]
struct Evaluator {
    params: BfvParameters,
    ev: lycaon_bfv::Evaluator,
}



impl Evaluator {
    fn out(&self, r: Result<rlwe::Ciphertext, BfvError>) -> PyResult<Ciphertext> {
        r.map(|c| Ciphertext::wrap(&self.params, c)).map_err(bfv_err)
    }
}

#[pymethods]
impl Evaluator {
    #[new]
    fn new(params: &BfvParameters) -> Self {
        Self { params: params.clone(), ev: lycaon_bfv::Evaluator::new(&params.ctx) }
    }
    fn add(&self, a: &Ciphertext, b: &Ciphertext) -> PyResult<Ciphertext> {
        self.out(self.ev.add(&a.inner, &b.inner))
    }
    fn sub(&self, a: &Ciphertext, b: &Ciphertext) -> PyResult<Ciphertext> {
        self.out(self.ev.sub(&a.inner, &b.inner))
    }
    fn negate(&self, a: &Ciphertext) -> PyResult<Ciphertext> {
        self.out(self.ev.negate(&a.inner))
    }
    fn add_plain(&self, a: &Ciphertext, p: &Plaintext) -> PyResult<Ciphertext> {
        self.out(self.ev.add_plain(&a.inner, &p.inner))
    }
    fn sub_plain(&self, a: &Ciphertext, p: &Plaintext) -> PyResult<Ciphertext> {
        self.out(self.ev.sub_plain(&a.inner, &p.inner))
    }
    fn mul_plain(&self, py: Python<'_>, a: &Ciphertext, p: &Plaintext) -> PyResult<Ciphertext> {
        self.out(py.detach(|| self.ev.mul_plain(&a.inner, &p.inner)))
    }
    /// Lifts and transforms a plaintext once for many mul_plain_prepared calls at `level`.
    #[pyo3(signature = (p, level=None))]
    fn prepare_plain(&self, p: &Plaintext, level: Option<usize>) -> PyResult<PreparedPlaintext> {
        let level = level.unwrap_or(self.params.params.max_level());
        Ok(PreparedPlaintext::wrap(&self.params, self.ev.prepare_plain(&p.inner, level).map_err(bfv_err)?))
    }
    fn mul_plain_prepared(&self, a: &Ciphertext, p: &PreparedPlaintext) -> PyResult<Ciphertext> {
        self.out(self.ev.mul_plain_prepared(&a.inner, &p.inner))
    }
    fn mul_scalar(&self, a: &Ciphertext, scalar: i64) -> PyResult<Ciphertext> {
        self.out(self.ev.mul_scalar(&a.inner, scalar))
    }
    /// Product without relinearisation (3 parts).
    fn multiply(&self, py: Python<'_>, a: &Ciphertext, b: &Ciphertext) -> PyResult<Ciphertext> {
        self.out(py.detach(|| self.ev.multiply(&a.inner, &b.inner)))
    }
    fn multiply_relin(&self, py: Python<'_>, a: &Ciphertext, b: &Ciphertext, relin_key: &RelinKey) -> PyResult<Ciphertext> {
        self.out(py.detach(|| self.ev.multiply_relin(&a.inner, &b.inner, &relin_key.inner)))
    }
    fn relinearize(&self, py: Python<'_>, a: &Ciphertext, relin_key: &RelinKey) -> PyResult<Ciphertext> {
        self.out(py.detach(|| self.ev.relinearize(&a.inner, &relin_key.inner)))
    }
    /// Rotates both rows of slots left by `step` (right when negative).
    fn rotate_rows(&self, py: Python<'_>, a: &Ciphertext, step: i64, galois_keys: &GaloisKeys) -> PyResult<Ciphertext> {
        self.out(py.detach(|| self.ev.rotate_rows(&a.inner, step, &galois_keys.inner)))
    }
    /// Several rotations of one ciphertext sharing one decomposition.
    fn rotate_rows_hoisted(&self, py: Python<'_>, a: &Ciphertext, steps: Vec<i64>, galois_keys: &GaloisKeys) -> PyResult<Vec<Ciphertext>> {
        let out = py.detach(|| self.ev.rotate_rows_hoisted(&a.inner, &steps, &galois_keys.inner)).map_err(bfv_err)?;
        Ok(out.into_iter().map(|c| Ciphertext::wrap(&self.params, c)).collect())
    }
    fn swap_rows(&self, py: Python<'_>, a: &Ciphertext, galois_keys: &GaloisKeys) -> PyResult<Ciphertext> {
        self.out(py.detach(|| self.ev.swap_rows(&a.inner, &galois_keys.inner)))
    }
    fn mod_switch_to_next(&self, py: Python<'_>, a: &Ciphertext) -> PyResult<Ciphertext> {
        self.out(py.detach(|| self.ev.mod_switch_to_next(&a.inner)))
    }
    fn mod_switch_to(&self, py: Python<'_>, a: &Ciphertext, level: usize) -> PyResult<Ciphertext> {
        self.out(py.detach(|| self.ev.mod_switch_to(&a.inner, level)))
    }
    #[getter]
    fn params(&self) -> BfvParameters {
        self.params.clone()
    }
}

fn values_from(py: Python<'_>, values: &Bound<'_, PyAny>, t: u64) -> PyResult<Vec<i128>> {
    let _ = py;
    if let Ok(arr) = values.extract::<PyReadonlyArray1<i64>>() {
        return Ok(arr.as_array().iter().map(|&v| v as i128).collect());
    }
    if let Ok(arr) = values.extract::<PyReadonlyArray1<u64>>() {
        return Ok(arr.as_array().iter().map(|&v| v as i128).collect());
    }
    let list: Vec<i128> = values.extract().map_err(|_| {
        LycaonError::new_err(format!("values must be a 1-D integer numpy array or a list of integers (reduced modulo t = {t})"))
    })?;
    Ok(list)
}

fn reduce_values(values: Vec<i128>, t: u64) -> Vec<u64> {
    values.into_iter().map(|v| v.rem_euclid(t as i128) as u64).collect()
}

macro_rules! encoder {
    ($name:ident, $inner:ty, $doc:literal) => {
        #[doc = $doc]
        #[pyclass(module = "lycaon._native", frozen)]
        struct $name {
            enc: $inner,
            params: BfvParameters,
            t: u64,
            n: usize,
        }

        #[pymethods]
        impl $name {
            #[new]
            fn new(params: &BfvParameters) -> PyResult<Self> {
                Ok(Self { enc: <$inner>::new(&params.params).map_err(bfv_err)?, params: params.clone(), t: params.ctx.plaintext_modulus(), n: params.params.n() })
            }
            /// Encodes up to n integers (any sign; reduced modulo t).
            fn encode(&self, py: Python<'_>, values: &Bound<'_, PyAny>) -> PyResult<Plaintext> {
                let v = reduce_values(values_from(py, values, self.t)?, self.t);
                Ok(Plaintext::wrap(&self.params, self.enc.encode(&v).map_err(bfv_err)?))
            }
            /// Decodes to a numpy array: uint64 in [0, t), or int64 in (-t/2, t/2] when signed.
            #[pyo3(signature = (plaintext, signed=false))]
            fn decode<'py>(&self, py: Python<'py>, plaintext: &Plaintext, signed: bool) -> PyResult<Bound<'py, PyAny>> {
                if signed {
                    Ok(PyArray1::from_vec(py, self.enc.decode_signed(&plaintext.inner).map_err(bfv_err)?).into_any())
                } else {
                    Ok(PyArray1::from_vec(py, self.enc.decode(&plaintext.inner).map_err(bfv_err)?).into_any())
                }
            }
            #[getter]
            fn slot_count(&self) -> usize {
                self.n
            }
        }
    };
}

encoder!(BatchEncoder, lycaon_bfv::BatchEncoder, "SIMD encoding: two rows of n/2 slots, slot-wise arithmetic modulo t.");
encoder!(CoeffEncoder, lycaon_bfv::CoeffEncoder, "Coefficient encoding: value i is the coefficient of X^i.");

/// Forward + inverse NTT of one limb in place, for benchmarks (no data conversion per call).
#[pyclass(module = "lycaon._native")]
struct NttLimb {
    plan: Arc<lycaon_math::NttPlan>,
    buffer: Vec<u64>,
}

#[pymethods]
impl NttLimb {
    #[new]
    fn new(n: usize, prime: u64) -> PyResult<Self> {
        let q = lycaon_math::Modulus::new(prime).map_err(|e| ParameterError::new_err(e.to_string()))?;
        let plan = lycaon_math::NttPlan::new(n, q).map_err(|e| ParameterError::new_err(e.to_string()))?;
        let mut s = sampler()?;
        let buffer = (0..n).map(|_| s.uniform_mod(&q)).collect();
        Ok(Self { plan: Arc::new(plan), buffer })
    }
    fn roundtrip(&mut self) {
        self.plan.forward(&mut self.buffer);
        self.plan.inverse(&mut self.buffer);
    }
    #[getter]
    fn uses_ifma(&self) -> bool {
        self.plan.uses_ifma()
    }
}

/// The `count` largest primes below 2^bits that are 1 modulo 2n (NTT-friendly), descending.
#[pyfunction]
#[pyo3(signature = (bits, n, count=1))]
fn ntt_primes(bits: u32, n: usize, count: usize) -> PyResult<Vec<u64>> {
    lycaon_math::ntt_primes(bits, n, count, &[]).map_err(|e| ParameterError::new_err(e.to_string()))
}

/// Predicted noise budgets from the analytical model (bits), keyed by operation.
#[pyfunction]
fn noise_model_budgets(params: &BfvParameters) -> PyResult<Vec<(String, f64)>> {
    let m = lycaon_bfv::noise::NoiseModel::from_params(&params.params).ok_or_else(|| LycaonError::new_err("not BFV parameters"))?;
    let top = params.params.max_level();
    let fresh = m.fresh_public(top);
    let mul = m.multiply(fresh, fresh);
    Ok(vec![
        ("fresh_public".into(), m.budget(fresh)),
        ("fresh_symmetric".into(), m.budget(m.fresh_symmetric(top))),
        ("mul_plain".into(), m.budget(m.mul_plain_uniform(fresh))),
        ("rotate".into(), m.budget(m.rotate(fresh, top))),
        ("mul_relin".into(), m.budget(m.relinearize(mul, top))),
    ])
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("LycaonError", py.get_type::<LycaonError>())?;
    m.add("ParameterError", py.get_type::<ParameterError>())?;
    m.add("SecurityError", py.get_type::<SecurityError>())?;
    m.add("SerializationError", py.get_type::<SerializationError>())?;
    m.add("MissingKeyError", py.get_type::<MissingKeyError>())?;
    m.add_class::<BfvParameters>()?;
    m.add_class::<KeyGenerator>()?;
    m.add_class::<SecretKey>()?;
    m.add_class::<PublicKey>()?;
    m.add_class::<RelinKey>()?;
    m.add_class::<GaloisKeys>()?;
    m.add_class::<Plaintext>()?;
    m.add_class::<PreparedPlaintext>()?;
    m.add_class::<Ciphertext>()?;
    m.add_class::<SeededCiphertext>()?;
    m.add_class::<Encryptor>()?;
    m.add_class::<Decryptor>()?;
    m.add_class::<Evaluator>()?;
    m.add_class::<BatchEncoder>()?;
    m.add_class::<CoeffEncoder>()?;
    m.add_class::<NttLimb>()?;
    m.add_function(wrap_pyfunction!(noise_model_budgets, m)?)?;
    m.add_function(wrap_pyfunction!(ntt_primes, m)?)?;
    Ok(())
}
