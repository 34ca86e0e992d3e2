//! Python bindings of Lycaon (`lycaon._native`): conversions, GIL release around anything heavier
//! than a few microseconds, and error mapping. Nothing here computes; the Rust crates do.
//!
//! No path reachable from Python unwraps or indexes on user input: every failure comes back as an
//! exception of the `LycaonError` family (or a TypeError/OverflowError from argument conversion).

// PyO3's #[pyclass]/#[pymethods]/#[pymodule] macros expand to `unsafe` FFI glue, which the
// workspace-wide `unsafe_code = "deny"` lint would reject. No hand-written unsafe code lives here.
#![allow(unsafe_code)]

mod ckks;
mod ckks_bench;
mod cluster;
mod fhe;
mod hybrid;
mod mpc;
mod plan;
mod planner;

use std::borrow::Cow;
use std::sync::Arc;

use lycaon_bfv::rlwe::{self, RlweError};
use lycaon_bfv::{BfvContext, BfvError};
use lycaon_math::Sampler;
use numpy::{PyArray1, PyArrayDescrMethods, PyReadonlyArray1, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

// Key switching allocates large polynomials on every call; with the system allocator each of them
// page-faults afresh. mimalloc reuses the memory and roughly halves the time of a rotation.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// One hierarchy, defined here with single inheritance: LycaonError derives from ValueError, so
// every Lycaon error (bad parameters, bad bytes, bad values, a missing key) is also a ValueError.
create_exception!(_native, LycaonError, PyValueError, "Base class of every Lycaon error (a ValueError).");
create_exception!(_native, ParameterError, LycaonError, "Invalid encryption parameters.");
create_exception!(_native, SecurityError, ParameterError, "Parameters below 128-bit security per the homomorphic encryption standard.");
create_exception!(_native, SerializationError, LycaonError, "Bytes that are not a valid Lycaon object: truncated, corrupted, another version or kind, or made under other parameters.");
create_exception!(_native, MissingKeyError, LycaonError, "An evaluation key the operation needs is absent (a Galois key, or special primes for key switching).");

// ---------------------------------------------------------------------------------------------
// Error mapping

/// Errors of operations on existing objects.
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
        e @ (BfvError::NotBfv | BfvError::NoBatching { .. }) => ParameterError::new_err(e.to_string()),
        other => LycaonError::new_err(other.to_string()),
    }
}

/// Errors while building a parameter set: anything but insecurity is a parameter problem.
fn param_err(e: RlweError) -> PyErr {
    match e {
        RlweError::Insecure { .. } => SecurityError::new_err(e.to_string()),
        RlweError::Wire(_) => SerializationError::new_err(e.to_string()),
        _ => ParameterError::new_err(e.to_string()),
    }
}

fn bfv_param_err(e: BfvError) -> PyErr {
    match e {
        BfvError::Rlwe(r) => param_err(r),
        other => ParameterError::new_err(other.to_string()),
    }
}

/// Errors while parsing bytes: whatever is wrong, the bytes are the cause.
fn parse_err(e: RlweError) -> PyErr {
    match e {
        RlweError::Insecure { .. } => SecurityError::new_err(e.to_string()),
        other => SerializationError::new_err(other.to_string()),
    }
}

fn bfv_parse_err(e: BfvError) -> PyErr {
    match e {
        BfvError::Rlwe(r) => parse_err(r),
        e @ BfvError::NotBfv => ParameterError::new_err(e.to_string()),
        other => SerializationError::new_err(other.to_string()),
    }
}

fn sampler() -> PyResult<Sampler> {
    Sampler::from_os().map_err(|e| LycaonError::new_err(e.to_string()))
}

fn short_id(params: &rlwe::Parameters) -> String {
    rlwe::hex_prefix(params.id())
}

// ---------------------------------------------------------------------------------------------
// Parameters

/// Validated BFV parameters (128-bit security enforced): ring degree n, ciphertext primes,
/// special primes for key switching, plaintext modulus t and the number of key-switching digits.
#[pyclass(module = "lycaon._native", frozen)]
#[derive(Clone)]
struct BfvParameters {
    params: Arc<rlwe::Parameters>,
    ctx: Arc<BfvContext>,
}

impl BfvParameters {
    fn build(py: Python<'_>, lit: rlwe::ParametersLiteral) -> PyResult<Self> {
        py.detach(|| {
            let params = rlwe::Parameters::new(lit).map_err(param_err)?;
            let ctx = BfvContext::new(&params).map_err(bfv_param_err)?;
            Ok(Self { params, ctx })
        })
    }

    fn same(&self, other_id: &rlwe::wire::ParamsId, what: &str) -> PyResult<()> {
        if self.params.id() != other_id {
            return Err(LycaonError::new_err(format!("{what} made under different parameters")));
        }
        Ok(())
    }
}

#[pymethods]
impl BfvParameters {
    /// Parameters from explicit primes. `key_switch_digits` defaults to one prime per digit
    /// (SEAL's only choice). Raises SecurityError when log2(QP) exceeds the 128-bit bound for n,
    /// ParameterError for anything else that is invalid.
    #[new]
    #[pyo3(signature = (n, ciphertext_moduli, special_moduli, plaintext_modulus, key_switch_digits=None))]
    fn new(
        py: Python<'_>,
        n: usize,
        ciphertext_moduli: Vec<u64>,
        special_moduli: Vec<u64>,
        plaintext_modulus: u64,
        key_switch_digits: Option<usize>,
    ) -> PyResult<Self> {
        let digits = key_switch_digits.unwrap_or(ciphertext_moduli.len());
        Self::build(
            py,
            rlwe::ParametersLiteral {
                n,
                ciphertext_moduli,
                special_moduli,
                plaintext_modulus: Some(plaintext_modulus),
                key_switch_digits: digits,
                security: rlwe::Security::Bits128,
            },
        )
    }

    /// The default set for n (1024..32768): the largest 128-bit modulus, split like SEAL's
    /// BFVDefault (one special prime from n = 4096), and a 20-bit batching prime t.
    #[staticmethod]
    fn default(py: Python<'_>, n: usize) -> PyResult<Self> {
        Self::build(py, rlwe::ParametersLiteral::bfv_default(n).map_err(param_err)?)
    }

    /// Primes generated from bit sizes (the largest NTT-friendly primes below each size, as SEAL's
    /// CoeffModulus::Create) and a batching prime t of `t_bits` bits.
    #[staticmethod]
    #[pyo3(signature = (n, q_bits, p_bits, t_bits, key_switch_digits=None))]
    fn from_bits(py: Python<'_>, n: usize, q_bits: Vec<u32>, p_bits: Vec<u32>, t_bits: u32, key_switch_digits: Option<usize>) -> PyResult<Self> {
        let mut lit = py.detach(|| rlwe::ParametersLiteral::bfv_from_bits(n, &q_bits, &p_bits, t_bits)).map_err(param_err)?;
        if let Some(d) = key_switch_digits {
            lit.key_switch_digits = d;
        }
        Self::build(py, lit)
    }

