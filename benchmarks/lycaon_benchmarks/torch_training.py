"""What the training scripts (scripts/train_resnet20*.py) share: CIFAR augmentation and test
accuracy, in torch."""

from __future__ import annotations

import torch
from torch.nn import functional as F


def augment(x: torch.Tensor) -> torch.Tensor:
    """Random 32x32 crops of the 4-pixel zero-padded images and random horizontal flips, on the
    device the images are on (a GPU run keeps the whole training set there)."""
    b, dev = x.shape[0], x.device
    padded = F.pad(x, (4, 4, 4, 4))
    i, j = torch.randint(0, 9, (b,), device=dev), torch.randint(0, 9, (b,), device=dev)
    rows = (i[:, None] + torch.arange(32, device=dev))[:, None, :, None]
    cols = (j[:, None] + torch.arange(32, device=dev))[:, None, None, :]
    out = padded[torch.arange(b, device=dev)[:, None, None, None], torch.arange(3, device=dev)[None, :, None, None], rows, cols]
    flip = torch.rand(b, device=dev) < 0.5
    out[flip] = out[flip].flip(3)
    return out


def training_tensors(x, y, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The preprocessed training images and labels as tensors; on a GPU the whole set lives there
    (600 MB) and is augmented there: the steps of so small a network are bound by launches, not
    by the arithmetic (cudnn picks its kernels once for the fixed batch shape)."""
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.long)
    if device == "cuda":
        xt, yt = xt.to(device), yt.to(device)
        torch.backends.cudnn.benchmark = True
    return xt, yt


def evaluate(net, x, y, device) -> float:
    net.eval()
    correct = 0
    with torch.no_grad():
        for k in range(0, len(x), 500):
            correct += int((net(x[k:k + 500].to(device)).argmax(1).cpu() == y[k:k + 500]).sum())
    return correct / len(x)


def save_checkpoint(state: dict, path) -> None:
    """torch.save through a temporary file, so that a run killed mid-write keeps the last epoch."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    tmp.replace(path)
