"""Type stubs for Lycaon's native module (Rust, via PyO3)."""

from typing import Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

IntArray = Union[npt.NDArray[np.integer], Sequence[int]]

class LycaonError(ValueError):
    """Base class of every Lycaon error."""

class ParameterError(LycaonError):
    """Invalid encryption parameters."""

class SecurityError(ParameterError):
    """Parameters below 128-bit security per the homomorphic encryption standard."""

class SerializationError(LycaonError):
    """Bytes that are not a valid Lycaon object (truncated, corrupted, wrong version/kind/parameters)."""

class MissingKeyError(LycaonError):
    """An evaluation key the operation needs is absent."""

class BfvParameters:
    """Validated BFV parameters: ring degree n, ciphertext primes, special primes, plaintext modulus t."""

    def __init__(self, n: int, ciphertext_moduli: Sequence[int], special_moduli: Sequence[int], plaintext_modulus: int, key_switch_digits: Optional[int] = None) -> None: ...
    @staticmethod
    def default(n: int) -> "BfvParameters":
        """The largest 128-bit modulus for n (4096..32768, also 1024/2048 without key switching), SEAL's split, 20-bit batching t."""
    @staticmethod
    def from_bits(n: int, q_bits: Sequence[int], p_bits: Sequence[int], t_bits: int, key_switch_digits: Optional[int] = None) -> "BfvParameters":
        """Primes generated from bit sizes (the largest NTT-friendly primes below each size)."""
    @property
    def n(self) -> int: ...
    @property
    def ciphertext_moduli(self) -> list[int]: ...
    @property
    def special_moduli(self) -> list[int]: ...
    @property
    def plaintext_modulus(self) -> int: ...
    @property
    def key_switch_digits(self) -> int: ...
    @property
    def max_level(self) -> int:
        """Top level; a ciphertext at level l lives modulo the first l + 1 primes."""
    @property
    def log2_qp(self) -> float: ...
    @property
    def id(self) -> str:
        """Content hash (hex) identifying the parameter set on the wire."""
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> "BfvParameters": ...

class SecretKey:
    """The secret key. It stays with the client; serialise it only to store it."""
    @property
    def params(self) -> BfvParameters: ...
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: bytes) -> "SecretKey": ...

class PublicKey:
    @property
    def params(self) -> BfvParameters: ...
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: bytes) -> "PublicKey": ...

class RelinKey:
    @property
    def params(self) -> BfvParameters: ...
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: bytes) -> "RelinKey": ...

class GaloisKeys:
    @property
    def galois_elements(self) -> list[int]: ...
    def __len__(self) -> int: ...
    @property
    def params(self) -> BfvParameters: ...
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: bytes) -> "GaloisKeys": ...

class Plaintext:
    def coefficients(self) -> npt.NDArray[np.uint64]: ...
    @property
    def params(self) -> BfvParameters: ...
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: bytes) -> "Plaintext": ...

class PreparedPlaintext:
    """A plaintext lifted to Q_level and transformed once, for repeated products."""
    @property
    def level(self) -> int: ...
    @property
    def params(self) -> BfvParameters: ...
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: bytes) -> "PreparedPlaintext": ...

class Ciphertext:
    @property
    def level(self) -> int: ...
    @property
    def size(self) -> int:
        """Number of polynomials: 2, or 3 after multiply() without relinearisation."""
    @property
    def params(self) -> BfvParameters: ...
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: bytes) -> "Ciphertext": ...

class SeededCiphertext:
    """A fresh symmetric encryption sent as (c0, 32-byte seed): half the bytes."""
    @property
    def level(self) -> int: ...
    def expand(self, params: BfvParameters) -> Ciphertext: ...
    @property
    def params(self) -> BfvParameters: ...
    def to_bytes(self) -> bytes:
        """Versioned, checksummed bytes (pickling uses them too, with the parameters)."""
    @staticmethod
    def from_bytes(params: BfvParameters, data: bytes) -> "SeededCiphertext": ...

class KeyGenerator:
    """Samples the secret key from the OS CSPRNG and derives the other keys from it."""
    def __init__(self, params: BfvParameters) -> None: ...
    def secret_key(self) -> SecretKey: ...
    def public_key(self) -> PublicKey: ...
    def relin_key(self) -> RelinKey: ...
    def galois_keys(self, steps: Sequence[int], row_swap: bool = False) -> GaloisKeys:
        """Keys for row rotations by each step (negative: right) and optionally the row swap."""
    @property
    def params(self) -> BfvParameters: ...

