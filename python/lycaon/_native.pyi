"""Type stubs for Lycaon's native module ``lycaon._native`` (Rust, via PyO3).

Every heavy call (key generation, encryption, decryption, evaluation, encoding, serialisation)
releases the GIL, so threads run in parallel. Errors raise the ``LycaonError`` family; every
Lycaon error is also a ``ValueError``.
"""

from typing import Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

#: What the encoders accept: a 1-D numpy integer array (any integer dtype) or a sequence of ints.
IntArray = Union[npt.NDArray[np.integer], Sequence[int]]
#: Bytes-like input of ``from_bytes``.
BytesLike = Union[bytes, bytearray]

class LycaonError(ValueError):
    """Base class of every Lycaon error; bad values, levels or sizes raise it directly."""

class ParameterError(LycaonError):
    """Invalid encryption parameters (degree, primes, plaintext modulus, digits)."""

class SecurityError(ParameterError):
    """Parameters below 128-bit security per the homomorphic encryption standard."""

class SerializationError(LycaonError):
    """Bytes that are not a valid Lycaon object; the message names the problem (truncated,
    checksum mismatch, unsupported version, wrong kind, made under different parameters)."""

class MissingKeyError(LycaonError):
    """A key the operation needs is absent: a Galois key for a rotation, or special primes for
    key switching."""

class BfvParameters:
    """Validated BFV parameters: ring degree n, ciphertext primes, special primes, plaintext
    modulus t and key-switching digits. 128-bit security is enforced (SecurityError otherwise).
    Equal parameter sets compare equal and hash alike; they pickle through ``to_bytes``."""

    def __init__(
        self,
        n: int,
        ciphertext_moduli: Sequence[int],
        special_moduli: Sequence[int],
        plaintext_modulus: int,
        key_switch_digits: Optional[int] = None,
    ) -> None:
        """Parameters from explicit primes (each NTT-friendly: prime and = 1 mod 2n).
        ``key_switch_digits`` defaults to one ciphertext prime per digit, as SEAL."""
    @staticmethod
    def default(n: int) -> "BfvParameters":
        """The default set for n in 1024..32768: the largest 128-bit modulus split like SEAL's
        BFVDefault (one special prime from n = 4096; none below, so no key switching there) and
        a 20-bit batching prime t."""
    @staticmethod
    def from_bits(
        n: int, q_bits: Sequence[int], p_bits: Sequence[int], t_bits: int, key_switch_digits: Optional[int] = None
    ) -> "BfvParameters":
        """Primes generated from bit sizes (the largest NTT-friendly primes below each size, as
        SEAL's CoeffModulus::Create) and a batching prime t of ``t_bits`` bits."""
    @property
    def n(self) -> int:
        """Ring degree (a power of two); also the number of slots of a batch plaintext."""
    @property
    def ciphertext_moduli(self) -> list[int]:
        """Ciphertext primes q_0 .. q_{L-1}; modulus switching drops them from the end."""
    @property
    def special_moduli(self) -> list[int]:
        """Special primes of hybrid key switching (empty: no relinearisation or rotation)."""
    @property
    def plaintext_modulus(self) -> int:
        """Plaintext modulus t: all arithmetic on encrypted values is modulo t."""
    @property
    def key_switch_digits(self) -> int:
        """Number of digits the ciphertext primes are grouped into for key switching."""
    @property
    def max_level(self) -> int:
        """Top level L - 1; a ciphertext at level l lives modulo the first l + 1 primes."""
    @property
    def log2_qp(self) -> float:
        """log2 of the product of all primes, the quantity the security bound limits."""
    @property
    def id(self) -> str:
        """Content hash (64 hex digits) identifying the parameter set on the wire."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes."""
    @staticmethod
    def from_bytes(data: BytesLike) -> "BfvParameters":
        """Parses bytes from ``to_bytes`` and re-validates the set (SerializationError,
        SecurityError)."""
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class SecretKey:
    """The secret key. It stays with the client: it does not pickle (TypeError) and has no
    ``to_bytes``; storing it takes the explicit ``export_secret_key_bytes``."""
    @property
    def params(self) -> BfvParameters:
        """The parameters the key belongs to."""
    def export_secret_key_bytes(self) -> bytes:
        """The secret key's versioned bytes, to store it on purpose; never send them."""
    @staticmethod
    def import_secret_key_bytes(params: BfvParameters, data: BytesLike) -> "SecretKey":
        """Reads bytes from ``export_secret_key_bytes`` under the same parameters
        (SerializationError otherwise)."""

