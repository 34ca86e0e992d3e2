"""Trains ResNet-20 (option-A shortcuts, as resnet.resnet_cifar) from scratch on the CIFAR-10
training set in ../shared/data and writes the weights Lycaon ships
(python/lycaon/models/resnet20_cifar10.npz) with their accuracy in registry.json.

Uses a GPU when one is present; checkpoints every epoch and resumes from the checkpoint, so a CPU
run (about 1.5-2.5 minutes an epoch on 2 cores) can span sessions. Needs torch:
pip install 'lycaon[train]'.

    python scripts/train_resnet20.py [--epochs 30] [--checkpoint ~/.cache/lycaon/resnet20.pt]

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
from lycaon.frontend import resnet, run_float, zoo
from lycaon.frontend.torch_models import ResNetCifar

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "python" / "lycaon" / "models"


def augment(x: torch.Tensor) -> torch.Tensor:
    """Random 32x32 crops of the 4-pixel zero-padded images and random horizontal flips."""
    b = x.shape[0]
    padded = F.pad(x, (4, 4, 4, 4))
    i, j = torch.randint(0, 9, (b,)), torch.randint(0, 9, (b,))
    rows = (i[:, None] + torch.arange(32))[:, None, :, None]
    cols = (j[:, None] + torch.arange(32))[:, None, None, :]
    out = padded[torch.arange(b)[:, None, None, None], torch.arange(3)[None, :, None, None], rows, cols]
    flip = torch.rand(b) < 0.5
    out[flip] = out[flip].flip(3)
    return out


def evaluate(net, x, y, device) -> float:
    net.eval()
    correct = 0
    with torch.no_grad():
        for k in range(0, len(x), 500):
            correct += int((net(x[k:k + 500].to(device)).argmax(1).cpu() == y[k:k + 500]).sum())
    return correct / len(x)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--checkpoint", type=Path, default=Path.home() / ".cache" / "lycaon" / "resnet20.pt")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--restart-epochs", type=int, default=0, help="after the main schedule, a warm restart (SGDR) of this many epochs")
    ap.add_argument("--restart-lr", type=float, default=0.02)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    train_x, train_y = zoo.cifar10("train")
    test_x, test_y = zoo.cifar10("test")
    xt = torch.tensor(resnet.preprocess(train_x), dtype=torch.float32)
    yt = torch.tensor(train_y, dtype=torch.long)
    xv = torch.tensor(resnet.preprocess(test_x), dtype=torch.float32)
    yv = torch.tensor(test_y, dtype=torch.long)
    net = ResNetCifar(20).to(device)
    per_epoch = (len(xt) + args.batch - 1) // args.batch
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)

    # One cycle over the main epochs, then optionally a warm restart: cosine from restart_lr to 0
    # (Loshchilov and Hutter 2017). Checkpoints resume either phase.
    def scheduler(phase: int):
        if phase == 0:
            return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.epochs * per_epoch, pct_start=0.15)
        for group in opt.param_groups:
            group["lr"] = group["initial_lr"] = args.restart_lr
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(args.restart_epochs, 1) * per_epoch)

    sched = scheduler(0)
    start = 0
    if args.checkpoint.is_file():
        state = torch.load(args.checkpoint, map_location=device)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["epoch"]
        if start > args.epochs:
            sched = scheduler(1)
        if start != args.epochs:
            sched.load_state_dict(state["sched"])
        torch.set_rng_state(state["rng"])
        print(f"resuming after epoch {start}", flush=True)
    total_epochs = args.epochs + args.restart_epochs
    for epoch in range(start, total_epochs):
        if epoch == args.epochs:
            sched = scheduler(1)
        net.train()
        began = time.time()
        perm = torch.randperm(len(xt))
        total = 0.0
        for k in range(0, len(xt), args.batch):
            idx = perm[k:k + args.batch]
            loss = F.cross_entropy(net(augment(xt[idx]).to(device)), yt[idx].to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
        args.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "epoch": epoch + 1, "rng": torch.get_rng_state()}, args.checkpoint)
        msg = f"epoch {epoch + 1}/{total_epochs}: loss {total / len(xt):.4f}, {time.time() - began:.0f} s"
        if (epoch + 1) % 5 == 0 or epoch + 1 in (args.epochs, total_epochs):
            msg += f", test accuracy {evaluate(net, xv, yv, device):.4f}"
        print(msg, flush=True)
    weights = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}
    graph = resnet.resnet_cifar({k: v.astype(np.float64) for k, v in weights.items()}, 20)
    accuracy = float((run_float(graph, resnet.preprocess(test_x)).argmax(1) == test_y).mean())
    print(f"test accuracy (Lycaon float executor, 10,000 images): {accuracy:.4f}", flush=True)
    ship(OUT, "resnet20-cifar10", "cifar10", weights, accuracy, len(test_y), "scripts/train_resnet20.py", epochs=total_epochs)

if __name__ == "__main__":
    main()