class Encryptor:
    def __init__(self, params: BfvParameters, public_key: Optional[PublicKey] = None, secret_key: Optional[SecretKey] = None) -> None: ...
    def encrypt(self, plaintext: Plaintext) -> Ciphertext:
        """Public-key encryption at the top level."""
    def encrypt_symmetric(self, plaintext: Plaintext) -> SeededCiphertext:
        """Secret-key encryption, seeded."""

class Decryptor:
    def __init__(self, params: BfvParameters, secret_key: SecretKey) -> None: ...
    def decrypt(self, ciphertext: Ciphertext) -> Plaintext: ...
    def noise_budget(self, ciphertext: Ciphertext) -> float:
        """Invariant noise budget in bits; decryption is correct while it is positive."""

class Evaluator:
    """Homomorphic operations; holds no secret key."""
    def __init__(self, params: BfvParameters) -> None: ...
    def add(self, a: Ciphertext, b: Ciphertext) -> Ciphertext: ...
    def sub(self, a: Ciphertext, b: Ciphertext) -> Ciphertext: ...
    def negate(self, a: Ciphertext) -> Ciphertext: ...
    def add_plain(self, a: Ciphertext, p: Plaintext) -> Ciphertext: ...
    def sub_plain(self, a: Ciphertext, p: Plaintext) -> Ciphertext: ...
    def mul_plain(self, a: Ciphertext, p: Plaintext) -> Ciphertext: ...
    def prepare_plain(self, p: Plaintext, level: Optional[int] = None) -> PreparedPlaintext:
        """Lifts and transforms a plaintext once (default: the top level)."""
    def mul_plain_prepared(self, a: Ciphertext, p: PreparedPlaintext) -> Ciphertext: ...
    def mul_scalar(self, a: Ciphertext, scalar: int) -> Ciphertext: ...
    def multiply(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """Product without relinearisation (3 polynomials)."""
    def multiply_relin(self, a: Ciphertext, b: Ciphertext, relin_key: RelinKey) -> Ciphertext: ...
    def relinearize(self, a: Ciphertext, relin_key: RelinKey) -> Ciphertext: ...
    def rotate_rows(self, a: Ciphertext, step: int, galois_keys: GaloisKeys) -> Ciphertext:
        """Rotates both rows of n/2 slots left by step (right when negative)."""
    def rotate_rows_hoisted(self, a: Ciphertext, steps: Sequence[int], galois_keys: GaloisKeys) -> list[Ciphertext]:
        """Several rotations sharing one decomposition of the ciphertext."""
    def swap_rows(self, a: Ciphertext, galois_keys: GaloisKeys) -> Ciphertext: ...
    def mod_switch_to_next(self, a: Ciphertext) -> Ciphertext: ...
    def mod_switch_to(self, a: Ciphertext, level: int) -> Ciphertext: ...
    @property
    def params(self) -> BfvParameters: ...

class BatchEncoder:
    """SIMD encoding: two rows of n/2 slots with slot-wise arithmetic modulo t."""
    def __init__(self, params: BfvParameters) -> None: ...
    def encode(self, values: IntArray) -> Plaintext:
        """Up to n integers of any sign, reduced modulo t."""
    def decode(self, plaintext: Plaintext, signed: bool = False) -> npt.NDArray[np.integer]: ...
    @property
    def slot_count(self) -> int: ...

class CoeffEncoder:
    """Coefficient encoding: value i becomes the coefficient of X^i."""
    def __init__(self, params: BfvParameters) -> None: ...
    def encode(self, values: IntArray) -> Plaintext: ...
    def decode(self, plaintext: Plaintext, signed: bool = False) -> npt.NDArray[np.integer]: ...
    @property
    def slot_count(self) -> int: ...

class NttLimb:
    """Forward + inverse NTT of one limb in place (benchmark helper)."""
    def __init__(self, n: int, prime: int) -> None: ...
    def roundtrip(self) -> None: ...
    @property
    def uses_ifma(self) -> bool: ...

def ntt_primes(bits: int, n: int, count: int = 1) -> list[int]:
    """The `count` largest primes below 2**bits that are 1 modulo 2n, descending."""

def noise_model_budgets(params: BfvParameters) -> list[tuple[str, float]]:
    """Predicted noise budgets (bits) of the analytical model for common operations."""