    /// Ring degree n (a power of two); a batch plaintext holds n slots.
    #[getter]
    fn n(&self) -> usize {
        self.params.n()
    }
    /// Ciphertext primes q_0 .. q_{L-1}; modulus switching drops them from the end.
    #[getter]
    fn ciphertext_moduli(&self) -> Vec<u64> {
        self.params.literal().ciphertext_moduli.clone()
    }
    /// Special primes P of hybrid key switching (empty: no relinearisation or rotation).
    #[getter]
    fn special_moduli(&self) -> Vec<u64> {
        self.params.literal().special_moduli.clone()
    }
    /// Plaintext modulus t.
    #[getter]
    fn plaintext_modulus(&self) -> u64 {
        self.ctx.plaintext_modulus()
    }
    /// Number of digits the ciphertext primes are grouped into for key switching.
    #[getter]
    fn key_switch_digits(&self) -> usize {
        self.params.literal().key_switch_digits
    }
    /// Top level L - 1; a ciphertext at level l lives modulo the first l + 1 primes.
    #[getter]
    fn max_level(&self) -> usize {
        self.params.max_level()
    }
    /// log2 of the product of all primes (Q P), the quantity the security bound limits.
    #[getter]
    fn log2_qp(&self) -> f64 {
        self.params.log2_qp()
    }
    /// Content hash of the parameter set (64 hex digits); objects carry it on the wire.
    #[getter]
    fn id(&self) -> String {
        self.params.id().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Versioned, checksummed bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.params.to_bytes())
    }

    /// Parses bytes made by `to_bytes`, re-validating the set (security included).
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: Cow<'_, [u8]>) -> PyResult<Self> {
        py.detach(|| {
            let params = rlwe::Parameters::from_bytes(&data).map_err(parse_err)?;
            if params.literal().security != rlwe::Security::Bits128 {
                return Err(SecurityError::new_err(
                    "these bytes describe a test-only parameter set without the 128-bit security check; Python refuses it",
                ));
            }
            let ctx = BfvContext::new(&params).map_err(bfv_param_err)?;
            Ok(Self { params, ctx })
        })
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let cls = py.get_type::<BfvParameters>();
        Ok((cls.getattr("from_bytes")?, (self.to_bytes(py),)))
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.params.id() == other.params.id()
    }

    fn __hash__(&self) -> u64 {
        let id = self.params.id();
        u64::from_le_bytes([id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7]])
    }

    fn __repr__(&self) -> String {
        let lit = self.params.literal();
        format!(
            "BfvParameters(n={}, ciphertext_moduli={:?}, special_moduli={:?}, plaintext_modulus={}, key_switch_digits={}, log2_qp={:.1})",
            self.params.n(),
            lit.ciphertext_moduli,
            lit.special_moduli,
            self.ctx.plaintext_modulus(),
            lit.key_switch_digits,
            self.params.log2_qp()
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Objects with a wire form

/// Objects with a wire form, parsed under given parameters, with a short description for repr.
trait WireObject: Sized + Send + Sync {
    fn encode(&self) -> Vec<u8>;
    fn parse(params: &Arc<rlwe::Parameters>, bytes: &[u8]) -> PyResult<Self>;
    fn describe(&self) -> String {
        String::new()
    }
}

macro_rules! wire_impl {
    ($ty:ty, $err:ident, |$d:ident| $desc:expr) => {
        impl WireObject for $ty {
            fn encode(&self) -> Vec<u8> {
                self.to_bytes()
            }
            fn parse(params: &Arc<rlwe::Parameters>, bytes: &[u8]) -> PyResult<Self> {
                <$ty>::from_bytes(params, bytes).map_err($err)
            }
            fn describe(&self) -> String {
                let $d = self;
                $desc
            }
        }
    };
}

wire_impl!(rlwe::PublicKey, parse_err, |_d| String::new());
wire_impl!(rlwe::RelinKey, parse_err, |d| format!("digits={}, ", d.key().num_digits()));
wire_impl!(rlwe::GaloisKeys, parse_err, |d| format!("galois_elements={:?}, ", d.galois_elements().collect::<Vec<_>>()));
wire_impl!(rlwe::SeededCiphertext, parse_err, |d| format!("level={}, ", d.level()));
wire_impl!(rlwe::Ciphertext, parse_err, |d| format!("level={}, size={}, ", d.level(), d.len()));
wire_impl!(lycaon_bfv::Plaintext, bfv_parse_err, |_d| String::new());
wire_impl!(lycaon_bfv::PreparedPlaintext, bfv_parse_err, |d| format!("level={}, ", d.level()));

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
            /// Versioned, checksummed, bit-packed bytes (pickling uses them too).
            fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
                let inner = &self.inner;
                let bytes = py.detach(|| inner.encode());
                PyBytes::new(py, &bytes)
            }

            /// Parses bytes made by `to_bytes` under the same parameters; SerializationError
            /// names what is wrong (truncation, checksum, version, kind, other parameters).
            #[staticmethod]
            fn from_bytes(py: Python<'_>, params: &BfvParameters, data: Cow<'_, [u8]>) -> PyResult<Self> {
                let p = &params.params;
                let inner = py.detach(|| <$inner as WireObject>::parse(p, &data))?;
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

            fn __repr__(&self) -> String {
                format!("{}({}n={}, params={})", stringify!($name), self.inner.describe(), self.params.params.n(), short_id(&self.params.params))
            }

            $($($extra)*)?
        }
    };
}

/// The secret key. It stays with the client: it neither pickles nor has `to_bytes`, so no
/// generic serialisation path (pickle, Ray, multiprocessing, a cache) carries it off by accident;
/// storing it takes the explicit `export_secret_key_bytes`.
#[pyclass(module = "lycaon._native", frozen)]
#[derive(Clone)]
struct SecretKey {
    inner: Arc<rlwe::SecretKey>,
    params: BfvParameters,
}

#[pymethods]
impl SecretKey {
    /// The secret key's versioned bytes, for the client to store it on purpose (encrypted at
    /// rest, say); never send them. `import_secret_key_bytes` reads them back.
    fn export_secret_key_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let inner = &self.inner;
        let bytes = py.detach(|| inner.to_bytes());
        PyBytes::new(py, &bytes)
    }
    /// Reads bytes made by `export_secret_key_bytes` under the same parameters.
    #[staticmethod]
    fn import_secret_key_bytes(py: Python<'_>, params: &BfvParameters, data: Cow<'_, [u8]>) -> PyResult<Self> {
        let p = &params.params;
        let inner = py.detach(|| rlwe::SecretKey::from_bytes(p, &data)).map_err(parse_err)?;
        Ok(Self { inner: Arc::new(inner), params: params.clone() })
    }
    /// The parameters this key belongs to.
    #[getter]
    fn params(&self) -> BfvParameters {
        self.params.clone()
    }
    /// Refuses: a secret key is never pickled (see the class documentation).
    fn __reduce__(&self) -> PyResult<()> {
        Err(pyo3::exceptions::PyTypeError::new_err(ckks::SECRET_KEY_NOT_PICKLED))
    }
    /// The same key (it is immutable); copying within a process serialises nothing.
    fn __copy__(&self) -> Self {
        self.clone()
    }
    fn __deepcopy__(&self, _memo: &Bound<'_, PyAny>) -> Self {
        self.clone()
    }
    fn __repr__(&self) -> String {
        format!("SecretKey(<secret>, n={}, params={})", self.params.params.n(), short_id(&self.params.params))
    }
}
wire_object!(PublicKey, rlwe::PublicKey, "The public encryption key: anyone holding it can encrypt.");
wire_object!(RelinKey, rlwe::RelinKey, "The relinearisation key (evaluation key for ciphertext products).");
wire_object!(GaloisKeys, rlwe::GaloisKeys, "Rotation keys for a set of Galois elements (row rotations and the row swap).", {
    /// The Galois elements with a key, ascending (3^k mod 2n rotates by k; 2n - 1 swaps rows).
    #[getter]
    fn galois_elements(&self) -> Vec<u64> {
        self.inner.galois_elements().collect()
    }
    fn __len__(&self) -> usize {
        self.inner.len()
    }
});
wire_object!(SeededCiphertext, rlwe::SeededCiphertext, "A fresh symmetric encryption stored as (c0, 32-byte seed): half the bytes of a Ciphertext.", {
    /// Level of the ciphertext (the top level for a fresh encryption).
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
    /// The full ciphertext, with c1 expanded from the seed (under this object's parameters unless
    /// others are given, which must then be the same).
    #[pyo3(signature = (params=None))]
    fn expand(&self, py: Python<'_>, params: Option<&BfvParameters>) -> PyResult<Ciphertext> {
        let params = params.unwrap_or(&self.params);
        let (inner, p) = (&self.inner, &params.params);
        let ct = py.detach(|| inner.expand(p)).map_err(rlwe_err)?;
        Ok(Ciphertext::wrap(params, ct))
    }
});

