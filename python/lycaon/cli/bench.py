"""``lycaon bench``: each suite runs Lycaon and, unless told not to, its peer libraries in the same run."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    bench = sub.add_parser("bench", help="benchmarks against peer libraries")
    bench_sub = bench.add_subparsers(dest="suite", required=True)
    bfv = bench_sub.add_parser("bfv", help="BFV operations, Lycaon and SEAL in one run")
    bfv.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    bfv.add_argument("--reps", type=int, default=20, help="timed runs per operation (median; default 20)")
    bfv.add_argument("--n", type=int, nargs="+", default=[4096, 8192], help="ring degrees (4096 and/or 8192)")
    ckks = bench_sub.add_parser("ckks", help="CKKS operations and bootstrapping, Lycaon, SEAL and Lattigo in one run")
    ckks.add_argument("--json", metavar="FILE", help="write the records as JSON")
    ckks.add_argument("--reps", type=int, default=5, help="timed runs per operation (median; default 5)")
    ckks.add_argument("--logn", type=int, nargs="+", default=[14, 16], choices=[14, 16], help="ring degrees as log2 (default: 14 16)")
    ckks.add_argument("--no-peer", action="store_true", help="skip SEAL and Lattigo")
    ckks.add_argument("--bootstrap", action=argparse.BooleanOptionalAction, default=False,
                      help="also one logN = 16 bootstrapping per library (off by default: Lattigo's keys take ~17 GB, Lycaon's ~9 GB; run one at a time)")
    ckks.add_argument("--bootstrap-only", action="store_true", help="only the logN = 16 bootstrapping (implies --bootstrap)")
    ckks.add_argument("--threads", type=int, help="Lycaon's threads and Lattigo's GOMAXPROCS (default: the CPU count)")
    ckks.add_argument("--device", default="cpu", metavar="cpu|cuda:N", help="where Lycaon's side runs (default cpu)")
    gpu = bench_sub.add_parser("gpu", help="the CUDA backend's kernels against the CPU, bit-exact check included (says why when there is no GPU)")
    gpu.add_argument("--json", metavar="FILE", help="write the result as JSON ({\"gpu\": null, \"reason\": ...} without a GPU)")
    gpu.add_argument("--logn", type=int, default=16, help="ring degree as log2 (default 16)")
    gpu.add_argument("--limbs", type=int, default=24, help="RNS limbs (default 24)")
    gpu.add_argument("--reps", type=int, default=5, help="timed runs per kernel (median; default 5)")
    gpu.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    lin = bench_sub.add_parser("linear", help="encrypted convolutions: every algorithm, and SPU CHEETAH on ResNet-20's layers")
    lin.add_argument("--json", metavar="FILE", help="write the records as JSON")
    lin.add_argument("--reps", type=int, default=1, help="server evaluations per layer (median; default 1)")
    lin.add_argument("--layers", choices=["all", "paper", "resnet20"], default="all", help="001's Tables 2-4, ResNet-20's layers, or both")
    lin.add_argument("--no-peer", action="store_true", help="skip SPU")
    mpc = bench_sub.add_parser("mpc", help="two-party ReLU, truncation and truncate+ReLU on Z_2^64, Z_2^37 and Z_p with IKNP and silent OT, and SPU CHEETAH on the same")
    mpc.add_argument("--json", metavar="FILE", help="write the records as JSON")
    mpc.add_argument("--reps", type=int, default=3, help="runs per protocol in one session (mean; default 3)")
    mpc.add_argument("--large", action="store_true", help="also 2^20 elements")
    mpc.add_argument("--no-peer", action="store_true", help="skip SPU")
    mpc.add_argument("--bandwidth", type=float, metavar="MB_S", help="model Lycaon's link at this many MB/s (e.g. 9, 384); no SPU ratios then")
    mpc.add_argument("--latency-ms", type=float, default=0.0, help="one-way delay of the modelled link (e.g. 50, 0.3)")
    mpc.add_argument("--threads", type=int, metavar="N", help="worker threads per party, each party its own pool (1: single-threaded parties); default: both share the process's")
    fhe_b = bench_sub.add_parser("fhe", help="FHE-mode private inference: Orion's MLP and LeNet-5 through Lycaon and Orion in one run, key memory per keyset strategy, ResNet-20's status")
    fhe_b.add_argument("--json", metavar="FILE", help="write the records as JSON")
    fhe_b.add_argument("--images", type=int, default=2, help="bundled MNIST test images per network (default 2)")
    fhe_b.add_argument("--models", nargs="+", default=["mlp", "lenet5", "resnet20"], metavar="NAME",
                       help="mlp, lenet5 (against Orion), resnet20 (AESPA activations), resnet20-relu (the reference ReLU ResNet-20 through the composite minimax "
                            "ReLU, ~20 min an image), resnet18-imagenet (002's ResNet-18 at 224 x 224, random weights and inputs; see --ops), or any other network "
                            "the FHE mode serves (e.g. resnet56-reference: composite ReLU, ~45 min an image), run on --resnet20-images test images of its data set")
    fhe_b.add_argument("--resnet20-images", type=int, default=1, help="CIFAR-10 test images for ResNet-20 (default 1; AESPA: about 17 GB, keys in 1 minute, then 8 minutes an image; resnet20-relu: 19 minutes an image)")
    fhe_b.add_argument("--resnet20-first", type=int, default=0, metavar="K", help="skip the first K images of ResNet-20's seeded test sample (runs on several machines or sessions add up)")
    fhe_b.add_argument("--resnet20-log", metavar="FILE", help="append each ResNet-20 image's record to FILE as one JSON line as soon as it is decrypted")
    fhe_b.add_argument("--resnet20-packing", choices=["mpconv", "hyphen", "both"], default="hyphen",
                       help="ResNet-20's convolutions: HyPHEN's changing packing in stage 1 (default), one multiplexed packing throughout (mpconv), or both on each image (an A/B in one process)")
    fhe_b.add_argument("--device", default="cpu", metavar="DEV", help="where Lycaon's server runs the CKKS work: cpu (default) or cuda:N (sessions resident on the GPU; needs a wheel built with feature cuda)")
    fhe_b.add_argument("--ops", type=int, metavar="N", help="resnet18-imagenet: run only its first N ops (with the keys they use) and check the decrypted tensor "
                       "against the float twin's (the whole network: about 36 minutes and 22 GiB here)")
    fhe_b.add_argument("--no-peer", action="store_true", help="skip Orion (it needs the optional orion-fhe package)")
    fhe_b.add_argument("--peer-python", metavar="PATH", help="a Python interpreter that has orion-fhe (default: $LYCAON_ORION_PYTHON, else this one)")
    e2e = bench_sub.add_parser("e2e", help="private inference end to end: ResNet-20 and LeNet-5 against SPU CHEETAH on the lan and wan links, "
                               "where the time goes, concurrent sessions, ResNet-50's bytes")
    e2e.add_argument("--json", metavar="FILE", help="write the records, settings and every part as JSON")
    e2e.add_argument("--models", nargs="+", metavar="NAME", help="ImageNet-size networks end to end instead (resnet50 squeezenet mobilenet_v2 densenet121 vgg16 "
                     "mobilenet_v1; resnet20 at CIFAR-10 shape): random weights and calibration, each party in its own process, peak RSS, the planner beside each layer")
    e2e.add_argument("--algorithm", action="append", default=[], metavar="NAME",
                     help="with --models: convolutions by this algorithm only (e.g. walsh), each model also run with the conventional packed one (gazelle)")
    e2e.add_argument("--resnet20-images", type=int, default=2, help="CIFAR-10 test images for ResNet-20 (default 2; 0 skips it)")
    e2e.add_argument("--lenet5-images", type=int, default=3, help="MNIST test images for LeNet-5 (default 3; 0 skips it)")
    e2e.add_argument("--no-peer", action="store_true", help="skip SPU (it needs lycaon-benchmarks and the optional spu package: pip install -e 'benchmarks[peers]')")
    e2e.add_argument("--peer-weights", choices=("secret", "private"), default="secret",
                     help="SPU's weights secret-shared by alice (default) or plaintext at alice (Priv2k, Cheetah's setting)")
    e2e.add_argument("--concurrency-model", choices=("auto", "resnet20", "lenet5", "none"), default="auto",
                     help="model for the 1/4/10-session latency study (auto: ResNet-20 if ten of its sessions take at most 3 minutes, else LeNet-5)")
    e2e.add_argument("--no-resnet50", action="store_true", help="skip ResNet-50's planned bytes")
    e2e.add_argument("--flood-bits", type=float, default=40.0, help="statistical security of the server's noise flooding (default 40)")
    e2e.add_argument("--faithful-truncation", action="store_true", help="Lycaon truncates with an error of up to one unit (fewer rounds) instead of exactly")
    e2e.add_argument("--threads", type=int, metavar="N", help="worker threads of each Lycaon process (each party's, in --models runs; 1: single-threaded parties; default: the cores)")
    scale = bench_sub.add_parser("scale", help="past one machine: one hybrid inference with its linear layers on 1, 2 and 4 single-threaded Ray workers, "
                                 "one FHE inference with its ops on 1 and 2, and models of N machines (needs pip install 'lycaon[ray]')")
    scale.add_argument("--models", nargs="*", default=["resnet20-cifar10"], metavar="NAME", help="hybrid: resnet20-cifar10 (default; bundled weights) and/or an "
                       "ImageNet network of bench e2e --models (e.g. resnet50; random weights); none to skip")
    scale.add_argument("--fhe-models", nargs="*", default=["wide-cnn"], metavar="NAME", help="FHE: wide-cnn (default; random weights, two ciphertexts a tensor) "
                       "and/or resnet20 (bundled AESPA weights; about 13 GB per worker); none to skip")
    scale.add_argument("--fhe-workers", type=int, nargs="+", default=[1, 2], metavar="N", help="FHE worker counts to measure (default 1 2)")
    scale.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], metavar="N", help="worker counts to measure (default 1 2 4)")
    scale.add_argument("--link-gbps", type=float, default=10.0, help="bandwidth of the modelled links between machines (default 10 Gbit/s)")
    scale.add_argument("--link-ms", type=float, default=0.1, help="one-way delay of the modelled links (default 0.1 ms)")
    scale.add_argument("--sessions", type=int, default=4, metavar="K", help="concurrent sessions for sessions per minute over 1 and 2 replicas (default 4; 0 skips it)")
    scale.add_argument("--json", metavar="FILE", help="write the records as JSON")


def run(args) -> int:
    if args.suite == "bfv":
        from lycaon.bench import bfv as bench_bfv  # noqa: PLC0415

        bench_bfv.run(args.n, args.reps, args.json)
        return 0
    if args.suite == "ckks":
        from lycaon.bench import ckks as bench_ckks  # noqa: PLC0415

        bench_ckks.run(args.logn, args.reps, args.json, peer=not args.no_peer, bootstrap=args.bootstrap, threads=args.threads,
                       bootstrap_only=args.bootstrap_only, device=args.device)
        return 0
    if args.suite == "gpu":
        from lycaon.bench import gpu as bench_gpu  # noqa: PLC0415

        bench_gpu.run(args.json, args.logn, args.limbs, args.reps, args.device)
        return 0
    if args.suite == "linear":
        from lycaon.bench import linear as bench_linear  # noqa: PLC0415

        layers = {"all": None, "paper": bench_linear.PAPER_LAYERS, "resnet20": bench_linear.RESNET20_LAYERS}[args.layers]
        bench_linear.run(layers, args.reps, args.json, peer=not args.no_peer)
        return 0
    if args.suite == "fhe":
        from lycaon.bench import fhe as bench_fhe  # noqa: PLC0415

        if args.images < 1:
            raise ValueError("--images must be at least 1")
        if args.resnet20_images < 1 or args.resnet20_first < 0:
            raise ValueError("--resnet20-images must be at least 1 and --resnet20-first at least 0")
        bench_fhe.run(args.models, args.images, args.json, peer=not args.no_peer, peer_python=args.peer_python, resnet20_images=args.resnet20_images,
                      resnet20_first=args.resnet20_first, resnet20_log=args.resnet20_log, resnet20_packing=args.resnet20_packing, ops=args.ops,
                      device=args.device)
        return 0
    if args.suite == "e2e" and args.models:
        from lycaon.bench import imagenet as bench_imagenet  # noqa: PLC0415

        unknown = sorted(set(args.models) - set(bench_imagenet.MODELS))
        if unknown:
            raise ValueError(f"--models: unknown {', '.join(unknown)} (known: {', '.join(bench_imagenet.MODELS)})")
        bench_imagenet.run(args.models, args.json, algorithms=args.algorithm, compare_packed=bool(args.algorithm))
        return 0
    if args.suite == "e2e":
        from lycaon.bench import e2e as bench_e2e  # noqa: PLC0415

        counts = {"resnet20-cifar10": args.resnet20_images, "lenet5-mnist": args.lenet5_images}
        if any(n < 0 for n in counts.values()) or not any(counts.values()):
            raise ValueError("--resnet20-images and --lenet5-images must be >= 0, and one of them positive")
        concurrency = {"resnet20": "resnet20-cifar10", "lenet5": "lenet5-mnist"}.get(args.concurrency_model, args.concurrency_model)
        bench_e2e.run({m: n for m, n in counts.items() if n}, args.json, peer=not args.no_peer, peer_weights=args.peer_weights, exact_truncation=not args.faithful_truncation,
                      concurrency_model=concurrency, resnet50=not args.no_resnet50, flood_bits=args.flood_bits)
        return 0
    if args.suite == "scale":
        from lycaon.bench import scale as bench_scale  # noqa: PLC0415

        if any(w < 1 for w in [*args.workers, *args.fhe_workers]):
            raise ValueError("--workers, --fhe-workers: each count must be at least 1")
        bench_scale.run(args.models, args.json, link_gbps=args.link_gbps, link_ms=args.link_ms, workers=args.workers, sessions=args.sessions,
                        fhe_models=args.fhe_models, fhe_workers=args.fhe_workers)
        return 0
    if args.suite == "mpc":
        from lycaon.bench import mpc as bench_mpc  # noqa: PLC0415

        bench_mpc.run((2**16, 2**20) if args.large else (2**16,), args.reps, args.json, peer=not args.no_peer,
                      bandwidth_mb_s=args.bandwidth, latency_ms=args.latency_ms, threads=args.threads)
        return 0