class PublicKey:
    """The public encryption key: anyone holding it can encrypt. Pickles."""
    @property
    def params(self) -> BfvParameters:
        """The parameters the key belongs to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed, bit-packed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: BytesLike) -> "PublicKey":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class RelinKey:
    """The relinearisation key, the evaluation key of ciphertext products."""
    @property
    def params(self) -> BfvParameters:
        """The parameters the key belongs to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed, bit-packed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: BytesLike) -> "RelinKey":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class GaloisKeys:
    """Rotation keys for a set of Galois elements (row rotations and the row swap)."""
    @property
    def galois_elements(self) -> list[int]:
        """Elements with a key, ascending: 3^k mod 2n rotates rows by k, 2n - 1 swaps them."""
    def __len__(self) -> int:
        """Number of keys."""
    @property
    def params(self) -> BfvParameters:
        """The parameters the keys belong to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed, bit-packed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: BytesLike) -> "GaloisKeys":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class Plaintext:
    """A plaintext polynomial: n coefficients modulo t. Made by an encoder or a Decryptor."""
    def coefficients(self) -> npt.NDArray[np.uint64]:
        """The n coefficients in [0, t) (a copy)."""
    @property
    def params(self) -> BfvParameters:
        """The parameters the plaintext belongs to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed, bit-packed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: BytesLike) -> "Plaintext":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class PreparedPlaintext:
    """A plaintext lifted to the primes of one level and transformed once, for repeated
    products with ciphertexts at that level (``Evaluator.mul_plain_prepared``)."""
    @property
    def level(self) -> int:
        """The level it was prepared for."""
    @property
    def params(self) -> BfvParameters:
        """The parameters the plaintext belongs to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed, bit-packed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: BytesLike) -> "PreparedPlaintext":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class Ciphertext:
    """A BFV ciphertext, kept in NTT form over the primes of its level. Pickles."""
    @property
    def level(self) -> int:
        """Level l: the ciphertext lives modulo the first l + 1 ciphertext primes."""
    @property
    def size(self) -> int:
        """Number of polynomials: 2, or 3 after ``Evaluator.multiply`` without relinearisation."""
    @property
    def params(self) -> BfvParameters:
        """The parameters the ciphertext belongs to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed, bit-packed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: BytesLike) -> "Ciphertext":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class SeededCiphertext:
    """A fresh symmetric encryption stored as (c0, 32-byte seed): half the bytes of a
    Ciphertext. ``expand()`` gives the full ciphertext to compute on."""
    @property
    def level(self) -> int:
        """Level of the ciphertext (the top level for a fresh encryption)."""
    def expand(self, params: Optional[BfvParameters] = None) -> Ciphertext:
        """The full ciphertext, with c1 regenerated from the seed (``params``, if given, must be
        the object's own)."""
    @property
    def params(self) -> BfvParameters:
        """The parameters the ciphertext belongs to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed, bit-packed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: BytesLike) -> "SeededCiphertext":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class KeyGenerator:
    """Samples the secret key from the OS CSPRNG, keeps it, and derives the other keys from it.
    Client side; it does not pickle."""
    def __init__(self, params: BfvParameters) -> None:
        """Generates a fresh secret key for ``params``."""
    def secret_key(self) -> SecretKey:
        """The secret key (the same one on every call)."""
    def public_key(self) -> PublicKey:
        """A fresh public key for the secret key."""
    def relin_key(self) -> RelinKey:
        """A fresh relinearisation key (MissingKeyError without special primes)."""
    def galois_keys(self, steps: Sequence[int], row_swap: bool = False) -> GaloisKeys:
        """Keys for row rotations by each step (negative: right; steps that are multiples of
        n/2 need no key) and, when asked, for the row swap."""
    @property
    def params(self) -> BfvParameters:
        """The parameters of the keys."""

class PublicEncryptor:
    """Public-key encryption (server side, or anyone); it can never hold a secret key."""
    def __init__(self, params: BfvParameters, public_key: PublicKey) -> None:
        """The public key must belong to ``params``."""
    def encrypt(self, plaintext: Plaintext) -> Ciphertext:
        """Encrypts at the top level."""
    def rerandomise(self, ciphertext: Ciphertext) -> Ciphertext:
        """The ciphertext plus a fresh encryption of zero at its level (same message)."""

class SecretEncryptor:
    """Secret-key encryption (client side)."""
    def __init__(self, params: BfvParameters, secret_key: SecretKey) -> None:
        """The secret key must belong to ``params``."""
    def encrypt(self, plaintext: Plaintext) -> SeededCiphertext:
        """Encrypts at the top level, seeded: half the bytes on the wire."""

class Decryptor:
    """Decrypts and measures the noise budget; holds the secret key (client side)."""
    def __init__(self, params: BfvParameters, secret_key: SecretKey) -> None:
        """The secret key must belong to ``params``."""
    def decrypt(self, ciphertext: Ciphertext) -> Plaintext:
        """The plaintext (correct while the noise budget is positive); accepts size 2 or 3."""
    def noise_budget(self, ciphertext: Ciphertext) -> float:
        """Invariant noise budget in bits; decryption is correct while it is positive."""

class Evaluator:
    """Homomorphic operations; holds no secret key (server side). Every method returns a new
    object; operands must share parameters and level (LycaonError otherwise)."""
    def __init__(self, params: BfvParameters) -> None:
        """An evaluator for ciphertexts under ``params``."""
    def add(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """a + b (slot-wise modulo t)."""
    def sub(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """a - b."""
    def negate(self, a: Ciphertext) -> Ciphertext:
        """-a."""
    def add_plain(self, a: Ciphertext, p: Plaintext) -> Ciphertext:
        """a + p."""
    def sub_plain(self, a: Ciphertext, p: Plaintext) -> Ciphertext:
        """a - p."""
    def mul_plain(self, a: Ciphertext, p: Plaintext) -> Ciphertext:
        """a * p (slot-wise for batch-encoded p); prepares p on every call."""
    def prepare_plain(self, p: Plaintext, level: Optional[int] = None) -> PreparedPlaintext:
        """Lifts and transforms p once for ``mul_plain_prepared`` at ``level`` (default: top)."""
    def mul_plain_prepared(self, a: Ciphertext, p: PreparedPlaintext) -> Ciphertext:
        """a * p for a plaintext prepared at a's level."""
    def mul_scalar(self, a: Ciphertext, scalar: int) -> Ciphertext:
        """a * scalar for any int (taken modulo t)."""
    def multiply(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """a * b without relinearisation: a ciphertext of size 3."""
    def multiply_relin(self, a: Ciphertext, b: Ciphertext, relin_key: RelinKey) -> Ciphertext:
        """a * b relinearised back to size 2."""
    def relinearize(self, a: Ciphertext, relin_key: RelinKey) -> Ciphertext:
        """A size-3 ciphertext back to size 2."""
    def rotate_rows(self, a: Ciphertext, step: int, galois_keys: GaloisKeys) -> Ciphertext:
        """Rotates both rows of n/2 slots left by ``step`` (right when negative);
        MissingKeyError when ``galois_keys`` lacks the rotation."""
    def rotate_rows_hoisted(self, a: Ciphertext, steps: Sequence[int], galois_keys: GaloisKeys) -> list[Ciphertext]:
        """One rotation per step, in step order, sharing one decomposition of ``a`` (hoisting):
        equal to ``[rotate_rows(a, s, galois_keys) for s in steps]``, faster."""
    def swap_rows(self, a: Ciphertext, galois_keys: GaloisKeys) -> Ciphertext:
        """Swaps the two rows of slots (keys made with ``row_swap=True``)."""
    def mod_switch_to_next(self, a: Ciphertext) -> Ciphertext:
        """Drops the last prime (level - 1); the message is unchanged."""
    def mod_switch_to(self, a: Ciphertext, level: int) -> Ciphertext:
        """Switches down to ``level`` (a no-op at the same level; never up)."""
    @property
    def params(self) -> BfvParameters:
        """The parameters of this evaluator."""

class BatchEncoder:
    """SIMD encoding: two rows of n/2 slots with slot-wise arithmetic modulo t (t must be a
    prime = 1 mod 2n; ParameterError otherwise)."""
    def __init__(self, params: BfvParameters) -> None:
        """An encoder for ``params``."""
    def encode(self, values: IntArray) -> Plaintext:
        """Up to n integers, zero-padded. Without negative values each must lie in [0, t); when
        any value is negative, all are reduced modulo t. Other dtypes, shapes or too many values
        raise LycaonError."""
    def decode(self, plaintext: Plaintext, signed: bool = False) -> npt.NDArray[np.integer]:
        """The n slots: uint64 in [0, t), or int64 in (-t/2, t/2] with ``signed=True``."""
    @property
    def slot_count(self) -> int:
        """Number of slots (n)."""
    @property
    def params(self) -> BfvParameters:
        """The parameters of this encoder."""

class CoeffEncoder:
    """Coefficient encoding: value i becomes the coefficient of X^i (products are negacyclic
    convolutions modulo X^n + 1 and t). Works for any t."""
    def __init__(self, params: BfvParameters) -> None:
        """An encoder for ``params``."""
    def encode(self, values: IntArray) -> Plaintext:
        """Up to n integers, zero-padded; the same value rules as ``BatchEncoder.encode``."""
    def decode(self, plaintext: Plaintext, signed: bool = False) -> npt.NDArray[np.integer]:
        """The n coefficients: uint64 in [0, t), or int64 in (-t/2, t/2] with ``signed=True``."""
    @property
    def slot_count(self) -> int:
        """Number of coefficients (n)."""
    @property
    def params(self) -> BfvParameters:
        """The parameters of this encoder."""

class NttLimb:
    """Benchmark helper: forward + inverse NTT of one limb in place, on internal random data, so
    that no conversion crosses the Python boundary."""
    def __init__(self, n: int, prime: int) -> None:
        """A plan for ring degree n and an NTT-friendly prime (prime and = 1 mod 2n)."""
    def roundtrip(self) -> None:
        """Forward then inverse NTT of the buffer (keeps the GIL: it runs for microseconds)."""
    @property
    def uses_ifma(self) -> bool:
        """Whether the AVX-512 IFMA path is in use (primes below 2^52 on IFMA CPUs)."""

def bench_info() -> dict[str, Union[str, bool, int]]:
    """How this build computes: version, backend, NTT library, whether IFMA is used, CPU
    features (x86-64), architecture, optimised build, allocator and thread count."""

def gpu_status(device: int = 0) -> dict[str, object]:
    """Whether this build has the CUDA backend (``built_with_cuda``) and whether device ``device``
    can be used (``available``); ``reason`` says why not (no CUDA build, no driver, no NVRTC, no
    device), ``device`` describes it when it can. Compiles no kernels."""

def gpu_bench(log_n: int = 16, limbs: int = 24, reps: int = 5, device: int = 0) -> dict[str, object]:
    """Times each CUDA kernel against the CPU reference at degree 2**log_n over ``limbs`` primes
    (median of ``reps``) and checks that every output matches the CPU bit for bit. Raises
    LycaonError when there is no usable CUDA backend (see ``gpu_status``)."""

def gpu_ops_bench(log_n: int = 16, levels: int = 24, reps: int = 5, device: str = "cuda:0") -> dict[str, object]:
    """Times CKKS operations on resident operands (ciphertexts, plaintexts and keys kept in the
    device's memory) against the host evaluator on every core, at degree 2**log_n with ``levels``
    levels (median of ``reps``), and checks that every result matches bit for bit. ``device`` is
    "cuda:N", or "cpu" for resident memory on the host (the reference implementation). Rows:
    ``op``, ``device_ms``, ``cpu_ms``, ``matches_cpu``; also ``key_bytes`` on the device and
    ``allocations_after_warmup`` (device buffers allocated after each operation's first run).
    Raises LycaonError when the device is unavailable."""

def ntt_primes(bits: int, n: int, count: int = 1) -> list[int]:
    """The ``count`` largest primes below 2**bits that are 1 modulo 2n, descending."""

def max_log_qp(n: int) -> Optional[int]:
    """The largest log2(QP) of a parameter set of ring degree ``n`` at 128-bit security (the HE
    standard's table for a ternary secret, as the Rust crates enforce it); None outside it."""

def security_table() -> dict[int, int]:
    """The whole 128-bit table: ring degree n -> largest log2(QP)."""

def profile_seconds() -> dict[str, float]:
    """CPU seconds this process has spent in each timed kernel (ntt, key_switch, ot_extension,
    ot_hash, serialize), summed over threads since it started; difference two calls around the
    work to profile."""

def noise_model_budgets(params: BfvParameters) -> list[tuple[str, float]]:
    """Predicted noise budgets (bits) of the analytical model for common operations."""

def plan_linear(algorithm: str, shape: dict[str, int], params: BfvParameters, options: Optional[dict[str, object]] = None) -> dict[str, object]:
    """What a linear-layer algorithm states for a layer without weights or keys: ciphertexts in and
    out, bytes up and down, Galois keys and their bytes, weight storage, the output scale and the
    operation counts. ``algorithm``: gazelle, walsh, padded, cheetah, cheetah-matvec, diagonal,
    hyena or batchwise; ``shape``: h, w, c_in, c_out, k (or kh, kw), stride, pad (or pad_h,
    pad_w), groups; ``options``: block, schedule ("IA" or "PA", gazelle), decomposition_bits
    (gazelle), batch (hyena, batchwise), kernels (batchwise: output channels per ciphertext)."""

def run_linear(
    algorithm: str,
    shape: dict[str, int],
    params: BfvParameters,
    x: npt.NDArray[np.int64],
    w: npt.NDArray[np.int64],
    reps: int = 1,
    options: Optional[dict[str, object]] = None,
) -> dict[str, object]:
    """Runs the layer as client and server on input ``x`` (batch*C*H*W) and weights ``w``
    ([out][in/groups][kh][kw]): the plan's statement plus server_s (median of ``reps``),
    encrypt_s, decrypt_s, measured bytes and counts, ``output`` (the decrypted result, uint64 mod
    t), ``exact`` (equals Rust's integer reference) and ``counts_match``."""

def run_two_party(
    op: str,
    modulus: int,
    share0: npt.NDArray[np.uint64],
    share1: npt.NDArray[np.uint64],
    ot: str = "silent",
    shift: int = 0,
    window: int = 1,
    to_modulus: Optional[int] = None,
    bits: Optional[int] = None,
    bandwidth_bytes_per_s: Optional[float] = None,
    latency_ms: float = 0.0,
    reps: int = 1,
    threads: Optional[int] = None,
) -> dict[str, object]:
    """Runs a two-party protocol with both parties in this process (two threads, an in-memory
    channel, optionally a modelled link) on additive shares ``share0`` (party 0's) and ``share1``
    of values modulo ``modulus`` (a power of two up to 2**64, or an odd prime below 2**62).
    ``op``: relu, relu_bounded (|x| within a quarter of the ring: one comparison on a prime ring),
    relu_within (Z_2^l, |x| < 2**bits: the comparison runs on ``bits`` bits), truncate_relu
    (Z_2^l: truncate by ``shift``, then ReLU on the ``bits - shift`` bits left), drelu, truncate or truncate_exact (by ``shift`` bits), maxpool (``window`` consecutive values per
    window), convert (to ``to_modulus``) or less_than (party 0's values < party 1's, ``bits``
    wide; the shares are then the two parties' private inputs). ``threads``: workers per party
    (each party its own pool; None: both share the process's). ``ot``: "silent" (Ferret) or
    "iknp". Returns out0 and out1 (the output shares; bits as 0/1 for drelu and less_than),
    seconds, bytes (sent by both parties) and rounds of one run (mean of ``reps`` runs in one
    session), amortized_bytes (bytes with silent OT's iterations priced by the COTs the run used,
    as a long session pays them, instead of the whole iterations the run happened to trigger),
    setup_seconds and setup_bytes (the OT setup), and per-party counters."""

def simulate_json(request: str) -> str:
    """Simulates packings and dataflows of 000 (Hyena) on an accelerator model.

    ``request`` is JSON: ``{"model": NAME | [layers] | {"name", "layers"} | MAESTRO .m text,
    "packing": "all" | NAME, "arch": "hyena" | "f1" | TOML text, "batch": N}``. Returns a JSON list
    of results (one per packing) with ``latency_s``, ``energy_j``, ``rotations``, ``mults``,
    ``ntts``, ``keyswitches``, ``bytes`` per data structure, per-component latency and energy and
    per-layer details. Raises ``LycaonError`` on an unknown model, packing or architecture,
    malformed TOML or JSON, or an invalid layer or batch."""
    ...

def reproduction_json() -> str:
    """The reproduction table against 000 as JSON: a list of ``{"figure", "paper", "ours",
    "deviation", "ours_real_networks", "unit", "tolerance", "within_tolerance", "explanation"}``."""
    ...

def reproduction_003_json() -> str:
    """The reproduction table against 003 (Cheetah's accelerator) as JSON: a list of ``{"what",
    "paper", "ours", "deviation", "within_tolerance", "documented_deviation", "explanation"}``
    (``documented_deviation``: the ``[low, high]`` band a row outside 25% is explained for, or null)."""
    ...

def dse_json(request: str) -> str:
    """The design-space exploration of 003 (Cheetah): HE-PTune parameters per layer, then latency,
    area and power (5 nm) of every accelerator of ``pes`` x ``lanes``.

    ``request`` is JSON: ``{"model": NAME | {"name", "layers"}, "pes": [..], "lanes": [..],
    "schedule": "partial_aligned" | "input_aligned", "max_n": 4096, "table_vi": true}``; ``pes`` and
    ``lanes`` default to 003's sweep (powers of two, 2-1024 and 4-8192). Returns JSON ``{"model",
    "schedule", "layers", "points", "pareto_area", "pareto_power", "table_vi"}``, each point with
    ``pes``, ``lanes``, ``latency_s``, ``area_mm2``, ``power_w``, ``energy_j``, ``lane_utilisation``
    and breakdowns. Raises ``LycaonError`` on malformed JSON, an unknown model or a zero or empty range."""
    ...

def arch_toml(name: str) -> str:
    """The TOML text of a built-in accelerator (``"hyena"`` or ``"f1"``): edit it and pass the text
    (or its file, on the command line) as ``arch`` to describe a custom accelerator. Raises
    ``LycaonError`` on an unknown name."""
    ...

def plan_json(request: str) -> str:
    """Tunes a network's linear layers for the hybrid mode: per layer the BFV parameters and
    algorithm with the lowest predicted latency that keep a non-negative noise margin.

    ``request`` is JSON: ``{"layers": [{"name", "shape": {"h", "w", "c_in", "c_out", "k",
    "stride", "pad", "groups"}, "weight_bits", "t_bits"}], "link": "lan" | "wan" | "BW,DELAY",
    "failure_probability": 2^-40, "reserve_bits": 0, "algorithms": [], "design_space": false,
    "cache": PATH}``. Per-operation costs are measured on this machine the first time a parameter
    shape is priced and cached (``~/.cache/lycaon/op-costs-v2.json`` unless ``cache`` says otherwise).
    Returns the plan as JSON. Releases the GIL. Raises LycaonError on a bad request or when no
    parameter set fits a layer.
    """
    ...

def keyset_json(request: str) -> str:
    """The rotation-keyset planner of 004: power-of-two, all-required and level-aware keysets with
    exact key bytes and predicted rotation latency.

    ``request`` is JSON: ``{"model": "resnet20", "params": "joo2024" | "lycaon" | {...},
    "activation": "aespa" | "composite_relu" | "both", "hybrid_plan": {...}, "calibrate": false,
    "table": false}``. Returns JSON: the FHE ResNet-20 report with the comparison to 004's Tables
    3-4, or, for a hybrid plan, the keys per parameter set. Releases the GIL.
    """
    ...

# ---------------------------------------------------------------------------------------------
# CKKS: approximate arithmetic on real and complex vectors (canonical-embedding encoding)

ComplexLike = Union[float, complex]

class CkksParameters:
    """Validated CKKS parameters (128-bit security enforced) with the top-level scale. Level l
    has the canonical scale ``scale_at(l)``: fresh encryptions, products of canonical
    ciphertexts after a rescale, and constant products all land on it exactly."""
    @staticmethod
    def from_bits(n: int, q_bits: Sequence[int], p_bits: Sequence[int], log_scale: int, key_switch_digits: Optional[int] = None) -> "CkksParameters":
        """Largest NTT-friendly primes below each size (SEAL's choice), digits fitted under P."""
    @staticmethod
    def scale_stable(n: int, log_q0: int, log_scale: int, levels: int, p_bits: Sequence[int]) -> "CkksParameters":
        """Primes that keep the canonical scale within ~2^-20 of 2^log_scale at every level."""
    @property
    def n(self) -> int:
        """Ring degree n (a power of two)."""
    @property
    def max_slots(self) -> int:
        """n / 2."""
    @property
    def max_level(self) -> int:
        """Top level L - 1; a ciphertext at level l lives modulo the first l + 1 primes."""
    @property
    def ciphertext_moduli(self) -> list[int]:
        """Ciphertext primes q_0 .. q_{L-1}; rescaling drops them from the end."""
    @property
    def special_moduli(self) -> list[int]:
        """Special primes P of hybrid key switching."""
    @property
    def key_switch_digits(self) -> int:
        """Number of digits the ciphertext primes are grouped into for key switching."""
    @property
    def log2_qp(self) -> float:
        """log2 of the product of all primes, the quantity the security bound limits."""
    @property
    def scale(self) -> float:
        """The scale of the top level."""
    def scale_at(self, level: int) -> float:
        """The canonical scale of a level."""
    @property
    def id(self) -> str:
        """Content hash of the prime chain (64 hex digits)."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too)."""
    @staticmethod
    def from_bytes(data: BytesLike) -> "CkksParameters":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class CkksSecretKey:
    """The secret key (client side). It does not pickle (TypeError) and has no ``to_bytes``;
    storing it takes the explicit ``export_secret_key_bytes``."""
    @property
    def params(self) -> CkksParameters:
        """The parameters this object belongs to."""
    def export_secret_key_bytes(self) -> bytes:
        """The secret key's versioned bytes, to store it on purpose; never send them."""
    @staticmethod
    def import_secret_key_bytes(params: CkksParameters, data: BytesLike) -> "CkksSecretKey":
        """Reads bytes from ``export_secret_key_bytes`` under the same parameters
        (SerializationError otherwise)."""

class CkksPublicKey:
    """The public encryption key: anyone holding it can encrypt."""
    @property
    def params(self) -> CkksParameters:
        """The parameters this object belongs to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too)."""
    @staticmethod
    def from_bytes(params: CkksParameters, data: BytesLike) -> "CkksPublicKey":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class CkksRelinKey:
    """The relinearisation key (evaluation key for ciphertext products)."""
    @property
    def memory_bytes(self) -> int:
        """Bytes the key occupies in memory (8 bytes per residue)."""
    @property
    def level(self) -> int:
        """The highest ciphertext level the key serves."""
    @property
    def params(self) -> CkksParameters:
        """The parameters this object belongs to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too)."""
    @staticmethod
    def from_bytes(params: CkksParameters, data: BytesLike) -> "CkksRelinKey":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class CkksGaloisKeys:
    """Keys for slot rotations (Galois element 5^k mod 2n) and conjugation (2n - 1)."""
    @property
    def galois_elements(self) -> list[int]:
        """The Galois elements with a key, ascending."""
    @property
    def memory_bytes(self) -> int:
        """Bytes all keys occupy in memory (8 bytes per residue)."""
    @property
    def params(self) -> CkksParameters:
        """The parameters this object belongs to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too)."""
    @staticmethod
    def from_bytes(params: CkksParameters, data: BytesLike) -> "CkksGaloisKeys":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class CkksKeyGenerator:
    """Samples the secret key from the OS CSPRNG and derives the other keys (client side)."""
    def __init__(self, params: CkksParameters) -> None:
        """Generates a fresh secret key for ``params``."""
    def secret_key(self) -> CkksSecretKey:
        """The secret key (the same one on every call)."""
    def public_key(self) -> CkksPublicKey:
        """A fresh public key for the secret key."""
    def relin_key(self, level: Optional[int] = None) -> CkksRelinKey:
        """A fresh relinearisation key; with ``level``, it serves ciphertexts at levels <= ``level`` only."""
    def galois_keys(self, steps: Sequence[int], conjugate: bool = False, level: Optional[int] = None, levels: Optional[Sequence[int]] = None) -> CkksGaloisKeys:
        """Keys for rotations by each step (slot j receives slot j + step) and conjugation; with
        ``level``, each key serves ciphertexts at levels <= ``level`` only (smaller keys); with
        ``levels`` (one per step, 004's level-aware keyset), each step's key at its own level."""

class CkksPlaintext:
    """An encoded message: round(scale * m) at a level, with its slot count."""
    @property
    def level(self) -> int:
        """The level (number of primes minus one)."""
    @property
    def scale(self) -> float:
        """The scale: the message is carried as round(scale * m)."""
    @property
    def slots(self) -> int:
        """The slot count (a power of two up to n/2)."""
    @property
    def params(self) -> CkksParameters:
        """The parameters this object belongs to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too)."""
    @staticmethod
    def from_bytes(params: CkksParameters, data: BytesLike) -> "CkksPlaintext":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class CkksCiphertext:
    """Decrypts to round(scale * m) + noise, at a level, with a slot count."""
    @property
    def level(self) -> int:
        """The level (number of primes minus one)."""
    @property
    def scale(self) -> float:
        """The scale: the message is carried as round(scale * m)."""
    @property
    def slots(self) -> int:
        """The slot count (a power of two up to n/2)."""
    @property
    def size(self) -> int:
        """2, or 3 after a product without relinearisation."""
    @property
    def params(self) -> CkksParameters:
        """The parameters this object belongs to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too)."""
    @staticmethod
    def from_bytes(params: CkksParameters, data: BytesLike) -> "CkksCiphertext":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class CkksSeededCiphertext:
    """A fresh symmetric encryption as (c0, seed): half the bytes of a ciphertext."""
    def expand(self) -> CkksCiphertext:
        """The full ciphertext, its uniform half re-expanded from the seed."""
    @property
    def params(self) -> CkksParameters:
        """The parameters this object belongs to."""
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too)."""
    @staticmethod
    def from_bytes(params: CkksParameters, data: BytesLike) -> "CkksSeededCiphertext":
        """Parses bytes from ``to_bytes`` under the same parameters (SerializationError otherwise)."""

class CkksEncoder:
    """Canonical-embedding encoding of real or complex vectors (any power-of-two slot count up to
    n/2; a short vector uses len rounded up to a power of two slots)."""
    def __init__(self, params: CkksParameters) -> None:
        """An encoder for ``params``."""
    def encode(self, values: Union[npt.ArrayLike, Sequence[ComplexLike]], level: Optional[int] = None, scale: Optional[float] = None, slots: Optional[int] = None) -> CkksPlaintext:
        """Defaults: the top level and its canonical scale."""
    def decode(self, plaintext: CkksPlaintext) -> npt.NDArray[np.complex128]:
        """All slots as a complex128 array."""
    def decode_real(self, plaintext: CkksPlaintext) -> npt.NDArray[np.float64]:
        """The real parts of all slots as a float64 array."""

class CkksPublicEncryptor:
    """Public-key encryption (server side, or anyone); it can never hold a secret key."""
    def __init__(self, params: CkksParameters, public_key: CkksPublicKey) -> None:
        """The public key must belong to ``params``."""
    def encrypt(self, plaintext: CkksPlaintext) -> CkksCiphertext:
        """Encrypts at the plaintext's level and scale."""
    def rerandomise(self, ciphertext: CkksCiphertext) -> CkksCiphertext:
        """The ciphertext plus a fresh encryption of zero at its level (same message and scale)."""

