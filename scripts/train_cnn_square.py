"""Trains the FHE mode's demo network on the CIFAR-10 training set in ../shared/data and ships it
(python/lycaon/models/cnn_square_cifar10.npz, registry `cnn-square-cifar10`).

The network is Orion's LeNet-5 shape (lycaon.frontend.lenet.lenet5_square) widened to CIFAR-10's
3 x 32 x 32 input: conv 5x5 stride 2 to 32 channels, batch-norm, x^2, conv 5x5 stride 2 to 64
channels, batch-norm, x^2, fully connected 4096-64, batch-norm, x^2, 64-10. Batch-norm makes the
square activation trainable (its input stays near unit variance); at export each batch-norm is
folded into the layer before it, so under CKKS the network is four linear layers and three
squares: depth 7, one ciphertext of 2^13 slots, no bootstrapping. It exists so that
`lycaon demo --mode fhe` runs a trained network with a measured accuracy; the FHE mode's real
target is ResNet-20 with AESPA activations (scripts/train_resnet20_aespa.py).

    python scripts/train_cnn_square.py [--epochs 15] [--threads 1]

Accuracy in the registry: Lycaon's float executor on the folded network, all 10,000 test images.
About 40 s an epoch on one core. Needs torch and lycaon-benchmarks:
pip install -e 'benchmarks[train]'.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from lycaon.frontend import resnet, run_float, zoo
from lycaon.frontend.lenet import cnn_square
from lycaon_benchmarks.torch_training import augment, evaluate
from lycaon.models import ship

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "python" / "lycaon" / "models"


class Square(nn.Module):
    def forward(self, x):
        return x * x


class CnnSquare(nn.Module):
    def __init__(self, hidden: int = 64):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 5, stride=2, padding=2)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 5, stride=2, padding=2)
        self.bn2 = nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64 * 8 * 8, hidden)
        self.bn3 = nn.BatchNorm1d(hidden)
        self.fc2 = nn.Linear(hidden, 10)
        self.square = Square()

    def forward(self, x):
        x = self.square(self.bn1(self.conv1(x)))
        x = self.square(self.bn2(self.conv2(x)))
        x = self.square(self.bn3(self.fc1(x.flatten(1))))
        return self.fc2(x)


def folded(net: CnnSquare) -> dict:
    """Each batch-norm folded into the layer before it (its weights and bias)."""
    out = {}
    for layer, bn in (("conv1", net.bn1), ("conv2", net.bn2), ("fc1", net.bn3)):
        m = getattr(net, layer)
        g = (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach()
        w = m.weight.detach() * g.reshape((-1,) + (1,) * (m.weight.dim() - 1))
        b = (m.bias.detach() - bn.running_mean) * g + bn.bias.detach()
        out[f"{layer}.weight"], out[f"{layer}.bias"] = w.double().numpy(), b.double().numpy()
    out["fc2.weight"], out["fc2.bias"] = net.fc2.weight.detach().double().numpy(), net.fc2.bias.detach().double().numpy()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-ship", action="store_true", help="train and report, do not write into python/lycaon/models")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    train_x, train_y = zoo.cifar10("train")
    test_x, test_y = zoo.cifar10("test")
    train_x, test_x = resnet.preprocess(train_x), resnet.preprocess(test_x)
    xt, yt = torch.from_numpy(train_x).float(), torch.from_numpy(train_y).long()
    xv, yv = torch.from_numpy(test_x).float(), torch.from_numpy(test_y).long()
    net = CnnSquare()
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    steps = args.epochs * ((len(xt) + args.batch - 1) // args.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps)
    for epoch in range(args.epochs):
        t0 = time.time()
        net.train()
        perm = torch.randperm(len(xt))
        for i in range(0, len(xt), args.batch):
            idx = perm[i:i + args.batch]
            loss = F.cross_entropy(net(augment(xt[idx])), yt[idx])
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 5.0)
            opt.step()
            sched.step()
        acc = evaluate(net, xv, yv, "cpu")
        print(f"epoch {epoch + 1}/{args.epochs}: loss {loss.item():.3f}, test accuracy {acc:.4f} ({time.time() - t0:.0f} s)", flush=True)
    weights = folded(net.eval())
    graph = cnn_square(weights)
    logits = run_float(graph, test_x.astype(np.float64))
    accuracy = float((logits.argmax(1) == test_y).mean())
    with torch.no_grad():
        twin = net(xv[:200]).double().numpy()
    gap = float(np.abs(twin - logits[:200]).max() / np.abs(twin).max())
    print(f"folded network (Lycaon's float executor): {accuracy:.4f} on {len(test_y)} test images; largest logit difference to torch {gap:.1e} (relative)")
    if gap > 1e-4:
        raise SystemExit("the folded network does not match the trained one")
    if not args.no_ship:
        ship(OUT, "cnn-square-cifar10", "cifar10", weights, accuracy, len(test_y), "scripts/train_cnn_square.py", epochs=args.epochs,
             activation="square", note="the FHE mode's demo network (Orion's LeNet-5 shape widened to CIFAR-10)")
        print(f"shipped to {OUT}")


if __name__ == "__main__":
    main()