wire_object!(Ciphertext, rlwe::Ciphertext, "A BFV ciphertext (NTT form over the primes of its level).", {
    /// Level l: the ciphertext lives modulo the first l + 1 ciphertext primes.
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
    /// Number of polynomials: 2, or 3 after `Evaluator.multiply` without relinearisation.
    #[getter]
    fn size(&self) -> usize {
        self.inner.len()
    }
});

wire_object!(Plaintext, lycaon_bfv::Plaintext, "A plaintext polynomial: n coefficients modulo t.", {
    /// The n coefficients in [0, t) as a uint64 array (a copy).
    fn coefficients<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, self.inner.coeffs())
    }
});

wire_object!(PreparedPlaintext, lycaon_bfv::PreparedPlaintext, "A plaintext lifted to the primes of one level and transformed once, for repeated products with ciphertexts at that level.", {
    /// The level the plaintext was prepared for.
    #[getter]
    fn level(&self) -> usize {
        self.inner.level()
    }
});

// ---------------------------------------------------------------------------------------------
// Keys, encryption, decryption

/// Samples the secret key from the OS CSPRNG, keeps it, and derives the other keys from it.
#[pyclass(module = "lycaon._native")]
struct KeyGenerator {
    params: BfvParameters,
    sk: Arc<rlwe::SecretKey>,
    sampler: Sampler,
}

#[pymethods]
impl KeyGenerator {
    /// Generates a fresh secret key for `params`.
    #[new]
    fn new(py: Python<'_>, params: &BfvParameters) -> PyResult<Self> {
        let mut sampler = sampler()?;
        let p = &params.params;
        let sk = py.detach(|| rlwe::SecretKey::generate(p, &mut sampler)).map_err(rlwe_err)?;
        Ok(Self { params: params.clone(), sk: Arc::new(sk), sampler })
    }
    /// The secret key (the same one on every call).
    fn secret_key(&self) -> SecretKey {
        SecretKey { inner: self.sk.clone(), params: self.params.clone() }
    }
    /// A fresh public key for the secret key.
    fn public_key(&mut self, py: Python<'_>) -> PyResult<PublicKey> {
        let (sk, s) = (&self.sk, &mut self.sampler);
        let pk = py.detach(|| rlwe::PublicKey::generate(sk, s)).map_err(rlwe_err)?;
        Ok(PublicKey::wrap(&self.params, pk))
    }
    /// A fresh relinearisation key (MissingKeyError when the parameters have no special primes).
    fn relin_key(&mut self, py: Python<'_>) -> PyResult<RelinKey> {
        let (sk, s) = (&self.sk, &mut self.sampler);
        let rk = py.detach(|| rlwe::RelinKey::generate(sk, s)).map_err(rlwe_err)?;
        Ok(RelinKey::wrap(&self.params, rk))
    }
    /// Keys for row rotations by each of `steps` (negative: right) and, when asked, the row swap.
    #[pyo3(signature = (steps, row_swap=false))]
    fn galois_keys(&mut self, py: Python<'_>, steps: Vec<i64>, row_swap: bool) -> PyResult<GaloisKeys> {
        let (sk, s) = (&self.sk, &mut self.sampler);
        let gk = py.detach(|| rlwe::GaloisKeys::for_rotations(sk, &steps, row_swap, s)).map_err(rlwe_err)?;
        Ok(GaloisKeys::wrap(&self.params, gk))
    }
    /// The parameters of the keys.
    #[getter]
    fn params(&self) -> BfvParameters {
        self.params.clone()
    }
    fn __repr__(&self) -> String {
        format!("KeyGenerator(n={}, params={})", self.params.params.n(), short_id(&self.params.params))
    }
}

/// Public-key encryption (server side, or anyone): encrypts for the key's owner and
/// re-randomises answers. It takes a public key only, so it can never hold a secret key.
#[pyclass(module = "lycaon._native")]
struct PublicEncryptor {
    params: BfvParameters,
    enc: lycaon_bfv::PublicKeyEncryptor,
}

#[pymethods]
impl PublicEncryptor {
    /// The public key must belong to `params`.
    #[new]
    fn new(params: &BfvParameters, public_key: &PublicKey) -> PyResult<Self> {
        params.same(public_key.inner.params_id(), "the public key was")?;
        Ok(Self { params: params.clone(), enc: lycaon_bfv::PublicKeyEncryptor::new(&params.ctx, public_key.inner.clone()).map_err(bfv_err)? })
    }
    /// Encrypts at the top level.
    fn encrypt(&mut self, py: Python<'_>, plaintext: &Plaintext) -> PyResult<Ciphertext> {
        let (enc, pt) = (&mut self.enc, &plaintext.inner);
        let ct = py.detach(|| enc.encrypt(pt)).map_err(bfv_err)?;
        Ok(Ciphertext::wrap(&self.params, ct))
    }
    /// The ciphertext plus a fresh encryption of zero at its level: same message, fresh
    /// randomness (the noise is not flooded).
    fn rerandomise(&mut self, py: Python<'_>, ciphertext: &Ciphertext) -> PyResult<Ciphertext> {
        let (enc, ct) = (&mut self.enc, &ciphertext.inner);
        let out = py.detach(|| enc.rerandomise(ct)).map_err(bfv_err)?;
        Ok(Ciphertext::wrap(&self.params, out))
    }
}

/// Secret-key encryption (client side) at the top level, seeded: half the bytes on the wire.
#[pyclass(module = "lycaon._native")]
struct SecretEncryptor {
    params: BfvParameters,
    enc: lycaon_bfv::SecretKeyEncryptor,
}

#[pymethods]
impl SecretEncryptor {
    /// The secret key must belong to `params`.
    #[new]
    fn new(params: &BfvParameters, secret_key: &SecretKey) -> PyResult<Self> {
        params.same(secret_key.inner.params().id(), "the secret key was")?;
        Ok(Self { params: params.clone(), enc: lycaon_bfv::SecretKeyEncryptor::new(&params.ctx, secret_key.inner.clone()).map_err(bfv_err)? })
    }
    /// Encrypts at the top level, seeded (`expand()` gives the full ciphertext).
    fn encrypt(&mut self, py: Python<'_>, plaintext: &Plaintext) -> PyResult<SeededCiphertext> {
        let (enc, pt) = (&mut self.enc, &plaintext.inner);
        let ct = py.detach(|| enc.encrypt(pt)).map_err(bfv_err)?;
        Ok(SeededCiphertext::wrap(&self.params, ct))
    }
}