class CkksSecretEncryptor:
    """Secret-key encryption (client side)."""
    def __init__(self, params: CkksParameters, secret_key: CkksSecretKey) -> None:
        """The secret key must belong to ``params``."""
    def encrypt(self, plaintext: CkksPlaintext) -> CkksSeededCiphertext:
        """Encrypts at the plaintext's level and scale, seeded: half the bytes on the wire."""

class CkksDecryptor:
    """Holds the secret key (client side)."""
    def __init__(self, params: CkksParameters, secret_key: CkksSecretKey) -> None:
        """The secret key must belong to ``params``."""
    def decrypt(self, ciphertext: CkksCiphertext) -> CkksPlaintext:
        """The plaintext of a ciphertext (size 2 or 3), with its scale and slots."""

class CkksLinearTransform:
    """A plaintext matrix by its non-zero diagonals with its baby-step giant-step split: the
    rotation steps its evaluation needs keys for, and its product in the clear (the evaluation
    itself runs in the runtime)."""
    def __init__(self, params: CkksParameters, diagonals: dict[int, npt.ArrayLike], slots: Optional[int] = None, double_hoisting: bool = True) -> None:
        """Diagonals {k: d_k} with d_k[t] = M[t][(t + k) mod slots]; ``slots`` defaults to their length."""
    def rotations(self) -> list[int]:
        """The rotation steps the evaluation needs Galois keys for."""
    @property
    def slots(self) -> int:
        """Slots of the vectors the matrix acts on."""
    @property
    def baby_steps(self) -> int:
        """The baby-step count n1 of the split."""
    @property
    def diagonal_count(self) -> int:
        """Number of non-zero diagonals."""
    def apply_plain(self, values: npt.ArrayLike) -> npt.NDArray[np.complex128]:
        """M v in the clear, the reference the encrypted result approximates."""

