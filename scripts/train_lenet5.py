"""Trains LeNet-5 on MNIST and writes the weights Lycaon ships (python/lycaon/models/lenet5_mnist.npz).

Uses a GPU when one is present, checkpoints every epoch and resumes from the checkpoint, so a run
can be stopped and continued. Needs torch (an optional extra): pip install torch.

    python scripts/train_lenet5.py [--epochs 15] [--checkpoint ~/.cache/lycaon/lenet5.pt]

The accuracy written into the registry is measured by Lycaon's own float executor on the full
MNIST test set, not by torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from torch import nn

from lycaon.data import load_mnist
from lycaon.models import ship
from lycaon.frontend import lenet, run_float

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "python" / "lycaon" / "models"


def model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.AvgPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
    )


NAMES = ["conv1", None, None, "conv2", None, None, None, "fc1", None, "fc2", None, "fc3"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--checkpoint", type=Path, default=Path.home() / ".cache" / "lycaon" / "lenet5.pt")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x, y = load_mnist("train")
    xt = torch.tensor(lenet.preprocess(x), dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.long)
    net = model().to(device)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=args.epochs * ((len(xt) + 127) // 128))
    start = 0
    if args.checkpoint.is_file():
        state = torch.load(args.checkpoint, map_location=device)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        start = state["epoch"]
        print(f"resuming after epoch {start}")
    for epoch in range(start, args.epochs):
        net.train()
        perm = torch.randperm(len(xt))
        total = 0.0
        for i in range(0, len(xt), 128):
            idx = perm[i:i + 128]
            xb = xt[idx].to(device)
            # Light augmentation: random shifts of up to 2 pixels.
            dx, dy = np.random.randint(-2, 3, size=2)
            xb = torch.roll(xb, shifts=(int(dx), int(dy)), dims=(2, 3))
            loss = nn.functional.cross_entropy(net(xb), yt[idx].to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
        args.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "epoch": epoch + 1}, args.checkpoint)
        print(f"epoch {epoch + 1}: loss {total / len(xt):.4f}")
    weights = {}
    for layer, name in zip(net, NAMES):
        if name:
            weights[f"{name}.weight"] = layer.weight.detach().cpu().numpy().astype(np.float32)
            weights[f"{name}.bias"] = layer.bias.detach().cpu().numpy().astype(np.float32)
    test_x, test_y = load_mnist("test")
    graph = lenet.lenet5({k: v.astype(np.float64) for k, v in weights.items()})
    accuracy = float((run_float(graph, lenet.preprocess(test_x)).argmax(1) == test_y).mean())
    print(f"test accuracy (Lycaon float executor, 10,000 images): {accuracy:.4f}")
    ship(OUT, "lenet5-mnist", "mnist", weights, accuracy, len(test_y), "scripts/train_lenet5.py", epochs=args.epochs)

if __name__ == "__main__":
    main()