/// Decrypts and measures the noise budget; holds the secret key (client side).
#[pyclass(module = "lycaon._native", frozen)]
struct Decryptor {
    dec: lycaon_bfv::Decryptor,
    params: BfvParameters,
}

#[pymethods]
impl Decryptor {
    /// The secret key must belong to `params`.
    #[new]
    fn new(params: &BfvParameters, secret_key: &SecretKey) -> PyResult<Self> {
        Ok(Self { dec: lycaon_bfv::Decryptor::new(&params.ctx, secret_key.inner.clone()).map_err(bfv_err)?, params: params.clone() })
    }
    /// The plaintext of a ciphertext (correct while its noise budget is positive).
    fn decrypt(&self, py: Python<'_>, ciphertext: &Ciphertext) -> PyResult<Plaintext> {
        let (dec, ct) = (&self.dec, &ciphertext.inner);
        let pt = py.detach(|| dec.decrypt(ct)).map_err(bfv_err)?;
        Ok(Plaintext::wrap(&self.params, pt))
    }
    /// Invariant noise budget in bits; decryption is correct while it is positive.
    fn noise_budget(&self, py: Python<'_>, ciphertext: &Ciphertext) -> PyResult<f64> {
        let (dec, ct) = (&self.dec, &ciphertext.inner);
        py.detach(|| dec.noise_budget(ct)).map_err(bfv_err)
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation

/// Homomorphic operations; holds no secret (server side). Every method returns a new object.
#[pyclass(module = "lycaon._native", frozen)]
struct Evaluator {
    params: BfvParameters,
    ev: lycaon_bfv::Evaluator,
}

impl Evaluator {
    /// Runs `f` without the GIL and wraps its ciphertext.
    fn run<F>(&self, py: Python<'_>, f: F) -> PyResult<Ciphertext>
    where
        F: FnOnce(&lycaon_bfv::Evaluator) -> Result<rlwe::Ciphertext, BfvError> + Send,
    {
        let ev = &self.ev;
        py.detach(|| f(ev)).map(|c| Ciphertext::wrap(&self.params, c)).map_err(bfv_err)
    }
}

#[pymethods]
impl Evaluator {
    #[new]
    fn new(params: &BfvParameters) -> Self {
        Self { params: params.clone(), ev: lycaon_bfv::Evaluator::new(&params.ctx) }
    }
    /// a + b (same level).
    fn add(&self, py: Python<'_>, a: &Ciphertext, b: &Ciphertext) -> PyResult<Ciphertext> {
        self.run(py, |ev| ev.add(&a.inner, &b.inner))
    }
    /// a - b (same level).
    fn sub(&self, py: Python<'_>, a: &Ciphertext, b: &Ciphertext) -> PyResult<Ciphertext> {
        self.run(py, |ev| ev.sub(&a.inner, &b.inner))
    }
    /// -a.
    fn negate(&self, py: Python<'_>, a: &Ciphertext) -> PyResult<Ciphertext> {
        self.run(py, |ev| ev.negate(&a.inner))
    }
    /// a + p.
    fn add_plain(&self, py: Python<'_>, a: &Ciphertext, p: &Plaintext) -> PyResult<Ciphertext> {
        self.run(py, |ev| ev.add_plain(&a.inner, &p.inner))
    }
    /// a - p.
    fn sub_plain(&self, py: Python<'_>, a: &Ciphertext, p: &Plaintext) -> PyResult<Ciphertext> {
        self.run(py, |ev| ev.sub_plain(&a.inner, &p.inner))
    }
    /// a * p (slot-wise for batch-encoded p); prepares p on every call.
    fn mul_plain(&self, py: Python<'_>, a: &Ciphertext, p: &Plaintext) -> PyResult<Ciphertext> {
        self.run(py, |ev| ev.mul_plain(&a.inner, &p.inner))
    }
    /// Lifts and transforms a plaintext once for many `mul_plain_prepared` calls at `level`
    /// (default: the top level).
    #[pyo3(signature = (p, level=None))]
    fn prepare_plain(&self, py: Python<'_>, p: &Plaintext, level: Option<usize>) -> PyResult<PreparedPlaintext> {
        let level = level.unwrap_or(self.params.params.max_level());
        let (ev, pt) = (&self.ev, &p.inner);
        let prepared = py.detach(|| ev.prepare_plain(pt, level)).map_err(bfv_err)?;
        Ok(PreparedPlaintext::wrap(&self.params, prepared))
    }
    /// a * p for a plaintext prepared at a's level.
    fn mul_plain_prepared(&self, py: Python<'_>, a: &Ciphertext, p: &PreparedPlaintext) -> PyResult<Ciphertext> {
        self.run(py, |ev| ev.mul_plain_prepared(&a.inner, &p.inner))
    }
    /// a * scalar for any Python int (taken modulo t).
    fn mul_scalar(&self, py: Python<'_>, a: &Ciphertext, scalar: &Bound<'_, PyAny>) -> PyResult<Ciphertext> {
        let s = match scalar.extract::<i64>() {
            Ok(s) => s,
            Err(_) => {
                // Larger ints: Python's % gives a value in [0, t), and t < 2^62 fits an i64.
                let t = self.params.ctx.plaintext_modulus();
                let reduced = scalar.rem(t).map_err(|_| LycaonError::new_err("the scalar must be an int"))?;
                reduced.extract::<i64>().map_err(|_| LycaonError::new_err("the scalar must be an int"))?
            }
        };
        self.run(py, |ev| ev.mul_scalar(&a.inner, s))
    }
    /// a * b without relinearisation: a ciphertext of size 3.
    fn multiply(&self, py: Python<'_>, a: &Ciphertext, b: &Ciphertext) -> PyResult<Ciphertext> {
        self.run(py, |ev| ev.multiply(&a.inner, &b.inner))
    }
    /// a * b relinearised back to size 2.
    fn multiply_relin(&self, py: Python<'_>, a: &Ciphertext, b: &Ciphertext, relin_key: &RelinKey) -> PyResult<Ciphertext> {
        self.run(py, |ev| ev.multiply_relin(&a.inner, &b.inner, &relin_key.inner))
    }
    /// A size-3 ciphertext back to size 2.
    fn relinearize(&self, py: Python<'_>, a: &Ciphertext, relin_key: &RelinKey) -> PyResult<Ciphertext> {
        self.run(py, |ev| ev.relinearize(&a.inner, &relin_key.inner))
    }
    /// Rotates both rows of n/2 slots left by `step` (right when negative).
    fn rotate_rows(&self, py: Python<'_>, a: &Ciphertext, step: i64, galois_keys: &GaloisKeys) -> PyResult<Ciphertext> {
        self.params.same(galois_keys.inner.params_id(), "these Galois keys were")?;
        self.run(py, |ev| ev.rotate_rows(&a.inner, step, &galois_keys.inner))
    }
    /// One rotation per step, sharing one decomposition of `a` (hoisting); a list in step order.
    fn rotate_rows_hoisted(&self, py: Python<'_>, a: &Ciphertext, steps: Vec<i64>, galois_keys: &GaloisKeys) -> PyResult<Vec<Ciphertext>> {
        self.params.same(galois_keys.inner.params_id(), "these Galois keys were")?;
        let (ev, ct, gk) = (&self.ev, &a.inner, &galois_keys.inner);
        let out = py.detach(|| ev.rotate_rows_hoisted(ct, &steps, gk)).map_err(bfv_err)?;
        Ok(out.into_iter().map(|c| Ciphertext::wrap(&self.params, c)).collect())
    }
    /// Swaps the two rows of slots (needs keys made with row_swap=True).
    fn swap_rows(&self, py: Python<'_>, a: &Ciphertext, galois_keys: &GaloisKeys) -> PyResult<Ciphertext> {
        self.params.same(galois_keys.inner.params_id(), "these Galois keys were")?;
        self.run(py, |ev| ev.swap_rows(&a.inner, &galois_keys.inner))
    }
    /// Drops the last prime (level - 1); the message is unchanged, the noise shrinks with Q.
    fn mod_switch_to_next(&self, py: Python<'_>, a: &Ciphertext) -> PyResult<Ciphertext> {
        self.run(py, |ev| ev.mod_switch_to_next(&a.inner))
    }
    /// Switches down to `level` (a no-op at the same level; switching up is impossible).
    fn mod_switch_to(&self, py: Python<'_>, a: &Ciphertext, level: usize) -> PyResult<Ciphertext> {
        if level > a.inner.level() {
            return Err(LycaonError::new_err(format!("cannot switch a ciphertext at level {} up to level {level}; modulus switching only goes down", a.inner.level())));
        }
        self.run(py, |ev| ev.mod_switch_to(&a.inner, level))
    }
    /// The parameters of this evaluator.
    #[getter]
    fn params(&self) -> BfvParameters {
        self.params.clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Encoders

/// Values converted from Python: signed when any is negative (then reduced modulo t by the
/// encoder's encode_signed), otherwise unsigned (then each must already be below t).
enum Values {
    Signed(Vec<i64>),
    Unsigned(Vec<u64>),
}

fn not_integers(what: String) -> PyErr {
    LycaonError::new_err(format!("values must be a 1-D numpy integer array or a sequence of Python ints; got {what}"))
}

fn split_i128(values: Vec<i128>) -> PyResult<Values> {
    let out_of_range = |v: &i128| LycaonError::new_err(format!("value {v} does not fit in 64 bits"));
    if values.iter().any(|&v| v < 0) {
        values.iter().map(|v| i64::try_from(*v).map_err(|_| out_of_range(v))).collect::<PyResult<_>>().map(Values::Signed)
    } else {
        values.iter().map(|v| u64::try_from(*v).map_err(|_| out_of_range(v))).collect::<PyResult<_>>().map(Values::Unsigned)
    }
}

fn values_from(values: &Bound<'_, PyAny>) -> PyResult<Values> {
    if let Ok(arr) = values.cast::<PyUntypedArray>() {
        let shape = arr.shape().to_vec();
        let dtype = arr.dtype();
        if shape.len() != 1 {
            return Err(LycaonError::new_err(format!("values must be one-dimensional; got an array of shape ({})", shape.iter().map(|d| format!("{d},")).collect::<String>().trim_end_matches(',').replace(',', ", "))));
        }
        return match dtype.kind() {
            b'i' => {
                let cast = if dtype.is_equiv_to(&numpy::dtype::<i64>(values.py())) { values.clone() } else { values.call_method1("astype", ("int64",))? };
                let a: PyReadonlyArray1<'_, i64> = cast.extract()?;
                let view = a.as_array();
                if view.iter().any(|&v| v < 0) {
                    Ok(Values::Signed(view.to_vec()))
                } else {
                    Ok(Values::Unsigned(view.iter().map(|&v| v as u64).collect()))
                }
            }
            b'u' => {
                let cast = if dtype.is_equiv_to(&numpy::dtype::<u64>(values.py())) { values.clone() } else { values.call_method1("astype", ("uint64",))? };
                let a: PyReadonlyArray1<'_, u64> = cast.extract()?;
                Ok(Values::Unsigned(a.as_array().to_vec()))
            }
            // Object arrays (Python ints of any size) go element by element.
            b'O' => values.extract::<Vec<i128>>().map_err(|_| not_integers("an object array with non-integer elements".into())).and_then(split_i128),
            _ => Err(not_integers(format!("a numpy array of dtype {}", dtype.str().map(|s| s.to_string()).unwrap_or_else(|_| "?".into())))),
        };
    }
    // Sequences: i64 covers nearly every input at native speed; u64 the rest of [0, 2^64); i128
    // only serves to name a value that fits neither.
    if let Ok(v) = values.extract::<Vec<i64>>() {
        return Ok(if v.iter().any(|&x| x < 0) { Values::Signed(v) } else { Values::Unsigned(v.into_iter().map(|x| x as u64).collect()) });
    }
    if let Ok(v) = values.extract::<Vec<u64>>() {
        return Ok(Values::Unsigned(v));
    }
    match values.extract::<Vec<i128>>() {
        Ok(v) => split_i128(v),
        Err(_) => Err(not_integers(describe_non_integers(values))),
    }
}

/// "a list containing an element of type float" or "an object of type str", for error messages.
fn describe_non_integers(values: &Bound<'_, PyAny>) -> String {
    let type_name = |o: &Bound<'_, PyAny>| o.get_type().name().map(|s| s.to_string()).unwrap_or_else(|_| "?".into());
    if !values.is_instance_of::<pyo3::types::PyString>() {
        if let Ok(iter) = values.try_iter() {
            for item in iter.flatten() {
                if item.extract::<i128>().is_err() {
                    return format!("a {} containing an element of type {}", type_name(values), type_name(&item));
                }
            }
        }
    }
    format!("an object of type {}", type_name(values))
}

/// Encoder errors with the encoder's rule spelled out.
fn encode_err(e: BfvError) -> PyErr {
    match e {
        BfvError::NotReduced { value, t } => LycaonError::new_err(format!(
            "value {value} is not below the plaintext modulus t = {t}; non-negative values must lie in [0, t) (negative values are reduced modulo t)"
        )),
        other => bfv_err(other),
    }
}

macro_rules! encoder {
    ($name:ident, $inner:ty, $doc:literal) => {
        #[doc = $doc]
        #[pyclass(module = "lycaon._native", frozen)]
        struct $name {
            enc: $inner,
            params: BfvParameters,
            n: usize,
        }

        #[pymethods]
        impl $name {
            #[new]
            fn new(py: Python<'_>, params: &BfvParameters) -> PyResult<Self> {
                let p = &params.params;
                let enc = py.detach(|| <$inner>::new(p)).map_err(bfv_err)?;
                Ok(Self { enc, params: params.clone(), n: params.params.n() })
            }
            /// Encodes up to n integers (zero-padded) from a 1-D numpy integer array or a sequence
            /// of ints. Without negative values each must lie in [0, t); when any value is
            /// negative, all are reduced modulo t (encode_signed).
            fn encode(&self, py: Python<'_>, values: &Bound<'_, PyAny>) -> PyResult<Plaintext> {
                let values = values_from(values)?;
                let enc = &self.enc;
                let pt = py.detach(|| match &values {
                    Values::Signed(v) => enc.encode_signed(v),
                    Values::Unsigned(v) => enc.encode(v),
                });
                Ok(Plaintext::wrap(&self.params, pt.map_err(encode_err)?))
            }
            /// Decodes to a numpy array of n values: uint64 in [0, t), or with signed=True int64
            /// in (-t/2, t/2].
            #[pyo3(signature = (plaintext, signed=false))]
            fn decode<'py>(&self, py: Python<'py>, plaintext: &Plaintext, signed: bool) -> PyResult<Bound<'py, PyAny>> {
                let (enc, pt) = (&self.enc, &plaintext.inner);
                if signed {
                    let v = py.detach(|| enc.decode_signed(pt)).map_err(bfv_err)?;
                    Ok(PyArray1::from_vec(py, v).into_any())
                } else {
                    let v = py.detach(|| enc.decode(pt)).map_err(bfv_err)?;
                    Ok(PyArray1::from_vec(py, v).into_any())
                }
            }
            /// Number of values a plaintext holds (n).
            #[getter]
            fn slot_count(&self) -> usize {
                self.n
            }
            /// The parameters of this encoder.
            #[getter]
            fn params(&self) -> BfvParameters {
                self.params.clone()
            }
        }
    };
}

encoder!(BatchEncoder, lycaon_bfv::BatchEncoder, "SIMD encoding: two rows of n/2 slots with slot-wise arithmetic modulo t (t must be a prime = 1 mod 2n).");
encoder!(CoeffEncoder, lycaon_bfv::CoeffEncoder, "Coefficient encoding: value i becomes the coefficient of X^i (negacyclic products).");

// ---------------------------------------------------------------------------------------------
// Benchmark helpers

/// Forward + inverse NTT of one limb in place, for benchmarks: no data crosses the boundary.
#[pyclass(module = "lycaon._native")]
struct NttLimb {
    plan: lycaon_math::NttPlan,
    buffer: Vec<u64>,
}

#[pymethods]
impl NttLimb {
    /// A plan for ring degree n and an NTT-friendly prime (= 1 mod 2n), on random data.
    #[new]
    fn new(py: Python<'_>, n: usize, prime: u64) -> PyResult<Self> {
        let q = lycaon_math::Modulus::new(prime).map_err(|e| ParameterError::new_err(e.to_string()))?;
        let plan = py.detach(|| lycaon_math::NttPlan::new(n, q)).map_err(|e| ParameterError::new_err(e.to_string()))?;
        let mut s = sampler()?;
        let buffer = (0..n).map(|_| s.uniform_mod(&q)).collect();
        Ok(Self { plan, buffer })
    }
    /// Forward then inverse NTT of the internal buffer. It keeps the GIL on purpose: it runs for a
    /// few microseconds, and the benchmark times the transform, not a GIL hand-off.
    fn roundtrip(&mut self) {
        self.plan.forward(&mut self.buffer);
        self.plan.inverse(&mut self.buffer);
    }
    /// Whether this plan runs tfhe-ntt's AVX-512 IFMA path (primes below 2^52 on IFMA CPUs).
    #[getter]
    fn uses_ifma(&self) -> bool {
        self.plan.uses_ifma()
    }
}

/// How this build computes: backend, NTT path, CPU features, allocator, threads.
#[pyfunction]
fn bench_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", env!("CARGO_PKG_VERSION"))?;
    d.set_item("backend", lycaon_runtime::device::Device::Cpu.to_string())?;
    d.set_item("ntt", "tfhe-ntt")?;
    // tfhe-ntt picks IFMA per plan (prime below 2^52 and CPU support); probe with a 50-bit prime.
    let ifma = lycaon_math::ntt_primes(50, 4096, 1, &[])
        .ok()
        .and_then(|p| p.first().copied())
        .and_then(|p| lycaon_math::Modulus::new(p).ok())
        .and_then(|q| lycaon_math::NttPlan::new(4096, q).ok())
        .is_some_and(|plan| plan.uses_ifma());
    d.set_item("ifma", ifma)?;
    #[cfg(target_arch = "x86_64")]
    {
        d.set_item("avx2", std::arch::is_x86_feature_detected!("avx2"))?;
        d.set_item("avx512f", std::arch::is_x86_feature_detected!("avx512f"))?;
        d.set_item("avx512ifma", std::arch::is_x86_feature_detected!("avx512ifma"))?;
    }
    d.set_item("arch", std::env::consts::ARCH)?;
    d.set_item("optimized", !cfg!(debug_assertions))?;
    d.set_item("allocator", "mimalloc")?;
    d.set_item("threads", 1)?;
    Ok(d)
}

/// The `count` largest primes below 2^bits that are 1 modulo 2n (NTT-friendly), descending.
#[pyfunction]
#[pyo3(signature = (bits, n, count=1))]
fn ntt_primes(py: Python<'_>, bits: u32, n: usize, count: usize) -> PyResult<Vec<u64>> {
    py.detach(|| lycaon_math::ntt_primes(bits, n, count, &[])).map_err(|e| ParameterError::new_err(e.to_string()))
}

/// The largest log2(QP) a parameter set of ring degree `n` may have at 128-bit security (the HE
/// standard's table, ternary secret, as lycaon-rlwe enforces it); None for a degree it does not
/// cover.
#[pyfunction]
fn max_log_qp(n: usize) -> Option<u32> {
    rlwe::max_log_qp(n)
}

/// The whole 128-bit security table: ring degree n -> largest log2(QP).
#[pyfunction]
fn security_table() -> std::collections::BTreeMap<usize, u32> {
    rlwe::MAX_LOG_QP_128.iter().copied().collect()
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

// ---------------------------------------------------------------------------------------------
// Encrypted linear layers (lycaon-nn)

fn nn_err(e: lycaon_nn::NnError) -> PyErr {
    match e {
        lycaon_nn::NnError::Bfv(b) => bfv_err(b),
        other => LycaonError::new_err(other.to_string()),
    }
}

/// Builds the plan of one algorithm for one layer shape.
fn linear_plan(
    algorithm: &str,
    shape: &Bound<'_, PyDict>,
    params: &Arc<rlwe::Parameters>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Box<dyn lycaon_nn::LinearPlan>> {
    use lycaon_nn::packed::{PackedConv, PackedOptions, Schedule};
    let get = |d: &Bound<'_, PyDict>, key: &str, default: Option<usize>| -> PyResult<usize> {
        match d.get_item(key)? {
            Some(v) => v.extract::<usize>(),
            None => default.ok_or_else(|| LycaonError::new_err(format!("layer shape needs '{key}'"))),
        }
    };
    let k = get(shape, "k", Some(1))?;
    let conv = lycaon_nn::ConvShape {
        c_in: get(shape, "c_in", None)?,
        h: get(shape, "h", Some(1))?,
        w: get(shape, "w", Some(get(shape, "h", Some(1))?))?,
        c_out: get(shape, "c_out", None)?,
        kh: get(shape, "kh", Some(k))?,
        kw: get(shape, "kw", Some(k))?,
        stride: get(shape, "stride", Some(1))?,
        pad_h: get(shape, "pad_h", Some(get(shape, "pad", Some(k / 2))?))?,
        pad_w: get(shape, "pad_w", Some(get(shape, "pad", Some(k / 2))?))?,
        groups: get(shape, "groups", Some(1))?,
    };
    let opt = |key: &str| -> PyResult<Option<Bound<'_, PyAny>>> { Ok(match options { Some(o) => o.get_item(key)?, None => None }) };
    let block = opt("block")?.map(|v| v.extract::<usize>()).transpose()?;
    let plan: Box<dyn lycaon_nn::LinearPlan> = match algorithm {
        "gazelle" => {
            let schedule = match opt("schedule")?.map(|v| v.extract::<String>()).transpose()?.as_deref() {
                None | Some("IA") | Some("ia") => Schedule::InputAligned,
                Some("PA") | Some("pa") => Schedule::PartialAligned,
                Some(other) => return Err(LycaonError::new_err(format!("unknown schedule '{other}': use 'IA' or 'PA'"))),
            };
            let plain_decomposition_bits = opt("decomposition_bits")?.map(|v| v.extract::<u32>()).transpose()?;
            Box::new(PackedConv::new(&conv, params, PackedOptions { schedule, block, plain_decomposition_bits }).map_err(nn_err)?)
        }
        "walsh" => Box::new(lycaon_nn::walsh::WalshConv::new(&conv, params, block).map_err(nn_err)?),
        "padded" => Box::new(lycaon_nn::padded::PaddedConv::new(&conv, params, block).map_err(nn_err)?),
        "cheetah" => Box::new(lycaon_nn::coeff::CoeffConv::new(&conv, params).map_err(nn_err)?),
        "cheetah-matvec" => Box::new(lycaon_nn::coeff::CoeffMatVec::new(&conv, params).map_err(nn_err)?),
        "diagonal" => Box::new(lycaon_nn::diagonal::DiagonalFc::new(&conv, params).map_err(nn_err)?),
        "hyena" => {
            let batch = opt("batch")?.map(|v| v.extract::<usize>()).transpose()?.unwrap_or(1);
            Box::new(lycaon_nn::hyena::HyenaConv::new(&conv, params, batch).map_err(nn_err)?)
        }
        "batchwise" => {
            let batch = opt("batch")?.map(|v| v.extract::<usize>()).transpose()?.unwrap_or(1);
            let k_t = opt("kernels")?.map(|v| v.extract::<usize>()).transpose()?;
            Box::new(lycaon_nn::batchwise::BatchWiseConv::new(&conv, params, batch, k_t).map_err(nn_err)?)
        }
        other => {
            return Err(LycaonError::new_err(format!(
                "unknown linear algorithm '{other}': use gazelle, walsh, padded, cheetah, cheetah-matvec, diagonal, hyena or batchwise"
            )))
        }
    };
    Ok(plan)
}

fn counts_dict<'py>(py: Python<'py>, c: &lycaon_nn::OpCounts) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("rotations", c.rotations)?;
    d.set_item("hoisted_decompositions", c.hoisted_decompositions)?;
    d.set_item("key_switches", c.key_switches)?;
    d.set_item("plain_mults", c.plain_mults)?;
    d.set_item("scalar_mults", c.scalar_mults)?;
    d.set_item("additions", c.additions)?;
    d.set_item("mod_switches", c.mod_switches)?;
    d.set_item("ntts", c.ntts)?;
    Ok(d)
}

fn plan_dict<'py>(py: Python<'py>, plan: &dyn lycaon_nn::LinearPlan) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let cost = plan.cost();
    d.set_item("algorithm", plan.name())?;
    d.set_item("batch", plan.batch())?;
    d.set_item("input_ciphertexts", plan.input_layout().num_ciphertexts)?;
    d.set_item("output_ciphertexts", plan.output_layout().num_ciphertexts)?;
    d.set_item("up_bytes", cost.up_bytes)?;
    d.set_item("down_bytes", cost.down_bytes)?;
    d.set_item("key_bytes", cost.key_bytes)?;
    d.set_item("galois_keys", plan.galois_elements().len())?;
    d.set_item("weight_bytes", plan.weight_bytes())?;
    d.set_item("output_scale", plan.output_layout().scale)?;
    d.set_item("counts", counts_dict(py, &plan.counts())?)?;
    Ok(d)
}