class CkksBootstrapParams:
    """The shape of a bootstrappable parameter set and of its circuit."""
    @staticmethod
    def logn16_full_slots() -> "CkksBootstrapParams":
        """logN = 16, 2^15 slots, 10 residual levels at 2^40, 128-bit secure, sparse-secret encapsulation."""
    @staticmethod
    def toy(log_n: int, log_slots: int, residual_levels: int) -> "CkksBootstrapParams":
        """The same circuit at another ring degree (below logN = 16 ``parameters()`` refuses it: not 128-bit secure)."""
    @property
    def log_n(self) -> int:
        """log2 of the ring degree."""
    @property
    def slots(self) -> int:
        """Slots bootstrapped (a power of two up to n/2)."""
    @property
    def residual_levels(self) -> int:
        """Levels left for computation after bootstrapping."""
    @property
    def log_scale(self) -> int:
        """log2 of the scale of the messages bootstrapped (2^40 at the residual levels)."""
    @property
    def top_level(self) -> int:
        """The top level L of the bootstrapping chain (ModRaise lands here)."""
    @property
    def encapsulation_weight(self) -> Optional[int]:
        """Hamming weight of the ephemeral sparse secret ModRaise runs under, or None."""
    def parameters(self) -> CkksParameters:
        """The CKKS parameters of the shape (128-bit security checked)."""

