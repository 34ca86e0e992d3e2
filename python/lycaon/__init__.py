"""Lycaon: homomorphic encryption for private inference.

This release holds the BFV scheme (exact arithmetic modulo t on encrypted integers) over Lycaon's
RNS/NTT core. Client-side objects (``KeyGenerator``, ``Decryptor``) hold the secret key; the
server-side ``Evaluator`` never does.
"""

from ._native import (
    BatchEncoder,
    BfvParameters,
    Ciphertext,
    CoeffEncoder,
    Decryptor,
    Encryptor,
    Evaluator,
    GaloisKeys,
    KeyGenerator,
    LycaonError,
    MissingKeyError,
    NttLimb,
    ParameterError,
    Plaintext,
    PreparedPlaintext,
    PublicKey,
    RelinKey,
    SecretKey,
    SecurityError,
    SeededCiphertext,
    SerializationError,
    bench_info,
    noise_model_budgets,
    ntt_primes,
    plan_linear,
    run_linear,
    run_two_party,
)

__version__ = "0.1.0"

__all__ = [
    "BatchEncoder",
    "BfvParameters",
    "Ciphertext",
    "CoeffEncoder",
    "Decryptor",
    "Encryptor",
    "Evaluator",
    "GaloisKeys",
    "KeyGenerator",
    "LycaonError",
    "MissingKeyError",
    "NttLimb",
    "ParameterError",
    "Plaintext",
    "PreparedPlaintext",
    "PublicKey",
    "RelinKey",
    "SecretKey",
    "SecurityError",
    "SeededCiphertext",
    "SerializationError",
    "bench_info",
    "noise_model_budgets",
    "ntt_primes",
    "plan_linear",
    "run_linear",
    "run_two_party",
    "__version__",
]