/// What an algorithm states for a layer (layouts, counts, bytes) without weights or keys.
/// `shape`: {"h", "w", "c_in", "c_out", "k" | "kh"/"kw", "stride", "pad" | "pad_h"/"pad_w",
/// "groups"}; `options`: {"block", "schedule": "IA" | "PA", "decomposition_bits"}.
#[pyfunction]
#[pyo3(signature = (algorithm, shape, params, options=None))]
fn plan_linear<'py>(py: Python<'py>, algorithm: &str, shape: &Bound<'py, PyDict>, params: &BfvParameters, options: Option<&Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyDict>> {
    let plan = linear_plan(algorithm, shape, &params.params, options)?;
    plan_dict(py, plan.as_ref())
}

/// Runs one layer as client and server: keys, encryption of `x` (C*H*W int64), the server's
/// evaluation with weights `w` ([out][in/groups][kh][kw] int64) `reps` times, decryption, and a
/// check against the integer reference. Returns the plan's statement and the measurements.
#[pyfunction]
#[pyo3(signature = (algorithm, shape, params, x, w, reps=1, options=None))]
#[allow(clippy::too_many_arguments)]
fn run_linear<'py>(
    py: Python<'py>,
    algorithm: &str,
    shape: &Bound<'py, PyDict>,
    params: &BfvParameters,
    x: PyReadonlyArray1<'py, i64>,
    w: PyReadonlyArray1<'py, i64>,
    reps: usize,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let plan = linear_plan(algorithm, shape, &params.params, options)?;
    let x = x.as_slice().map_err(|e| LycaonError::new_err(e.to_string()))?.to_vec();
    let w = w.as_slice().map_err(|e| LycaonError::new_err(e.to_string()))?.to_vec();
    let plan_ref: &dyn lycaon_nn::LinearPlan = plan.as_ref();
    let run = py.detach(|| lycaon_nn::harness::run_layer(plan_ref, &x, &w, reps)).map_err(nn_err)?;
    let d = plan_dict(py, plan.as_ref())?;
    d.set_item("server_s", run.server_s)?;
    d.set_item("encrypt_s", run.encrypt_s)?;
    d.set_item("decrypt_s", run.decrypt_s)?;
    d.set_item("up_bytes_measured", run.up_bytes_measured)?;
    d.set_item("weight_bytes_measured", run.weight_bytes)?;
    d.set_item("measured_counts", counts_dict(py, &run.counts)?)?;
    d.set_item("counts_match", run.counts == run.stated)?;
    d.set_item("exact", run.exact)?;
    d.set_item("output", PyArray1::from_vec(py, run.output))?;
    d.set_item("min_noise_budget_bits", run.min_noise_budget)?;
    Ok(d)
}

