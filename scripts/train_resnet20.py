"""Trains ResNet-20 (option-A shortcuts, as resnet.resnet_cifar) from scratch on the CIFAR-10
training set in ../shared/data and writes the weights Lycaon ships
(python/lycaon/models/resnet20_cifar10.npz) with their accuracy in registry.json.

Uses a GPU when one is present; checkpoints every epoch and resumes from the checkpoint, so a CPU
run (about 1.5-2.5 minutes an epoch on 2 cores) can span sessions. Needs torch and lycaon-benchmarks:
pip install -e 'benchmarks[train]'.

    python scripts/train_resnet20.py [--epochs 30] [--checkpoint ~/.cache/lycaon/resnet20.pt] [--threads 1] [--ship]

The ReLU twin of the AESPA network (002's comparison: same schedule, only the activation differs)
is this script under scripts/train_resnet20_aespa.py's options, without --ship.

The shipped model (88.18%): 38 epochs (--epochs 38), warm restarts of 8 and 24 epochs at peaks
0.02 and 0.04 (87.88% after 62 epochs), then from those weights one more warm restart:
--init resnet20_cifar10.npz --init-epochs 62 --epochs 0 --restart-epochs 12 --restart-lr 0.02.
(Stochastic weight averaging at a constant 0.01 for 10 epochs, --swa-epochs, gave 87.87%.)

The accuracy in the registry is measured by Lycaon's own float executor on all 10,000 test images.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from lycaon.models import ship
from lycaon_benchmarks.torch_training import augment, evaluate, save_checkpoint, training_tensors
from lycaon.frontend import resnet, run_float, zoo
from lycaon_benchmarks.torch_models import ResNetCifar

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "python" / "lycaon" / "models"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--checkpoint", type=Path, default=Path.home() / ".cache" / "lycaon" / "resnet20.pt")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--restart-epochs", default="0", help="after the main schedule, warm restarts (SGDR) of these many epochs each, comma-separated: 8,30")
    ap.add_argument("--restart-lr", default="0.02", help="peak learning rate of each warm restart, comma-separated or one for all")
    ap.add_argument("--init", type=Path, help="start from these weights (an .npz as shipped) instead of at random; use with --epochs 0")
    ap.add_argument("--init-epochs", type=int, default=0, help="epochs the --init weights were trained for (recorded in the registry)")
    ap.add_argument("--swa-epochs", type=int, default=0, help="at the end, this many epochs at constant --swa-lr whose weights are averaged "
                    "(stochastic weight averaging, Izmailov et al. 2018), batch-norm statistics recomputed")
    ap.add_argument("--swa-lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: torch's default)")
    ap.add_argument("--ship", action="store_true", help="write the weights and the registry entry into python/lycaon/models "
                    "(without it the run only reports its accuracy: a twin trained for comparison must not replace the shipped model)")
    ap.add_argument("--train-only", action="store_true", help="stop after the last epoch's checkpoint; rerun without it (on any machine) to evaluate")
    args = ap.parse_args()
    restarts = [int(e) for e in args.restart_epochs.split(",") if int(e) > 0]
    restart_lrs = [float(v) for v in args.restart_lr.split(",")]
    restart_lrs = (restart_lrs * len(restarts))[:len(restarts)] if len(restart_lrs) == 1 else restart_lrs
    if len(restart_lrs) != len(restarts):
        ap.error("--restart-lr needs one value or one per warm restart")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    train_x, train_y = zoo.cifar10("train")
    test_x, test_y = zoo.cifar10("test")
    xt, yt = training_tensors(resnet.preprocess(train_x), train_y, device)
    xv = torch.tensor(resnet.preprocess(test_x), dtype=torch.float32)
    yv = torch.tensor(test_y, dtype=torch.long)
    net = ResNetCifar(20).to(device)
    if args.init is not None:
        with np.load(args.init) as init:
            net.load_state_dict({k: torch.tensor(init[k]) for k in init.files}, strict=False)
    per_epoch = (len(xt) + args.batch - 1) // args.batch
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)

    # One cycle over the main epochs, then warm restarts: cosine from each restart's peak to 0
    # (Loshchilov and Hutter 2017). Phase k starts at boundaries[k]; checkpoints resume any phase.
    boundaries = [0, args.epochs]
    for extra in restarts:
        boundaries.append(boundaries[-1] + extra)
    if args.swa_epochs:
        boundaries.append(boundaries[-1] + args.swa_epochs)
    total_epochs = boundaries[-1]
    swa_start = total_epochs - args.swa_epochs
    swa = torch.optim.swa_utils.AveragedModel(net) if args.swa_epochs else None

    def phase_of(epoch: int) -> int:
        return max(k for k in range(len(boundaries) - 1) if boundaries[k] <= epoch)

    def scheduler(phase: int):
        if phase == 0:
            return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.epochs * per_epoch, pct_start=0.15)
        if args.swa_epochs and phase == len(boundaries) - 2:
            for group in opt.param_groups:
                group["lr"] = group["initial_lr"] = args.swa_lr
            return torch.optim.lr_scheduler.ConstantLR(opt, factor=1.0, total_iters=0)
        for group in opt.param_groups:
            group["lr"] = group["initial_lr"] = restart_lrs[phase - 1]
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=restarts[phase - 1] * per_epoch)

    start = 0
    sched = scheduler(0) if args.epochs else None
    if args.checkpoint.is_file():
        state = torch.load(args.checkpoint, map_location=device)
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
        if swa is not None and "swa" in state:
            swa.load_state_dict(state["swa"])
        print(f"resuming after epoch {start}", flush=True)
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
        if swa is not None and epoch >= swa_start:
            swa.update_parameters(net)
        save_checkpoint({"model": net.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "epoch": epoch + 1, "rng": torch.get_rng_state(),
                         **({"swa": swa.state_dict()} if swa is not None else {})}, args.checkpoint)
        msg = f"epoch {epoch + 1}/{total_epochs}: loss {total / len(xt):.4f}, {time.time() - began:.0f} s"
        if (epoch + 1) % 5 == 0 or epoch + 1 in boundaries:
            msg += f", test accuracy {evaluate(net, xv, yv, device):.4f}"
        print(msg, flush=True)
    if args.train_only:
        return
    if swa is not None:
        # The averaged weights need batch-norm statistics of their own: one pass over the
        # (augmented) training set in train mode.
        loader = [(augment(xt[k:k + 500]).to(device), yt[k:k + 500]) for k in range(0, len(xt), 500)]
        torch.optim.swa_utils.update_bn(((x, y) for x, y in loader), swa, device=device)
        print(f"last epoch's weights: test accuracy {evaluate(net, xv, yv, device):.4f}", flush=True)
        net = swa.module
    weights = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}
    graph = resnet.resnet_cifar({k: v.astype(np.float64) for k, v in weights.items()}, 20)
    accuracy = float((run_float(graph, resnet.preprocess(test_x)).argmax(1) == test_y).mean())
    print(f"test accuracy (Lycaon float executor, {len(test_y)} images): {accuracy:.4f}", flush=True)
    if not args.ship:
        return
    ship(OUT, "resnet20-cifar10", "cifar10", weights, accuracy, len(test_y), "scripts/train_resnet20.py", epochs=args.init_epochs + total_epochs,
         **({"swa_epochs": args.swa_epochs} if args.swa_epochs else {}))

if __name__ == "__main__":
    main()
