"""Lycaon: homomorphic encryption for private inference.

This release holds the BFV scheme (exact arithmetic modulo t on encrypted integers) and the CKKS
scheme (approximate arithmetic on real and complex vectors) over Lycaon's RNS/NTT core. BFV
client-side objects (``KeyGenerator``, ``Decryptor``) hold the secret key; the server-side
``Evaluator`` never does. CKKS from Python is the client side only (``CkksParameters``,
``CkksKeyGenerator``, ``CkksEncoder``, the encryptors, ``CkksDecryptor``, keys and ciphertexts)
plus what the FHE compilers read (``CkksLinearTransform``'s rotation steps,
``CkksBootstrapParams``, the ``Fhe*`` layers' keys and counts): homomorphic CKKS evaluation and
bootstrapping run in the Rust runtime (``Server``/``Client`` in FHE mode, ``lycaon serve --mode
fhe``, ``lycaon bench ckks``; in Rust, ``lycaon_ckks::Evaluator``). The packing, dataflow and
accelerator simulator (sweeps, reproduction tables, HTML reports) is ``lycaon.simulate``; the
planner (per-layer parameters and algorithms, noise and cost models, rotation keysets) is
``lycaon.plan``; their JSON entry points are exported here. Hybrid private inference (homomorphic
linear layers, two-party ReLU and truncation) is ``Server(model).start()`` on the side with the
weights and ``Client(address).infer(images)`` on the side with the images (``lycaon.hybrid``).
"""

import os as _os

# The native module's allocator (mimalloc) hands freed memory back to the OS after this many
# milliseconds. Its default, 10 ms, makes the large buffers of every key switch page-fault
# afresh: ResNet-20's first 15 FHE ops took 89 s with it and 76 s with 1000 ms (system time 68 ->
# 26 s) at the same peak memory (+0.1 GB); never handing back (-1) took 73 s but +1.4 GB. With
# the block-diagonal convolutions, its first 22 ops (`MIMALLOC_PURGE_DELAY=D fhe_profile PROGRAM
# 22`): 1000 ms 60.4 s server time (24 s system), 10000 ms 56.0 s (20 s), 30000 ms 57.3 s (17
# s); peak 15.67, 15.91, 15.97 GB. Set before the module loads; a value the user set wins.
_os.environ.setdefault("MIMALLOC_PURGE_DELAY", "10000")

from ._native import (  # noqa: E402
    BatchEncoder,
    BfvParameters,
    Ciphertext,
    CkksBootstrapParams,
    CkksCiphertext,
    CkksDecryptor,
    CkksEncoder,
    CkksPublicEncryptor,
    CkksGaloisKeys,
    CkksKeyGenerator,
    CkksLinearTransform,
    CkksParameters,
    CkksPlaintext,
    CkksPublicKey,
    CkksRelinKey,
    CkksSecretEncryptor,
    CkksSecretKey,
    CkksSeededCiphertext,
    chebyshev_coefficients,
    ckks_threads,
    composite_relu,
    precision_stats,
    FheAvgPoolFc,
    FheCaConv,
    FheMpConv,
    FheRaConv,
    multiplexed_pack,
    multiplexed_unpack,
    CoeffEncoder,
    Decryptor,
    Evaluator,
    GaloisKeys,
    KeyGenerator,
    LycaonError,
    MissingKeyError,
    NttLimb,
    ParameterError,
    Plaintext,
    PreparedPlaintext,
    PublicEncryptor,
    PublicKey,
    RelinKey,
    SecretEncryptor,
    SecretKey,
    SecurityError,
    SeededCiphertext,
    SerializationError,
    arch_toml,
    bench_info,
    gpu_bench,
    gpu_ops_bench,
    gpu_status,
    dse_json,
    keyset_json,
    max_log_qp,
    noise_model_budgets,
    ntt_primes,
    profile_seconds,
    plan_json,
    plan_linear,
    reproduction_003_json,
    reproduction_json,
    run_linear,
    run_two_party,
    security_table,
    simulate_json,
)
from .hybrid import Client, Server

__version__ = "0.1.0"

__all__ = [
    "BatchEncoder",
    "BfvParameters",
    "Ciphertext",
    "CkksBootstrapParams",
    "CkksCiphertext",
    "CkksDecryptor",
    "CkksEncoder",
    "CkksPublicEncryptor",
    "CkksGaloisKeys",
    "CkksKeyGenerator",
    "CkksLinearTransform",
    "CkksParameters",
    "CkksPlaintext",
    "CkksPublicKey",
    "CkksRelinKey",
    "CkksSecretEncryptor",
    "CkksSecretKey",
    "CkksSeededCiphertext",
    "Client",
    "chebyshev_coefficients",
    "ckks_threads",
    "composite_relu",
    "precision_stats",
    "FheAvgPoolFc",
    "FheCaConv",
    "FheMpConv",
    "FheRaConv",
    "multiplexed_pack",
    "multiplexed_unpack",
    "CoeffEncoder",
    "Decryptor",
    "Evaluator",
    "GaloisKeys",
    "KeyGenerator",
    "LycaonError",
    "MissingKeyError",
    "NttLimb",
    "ParameterError",
    "Plaintext",
    "PreparedPlaintext",
    "PublicEncryptor",
    "PublicKey",
    "RelinKey",
    "SecretEncryptor",
    "SecretKey",
    "SecurityError",
    "SeededCiphertext",
    "SerializationError",
    "Server",
    "arch_toml",
    "bench_info",
    "gpu_bench",
    "gpu_ops_bench",
    "gpu_status",
    "dse_json",
    "keyset_json",
    "max_log_qp",
    "noise_model_budgets",
    "ntt_primes",
    "profile_seconds",
    "plan_json",
    "plan_linear",
    "reproduction_003_json",
    "reproduction_json",
    "run_linear",
    "run_two_party",
    "security_table",
    "simulate_json",
    "__version__",
]