/// Whether this build has the CUDA backend and whether a device can be used, with the reason
/// when not. Cheap: it compiles no kernels.
#[pyfunction]
#[pyo3(signature = (device = 0))]
fn gpu_status(py: Python<'_>, device: usize) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("built_with_cuda", lycaon_runtime::device::BUILT_WITH_CUDA)?;
    match lycaon_runtime::device::probe(device) {
        Ok(info) => {
            d.set_item("available", true)?;
            d.set_item("reason", py.None())?;
            let dev = PyDict::new(py);
            dev.set_item("ordinal", info.ordinal)?;
            dev.set_item("name", info.name)?;
            dev.set_item("compute_capability", info.compute_capability)?;
            dev.set_item("memory_bytes", info.memory_bytes)?;
            d.set_item("device", dev)?;
        }
        Err(e) => {
            d.set_item("available", false)?;
            d.set_item("reason", e.to_string())?;
            d.set_item("device", py.None())?;
        }
    }
    Ok(d)
}

/// Times every CUDA kernel against the CPU reference at degree 2^log_n over `limbs` primes and
/// checks bit-exact agreement. Raises LycaonError when there is no usable CUDA backend.
#[pyfunction]
#[pyo3(signature = (log_n = 16, limbs = 24, reps = 5, device = 0))]
fn gpu_bench(py: Python<'_>, log_n: u32, limbs: usize, reps: usize, device: usize) -> PyResult<Bound<'_, PyDict>> {
    if !(4..=16).contains(&log_n) || limbs == 0 || reps == 0 {
        return Err(ParameterError::new_err(format!("gpu_bench needs 4 <= log_n <= 16, limbs >= 1, reps >= 1 (got {log_n}, {limbs}, {reps})")));
    }
    let backend = py.detach(|| lycaon_runtime::device::Device::Cuda(device).backend()).map_err(crate::hybrid::err)?;
    let info = lycaon_runtime::device::probe(device).map_err(|e| LycaonError::new_err(e.to_string()))?;
    let report = py
        .detach(|| lycaon_runtime::device::bench::bench_backend(backend.as_ref(), log_n, limbs, reps))
        .map_err(|e| LycaonError::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    d.set_item("backend", report.backend)?;
    d.set_item("device", info.name)?;
    d.set_item("n", report.n)?;
    d.set_item("limbs", report.limbs)?;
    d.set_item("reps", report.reps)?;
    let rows = pyo3::types::PyList::empty(py);
    for k in report.kernels {
        let row = PyDict::new(py);
        row.set_item("kernel", k.kernel)?;
        row.set_item("gpu_ms", k.backend_ms)?;
        row.set_item("cpu_ms", k.cpu_ms)?;
        row.set_item("matches_cpu", k.matches_cpu)?;
        rows.append(row)?;
    }
    d.set_item("kernels", rows)?;
    Ok(d)
}

/// Times CKKS operations on resident operands (ciphertexts, plaintexts and keys kept in the
/// device's memory) against the host evaluator on every core, at degree 2^log_n with `levels`
/// levels, and checks bit-exact agreement. `device`: "cuda:N", or "cpu" for resident memory on the
/// host (the reference implementation). Raises LycaonError when the device is unavailable.
#[pyfunction]
#[pyo3(signature = (log_n = 16, levels = 24, reps = 5, device = "cuda:0"))]
fn gpu_ops_bench<'py>(py: Python<'py>, log_n: u32, levels: usize, reps: usize, device: &str) -> PyResult<Bound<'py, PyDict>> {
    if !(4..=16).contains(&log_n) || levels == 0 || reps == 0 {
        return Err(ParameterError::new_err(format!("gpu_ops_bench needs 4 <= log_n <= 16, levels >= 1, reps >= 1 (got {log_n}, {levels}, {reps})")));
    }
    let device = lycaon_runtime::Device::parse(device).map_err(|e| ParameterError::new_err(e.to_string()))?;
    let report = py
        .detach(|| lycaon_runtime::resident_bench::bench_resident_on(device, log_n, levels, reps))
        .map_err(crate::hybrid::err)?;
    let d = PyDict::new(py);
    d.set_item("backend", report.backend)?;
    d.set_item("n", report.n)?;
    d.set_item("levels", report.levels)?;
    d.set_item("reps", report.reps)?;
    d.set_item("key_bytes", report.key_bytes)?;
    d.set_item("allocations_after_warmup", report.allocations_after_warmup)?;
    let rows = pyo3::types::PyList::empty(py);
    for o in report.ops {
        let row = PyDict::new(py);
        row.set_item("op", o.op)?;
        row.set_item("device_ms", o.device_ms)?;
        row.set_item("cpu_ms", o.cpu_ms)?;
        row.set_item("matches_cpu", o.matches_cpu)?;
        rows.append(row)?;
    }
    d.set_item("ops", rows)?;
    Ok(d)
}