def ckks_threads() -> int:
    """Threads of the pool CKKS evaluation runs on in this process (RAYON_NUM_THREADS when the pool starts)."""

def chebyshev_coefficients(f: "object", a: float, b: float, degree: int) -> list[float]:
    """Chebyshev interpolation coefficients of the callable f on [a, b]."""

def composite_relu(degrees: Optional[list[int]] = None) -> dict[str, object]:
    """Lee et al.'s composite minimax sign for ReLU(x) = x (1 + sgn x) / 2 on [-1, 1]: stage
    degrees (odd; default 15, 15, 27), the gap chosen for ReLU's error. Returns "stages" (each
    stage's Chebyshev coefficients on [-1, 1], applied in order; all but the last scaled into
    [-1, 1]), "low", "sign_error", "relu_error" and "depth" (levels, the product with x included)."""

def precision_stats(expected: npt.ArrayLike, got: npt.ArrayLike) -> dict[str, float]:
    """Bits of precision: min_bits, mean_bits, median_bits, max_bits and max_error."""

# FHE-mode layers (crates/lycaon-nn/src/fhe): lycaon.fhe_resnet reads their layouts, rotation
# steps and counts at compile time; the runtime evaluates them.

Layout = tuple[int, int, int, int, int]

def multiplexed_pack(channels: int, height: int, width: int, gap: int, slots: int, tensor: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The multiplexed packing of a (C, h, w) tensor (flattened) at gap k into ``slots`` slots,
    every copy filled (h, w, k, slots powers of two)."""

def multiplexed_unpack(channels: int, height: int, width: int, gap: int, slots: int, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The (C, h, w) tensor (flattened) read back from copy 0 of decoded slots."""

class FheMpConv:
    """A multiplexed convolution on one ciphertext: padding f/2, stride 1 or 2, two levels; by
    Lee et al.'s MPConv ("mpconv"), by block diagonals with baby and giant steps ("bsgs"), or
    by whichever has the lower estimated time ("auto", what the compiler takes)."""
    def __init__(self, input: Layout, c_out: int, kernel: int, stride: int, weights: npt.NDArray[np.float64], method: str = "auto") -> None:
        """``input`` = (C, h, w, gap, slots); ``weights`` = [C_out][C][f][f] flattened."""
    @property
    def output_layout(self) -> Layout:
        """(C_out, h / s, w / s, gap s, slots)."""
    @property
    def method(self) -> str:
        """"mpconv" or "bsgs": the algorithm this layer runs."""
    def rotation_steps(self) -> list[int]:
        """Every rotation step the evaluation needs a key for."""
    def counts(self) -> tuple[int, int, int, int]:
        """(rotations, plaintext products, rescales, depth) from the algorithm's structure."""

class FheCaConv:
    """HyPHEN's CAConv: from the gap-1 multiplexed packing (CA, one ciphertext) to the RA
    packing (one ciphertext per output channel, replicated), stride 1, one level."""
    def __init__(self, input: Layout, c_out: int, kernel: int, weights: npt.NDArray[np.float64]) -> None:
        """``input`` = (C, h, w, 1, slots); ``weights`` = [C_out][C][f][f] flattened."""
    def rotation_steps(self) -> list[int]:
        """Every rotation step the evaluation needs a key for."""
    def counts(self) -> tuple[int, int, int, int]:
        """(rotations, plaintext products, rescales, depth) from the algorithm's structure."""

class FheRaConv:
    """HyPHEN's RAConv: from the RA packing (one ciphertext per input channel) to the gap-1
    multiplexed packing (CA), stride 1, one level."""
    def __init__(self, c_in: int, height: int, width: int, slots: int, c_out: int, kernel: int, weights: npt.NDArray[np.float64]) -> None:
        """``c_in`` RA channels of ``height`` x ``width``; ``weights`` = [C_out][C_in][f][f] flattened."""
    @property
    def output_layout(self) -> Layout:
        """(C_out, h, w, 1, slots)."""
    def rotation_steps(self) -> list[int]:
        """Every rotation step the evaluation needs a key for."""
    def counts(self) -> tuple[int, int, int, int]:
        """(rotations, plaintext products, rescales, depth) from the algorithm's structure."""

class FheAvgPoolFc:
    """Global average pooling into a fully connected layer on a multiplexed packing (one level)."""
    def __init__(self, params: CkksParameters, input: Layout, n_out: int, weights: npt.NDArray[np.float64], bias: npt.NDArray[np.float64]) -> None:
        """``weights`` = [n_out][C] flattened; ``bias`` has n_out values."""
    def rotation_steps(self) -> list[int]:
        """Every rotation step the evaluation needs a key for."""

# Hybrid runtime (crates/lycaon-runtime): lycaon.hybrid wraps these.

class FheWorker:
    """What one worker process of an FHE server's Ray fanout holds (``lycaon.cluster``): the
    program prepared once, and each session's evaluation keys. ``FheWorker(program_json,
    threads=0)``; its ops run on ``threads`` threads (0: all cores)."""

    def __init__(self, program_json: str, threads: int = 0) -> None:
        """Prepares the program (layers built, vectors encoded at the planned levels)."""
    @property
    def threads(self) -> int:
        """Threads an op runs on."""
    def add_key_message(self, session: int, message: bytes) -> None:
        """The next of a session's key messages (the key header first), parsed as it comes on a
        thread of its own; errors: this message or one before it is malformed or not what the
        program needs."""
    def keys_complete(self, session: int) -> int:
        """Every key message of the session has come: waits for the parse; returns the keys'
        size in memory."""
    def has_keys(self, session: int) -> bool:
        """Whether this worker holds the session's keys."""
    def end_session(self, session: int) -> None:
        """Drops the session's keys."""
    def sessions_held(self) -> int:
        """Sessions whose keys this worker holds."""
    def run(self, session: int, batch_json: str, inputs: list[bytes]) -> tuple[list[bytes], str]:
        """One batch of the session's ops ({"ops", "inputs", "outputs"} as the server cuts it) on
        its serialised input ciphertexts: (the serialised outputs in order, statistics JSON)."""

class LinearWorker:
    """What one worker process of a Ray fanout holds (``lycaon.cluster``): the program's linear
    layers with the server's integer weights, and per session the public key and Galois keys of
    the layers in flight. ``LinearWorker(program_json, weights, flood_bits=None, threads=0)``;
    its evaluations run on ``threads`` threads (0: all cores)."""

    def __init__(self, program_json: str, weights: dict[str, dict[str, npt.NDArray[np.int64]]], flood_bits: Optional[float] = None, threads: int = 0) -> None:
        """Compiles the program and checks the weights (nothing is prepared)."""
    @property
    def threads(self) -> int:
        """Threads an evaluation runs on."""
    def add_key(self, session: int, set: int, element: int, message: bytes) -> None:
        """Takes one key of a session: the client's message with exactly the Galois key of
        ``element``, or its public key for ``set`` when ``element`` is 0."""
    def drop_key(self, session: int, set: int, element: int) -> None:
        """Drops that key (no later layer of the session uses it)."""
    def end_session(self, session: int) -> None:
        """Drops every key of the session."""
    def held_keys(self, session: int) -> list[tuple[int, int]]:
        """[(set, element)] of the session's keys held here (element 0: the public key)."""
    def evaluate(self, session: int, layer: str, start: int, end: int, inputs: list[bytes]) -> tuple[bytes, list[bytes]]:
        """Output units start..end of linear layer ``layer`` on serialised input ciphertexts,
        answered as the server answers: (the 32-byte seed of the masks the responses carry, the
        responses to the output ciphertexts in order)."""

class HybridServer:
    """A server for one model in either mode: ``HybridServer(program_json, weights, options)``
    for a hybrid program and the server's integer weights ({name: {"weight": int64 array,
    "bias": int64 array}}), ``HybridServer.fhe(program_json, options)`` for an FHE program.
    options_json: {"max_sessions", "timeout_s", "max_message_bytes", "link", "flood_bits",
    "prepared_weights_bytes", "metadata", "flood_precision_bits" (FHE: bits the answers' noise
    flooding leaves; 0: none)}."""

    def __init__(self, program_json: str, weights: dict[str, dict[str, npt.NDArray[np.int64]]], options_json: str, fanout: Optional[object] = None) -> None:
        """Compiles the program, checks and prepares the weights, works out each layer's flooding.
        With ``fanout`` (``lycaon.cluster.RayFanout``), the linear layers run on its workers."""
    @staticmethod
    def fhe(program_json: str, options_json: str, fanout: Optional[object] = None) -> "HybridServer":
        """A server of an FHE program (prepared once; sessions bring their public keys). With
        ``fanout`` (``lycaon.cluster.RayFheFanout``: ``width``, ``key_message``, ``keys_complete``, ``run``,
        ``session_ended``), every session's ops run on its workers and the server keeps no
        evaluation key."""
    @property
    def mode(self) -> str:
        """"hybrid" or "fhe"."""
    def start(self, addr: str) -> str:
        """Serves on ``addr`` in background threads; returns the bound address."""
    def stop(self) -> None:
        """Stops accepting connections; sessions in progress finish."""
    def serve(self, addr: str) -> None:
        """Serves on ``addr`` until interrupted (Ctrl-C)."""
    def logs(self) -> list[str]:
        """Every log line since start (JSON): sessions, per-op seconds and bytes, errors."""
    def program_json(self) -> str:
        """The public program clients receive."""
    def flooding(self) -> list[tuple[str, int]]:
        """log2 of each linear layer's flooding bound."""

def hybrid_infer(addr: str, x_int: npt.NDArray[np.int64], options_json: str = "{}", progress: "object | None" = None) -> str: ...
def hybrid_fetch_program(addr: str, options_json: str = "{}") -> str: ...
def hybrid_local(program_json: str, weights: dict[str, dict[str, npt.NDArray[np.int64]]], x_int: npt.NDArray[np.int64], options_json: str = "{}", progress: "object | None" = None) -> str: ...
def fetch_public_model(addr: str, options_json: str = "{}") -> str:
    """What a server (either mode) serves: {"mode", "program"} (JSON)."""
    ...

class FheSession:
    """One client's FHE session (the runtime's client: the secret key stays inside); keys made
    and sent when it opens. options_json: {"timeout_s", "flood_precision_bits" (local only),
    "keyset": "level-aware" | "all-required", "device": "cpu" | "cuda:N"}."""

    @staticmethod
    def connect(addr: str, options_json: str = "{}", on_keys: "object | None" = None) -> "FheSession":
        """Connects to an FHE server and sends this client's keys."""
    @staticmethod
    def local(program_json: str, options_json: str = "{}", on_keys: "object | None" = None) -> "FheSession":
        """Both halves in this process (the server's on a thread, over an in-memory channel)."""
    @property
    def program_json(self) -> str:
        """The public program (JSON)."""
    @property
    def keys(self) -> str:
        """{"upload_bytes", "key_bytes", "galois_keys", "keys_s"} (JSON)."""
    def infer(self, x: npt.NDArray[np.float64], progress: "object | None" = None) -> str:
        """One query; the outcome (JSON: logits, label, timings, bytes, the server's report)."""
    def close(self) -> "str | None":
        """Ends the session; a local server's summary (JSON)."""

def fhe_rotation_plan(program_json: str) -> str:
    """The rotation keys the program's ops use, {step: highest level} (JSON)."""
    ...
def fhe_schedule(program_json: str, workers: int) -> str:
    """The steps of one query with the ops on ``workers`` workers (JSON: [{"local": [unit],
    "batches": [{"units", "inputs", "outputs"}]}]; units {"op": i}, {"term": [i, part]} or
    {"finish": i}), as a server with a Ray fanout cuts it. Prepares the program."""
    ...
def fhe_program_facts(program_json: str) -> str:
    """{"bootstraps", "refreshes", "rotation_keys", "rotation_levels", "relin_level", "input_level", "ops"} (JSON)."""
    ...
def ckks_bench_ops(spec_json: str, device: str = "cpu") -> str:
    """Each CKKS operation timed by the runtime on ``device`` (lycaon bench ckks, Lycaon's side); JSON."""
    ...
def ckks_bench_bootstrap(seed: int = 1, device: str = "cpu") -> str:
    """One logN = 16 full-slot bootstrapping, timed by the runtime on ``device``; JSON."""
    ...

# FHE compiler (crates/lycaon-runtime/src/fhe/compile): lycaon.fhe_compiler wraps these.

def fhe_compile(graph_json: str, options_json: str = "{}") -> str:
    """The FHE program (JSON) of a model-front graph (``lycaon.frontend.graph_json``) under
    ``options_json``: {"name", "metadata", "path": "leveled" | "bootstrapped", "log_scale",
    "log_q0", "p_bits", "log_n", "bounds": {tensor: bound}, "relu_degrees", "hyphen",
    "placement": "greedy" | "fewest", "bootstrap_shape": "auto" (default) | "logn16_full_slots" |
    "logn16_slots11" .. "logn16_slots14"}. Releases the GIL; raises LycaonError
    naming the node and the reason."""
    ...

def fhe_compile_path(graph_json: str, options_json: str = "{}") -> str:
    """{"path", "reason"} (JSON): the compiler path the graph takes and why."""
    ...
