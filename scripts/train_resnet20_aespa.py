"""Trains ResNet-20 (option-A shortcuts) with AESPA activations (002 Sec. 3; Park et al.,
arXiv:2201.06699) from scratch on the CIFAR-10 training set in ../shared/data, folds each trained
HerPN into one quadratic a x^2 + b x + c per channel, and, with --ship, writes
python/lycaon/models/resnet20_aespa_cifar10.npz and its registry entry.

The network is lycaon_benchmarks.torch_models.ResNetCifarAespa (every batch-norm + ReLU of the
ReLU ResNet-20 is a HerPN: Hermite bases h_1, h_2 of degree <= 2, each batch-normalised, weighted
by ReLU's Hermite coefficients, then gamma, beta); frontend/aespa.py has the formulas, the folding and the numpy
forward of the folded network. The accuracy reported and shipped is that of the folded network
(numpy, float64) on all 10,000 test images, after checking that it gives the same logits as the
trained network (to 1e-4 of the largest logit).

The default schedule is the one the shipped ReLU ResNet-20 (88.18%, 74 epochs) had in effect, so
the two accuracies compare: one cycle of 30 epochs at peak 0.1, then warm restarts (cosine to 0)
of 8, 24 and 12 epochs at peaks 0.02, 0.04, 0.02; SGD with Nesterov momentum 0.9, weight decay
5e-4, batches of 128, random crops and flips. Checkpoints every epoch and resumes from the
checkpoint (rerun the same command), so a CPU run can span sessions; on a GPU the training set
is kept and augmented there (about 5 s an epoch on an H200), and --train-only stops after the last
checkpoint so that another machine folds, tests and ships. Needs torch and lycaon-benchmarks:
pip install -e 'benchmarks[train]'.

The shipped weights (87.45%): --epochs 50 --restart-epochs 0 on an H200, --train-only, then
--ship here. Their ReLU twin, scripts/train_resnet20.py under the same options: 87.92%.

    python scripts/train_resnet20_aespa.py [--checkpoint ~/.cache/lycaon/resnet20_aespa.pt] [--threads 1] [--ship]
    python scripts/train_resnet20_aespa.py --limit 64 --epochs 1 --restart-epochs 0 --checkpoint /tmp/smoke.pt   # smoke test
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from lycaon.frontend import aespa, resnet, zoo
from lycaon_benchmarks.torch_models import HerPN2d, ResNetCifarAespa
from lycaon.models import ship
from lycaon_benchmarks.torch_training import augment, evaluate, save_checkpoint, training_tensors

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "python" / "lycaon" / "models"


def folded_weights(net: ResNetCifarAespa) -> dict:
    """Convolution and linear weights as trained, each HerPN as `{name}.a/.b/.c` (aespa.fold)."""
    out = {k: v.detach().cpu().numpy().astype(np.float64) for k, v in net.state_dict().items()
           if k.endswith(("conv1.weight", "conv2.weight")) or k.startswith("linear.")}
    for name, module in net.named_modules():
        if isinstance(module, HerPN2d):
            frozen = {k: (v.cpu().numpy() if torch.is_tensor(v) else v) for k, v in module.frozen().items()}
            out[f"{name}.a"], out[f"{name}.b"], out[f"{name}.c"] = aespa.fold(**frozen)
    return out


def subset(n_total: int, limit: int | None, seed: int) -> np.ndarray:
    """All rows, or `limit` rows drawn at random (the files are sorted by class)."""
    if not limit:
        return np.arange(n_total)
    return np.sort(np.random.default_rng(seed).permutation(n_total)[:limit])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=30, help="epochs of the main one-cycle schedule")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--checkpoint", type=Path, default=Path.home() / ".cache" / "lycaon" / "resnet20_aespa.pt")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--restart-epochs", default="8,24,12", help="after the main schedule, warm restarts (SGDR) of these many epochs each, comma-separated; 0 for none")
    ap.add_argument("--restart-lr", default="0.02,0.04,0.02", help="peak learning rate of each warm restart, comma-separated or one for all")
    ap.add_argument("--limit", type=int, default=0, help="train and test on this many images only (smoke tests)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads for torch (the machine is shared)")
    ap.add_argument("--check-images", type=int, default=200, help="test images on which the folded network must match the trained one")
    ap.add_argument("--ship", action="store_true", help="write the folded weights and the registry entry into python/lycaon/models")
    ap.add_argument("--train-only", action="store_true", help="stop after the last epoch's checkpoint; rerun without it (on any machine) to evaluate, fold and ship")
    args = ap.parse_args()
    restarts = [int(e) for e in args.restart_epochs.split(",") if int(e) > 0]
    restart_lrs = [float(v) for v in args.restart_lr.split(",")]
    restart_lrs = (restart_lrs * len(restarts))[:len(restarts)] if len(restart_lrs) == 1 else restart_lrs
    if restarts and len(restart_lrs) != len(restarts):
        ap.error("--restart-lr needs one value or one per warm restart")
    if args.ship and args.limit:
        ap.error("--ship takes the full data sets, not --limit")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    train_x, train_y = zoo.cifar10("train")
    test_x, test_y = zoo.cifar10("test")
    keep = subset(len(train_x), args.limit, args.seed)
    train_x, train_y = train_x[keep], train_y[keep]
    keep = subset(len(test_x), args.limit, args.seed + 1)
    test_x, test_y = test_x[keep], test_y[keep]
    xt, yt = training_tensors(resnet.preprocess(train_x), train_y, device)
    xv = torch.tensor(resnet.preprocess(test_x), dtype=torch.float32)
    yv = torch.tensor(test_y, dtype=torch.long)
    net = ResNetCifarAespa(20).to(device)
    per_epoch = (len(xt) + args.batch - 1) // args.batch
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)

    # One cycle over the main epochs, then warm restarts: cosine from each restart's peak to 0
    # (Loshchilov and Hutter 2017). Phase k starts at boundaries[k]; checkpoints resume any phase.
    boundaries = [0, args.epochs]
    for extra in restarts:
        boundaries.append(boundaries[-1] + extra)
    total_epochs = boundaries[-1]
    schedule = {"epochs": args.epochs, "lr": args.lr, "batch": args.batch, "restarts": restarts, "restart_lrs": restart_lrs[:len(restarts)], "limit": args.limit}

    def phase_of(epoch: int) -> int:
        return max(k for k in range(len(boundaries) - 1) if boundaries[k] <= epoch)

    def scheduler(phase: int):
        if phase == 0:
            return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.epochs * per_epoch, pct_start=0.15)
        for group in opt.param_groups:
            group["lr"] = group["initial_lr"] = restart_lrs[phase - 1]
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=restarts[phase - 1] * per_epoch)

    start = 0
    sched = scheduler(0) if args.epochs else None
    if args.checkpoint.is_file():
        state = torch.load(args.checkpoint, map_location=device)
        # Phase boundaries come from the command line: resuming under another schedule would
        # silently train a different model.
        if state.get("schedule") != schedule:
            sys.exit(f"{args.checkpoint} was written under schedule {state.get('schedule')}, not {schedule}; rerun with the same options or another --checkpoint")
        net.load_state_dict(state["model"])
        start = state["epoch"]
        # The scheduler of a phase is built before the optimizer state is restored, so a resumed
        # phase keeps its learning rate instead of jumping back to the phase's peak.
        if start < total_epochs and start not in boundaries:
            sched = scheduler(phase_of(start))
        opt.load_state_dict(state["opt"])
        if start < total_epochs and start not in boundaries:
            sched.load_state_dict(state["sched"])
        torch.set_rng_state(state["rng"].cpu())
        print(f"resuming after epoch {start}", flush=True)
    print(f"{len(xt)} training and {len(xv)} test images, {total_epochs} epochs, {device}, {torch.get_num_threads()} threads", flush=True)
    for epoch in range(start, total_epochs):
        if epoch in boundaries[1:]:
            sched = scheduler(phase_of(epoch))
        net.train()
        began = time.time()
        perm = torch.randperm(len(xt), device=xt.device)
        total = torch.zeros((), device=device)
        for k in range(0, len(xt), args.batch):
            idx = perm[k:k + args.batch]
            loss = F.cross_entropy(net(augment(xt[idx]).to(device)), yt[idx].to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.detach() * len(idx)
        total = float(total)  # one synchronisation an epoch, not one a step
        if not np.isfinite(total):
            # x^2 terms can blow up; never let a diverged model overwrite a good checkpoint.
            sys.exit(f"epoch {epoch + 1}: the loss is not finite; the checkpoint of epoch {epoch} is kept")
        save_checkpoint({"model": net.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "epoch": epoch + 1,
                         "rng": torch.get_rng_state(), "schedule": schedule}, args.checkpoint)
        msg = f"epoch {epoch + 1}/{total_epochs}: loss {total / len(xt):.4f}, lr {opt.param_groups[0]['lr']:.4f}, {time.time() - began:.0f} s"
        if (epoch + 1) % 5 == 0 or epoch + 1 in boundaries:
            msg += f", test accuracy {evaluate(net, xv, yv, device):.4f}"
        print(msg, flush=True)

    if args.train_only:
        return
    # Fold, then check the folded network against the trained one in float64, so that only the
    # folding (not float32 rounding) is measured.
    net.eval()
    weights = folded_weights(net)
    k = min(args.check_images, len(xv))
    with torch.no_grad():
        reference = copy.deepcopy(net).double().cpu()(xv[:k].double()).numpy()
    folded = aespa.forward(weights, xv[:k].numpy())
    rel = float(np.abs(folded - reference).max() / np.abs(reference).max())
    print(f"folded vs trained network on {k} test images: largest difference {rel:.2e} of the largest logit", flush=True)
    if not rel <= 1e-4:
        sys.exit("the folded quadratics do not reproduce the trained network")
    absmax: dict = {}
    logits = aespa.forward(weights, resnet.preprocess(test_x), absmax=absmax)
    accuracy = float((logits.argmax(1) == test_y).mean())
    print("largest |input| of each quadratic on the test images: " + ", ".join(f"{n} {v:.1f}" for n, v in absmax.items()), flush=True)
    print(f"test accuracy (folded quadratics, numpy float64, {len(test_y)} images): {accuracy:.4f}", flush=True)
    if args.ship:
        ship(OUT, "resnet20-aespa-cifar10", "cifar10", weights, accuracy, len(test_y), "scripts/train_resnet20_aespa.py", epochs=total_epochs,
             activation="aespa-quadratic", schedule={k: v for k, v in schedule.items() if k != "limit"})
        print(f"shipped {OUT / 'resnet20_aespa_cifar10.npz'}", flush=True)


if __name__ == "__main__":
    main()