/// CPU seconds this process has spent in each timed kernel (ntt, key_switch, ot_extension,
/// ot_hash, serialize), summed over threads since it started: take the difference of two calls
/// around the work to profile (lycaon_math::profile).
#[pyfunction]
fn profile_seconds(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    use lycaon_math::profile::{snapshot, Kernel};
    let d = pyo3::types::PyDict::new(py);
    let now = snapshot();
    for k in Kernel::ALL {
        d.set_item(k.name(), now.seconds(k))?;
    }
    Ok(d)
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
    m.add_class::<PublicEncryptor>()?;
    m.add_class::<SecretEncryptor>()?;
    m.add_class::<Decryptor>()?;
    m.add_class::<Evaluator>()?;
    m.add_class::<BatchEncoder>()?;
    m.add_class::<CoeffEncoder>()?;
    m.add_class::<NttLimb>()?;
    m.add_function(wrap_pyfunction!(bench_info, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_bench, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_ops_bench, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_status, m)?)?;
    m.add_function(wrap_pyfunction!(noise_model_budgets, m)?)?;
    m.add_function(wrap_pyfunction!(ntt_primes, m)?)?;
    m.add_function(wrap_pyfunction!(max_log_qp, m)?)?;
    m.add_function(wrap_pyfunction!(security_table, m)?)?;
    m.add_function(wrap_pyfunction!(profile_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(plan_linear, m)?)?;
    m.add_function(wrap_pyfunction!(run_linear, m)?)?;
    m.add_function(wrap_pyfunction!(mpc::run_two_party, m)?)?;
    m.add_class::<hybrid::HybridServer>()?;
    m.add_class::<cluster::LinearWorker>()?;
    m.add_class::<cluster::FheWorker>()?;
    m.add_function(wrap_pyfunction!(hybrid::hybrid_infer, m)?)?;
    m.add_function(wrap_pyfunction!(hybrid::hybrid_fetch_program, m)?)?;
    m.add_function(wrap_pyfunction!(hybrid::hybrid_local, m)?)?;
    m.add_function(wrap_pyfunction!(hybrid::fetch_public_model, m)?)?;
    m.add_class::<fhe::FheSession>()?;
    m.add_function(wrap_pyfunction!(fhe::fhe_program_facts, m)?)?;
    m.add_function(wrap_pyfunction!(fhe::fhe_rotation_plan, m)?)?;
    m.add_function(wrap_pyfunction!(fhe::fhe_schedule, m)?)?;
    m.add_function(wrap_pyfunction!(ckks_bench::ckks_bench_ops, m)?)?;
    m.add_function(wrap_pyfunction!(ckks_bench::ckks_bench_bootstrap, m)?)?;
    m.add_function(wrap_pyfunction!(fhe::fhe_compile, m)?)?;
    m.add_function(wrap_pyfunction!(fhe::fhe_compile_path, m)?)?;
    m.add_function(wrap_pyfunction!(plan::simulate_json, m)?)?;
    m.add_function(wrap_pyfunction!(plan::reproduction_json, m)?)?;
    m.add_function(wrap_pyfunction!(plan::reproduction_003_json, m)?)?;
    m.add_function(wrap_pyfunction!(plan::dse_json, m)?)?;
    m.add_function(wrap_pyfunction!(plan::arch_toml, m)?)?;
    m.add_function(wrap_pyfunction!(planner::plan_json, m)?)?;
    m.add_function(wrap_pyfunction!(planner::keyset_json, m)?)?;
    ckks::register(m)?;
    ckks::register_fhe(m)?;
    Ok(())
}
