"""PyTorch definitions of the networks Lycaon trains and ships (torch is an optional extra:
pip install -e 'benchmarks[train]'). The CIFAR ResNet matches lycaon.frontend.resnet.resnet_cifar
layer for layer; its AESPA variant matches lycaon.frontend.aespa.forward once its activations are
folded."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


class OptionAShortcut(nn.Module):
    """x[:, :, ::2, ::2] zero-padded with planes//4 channels on each side (no parameters)."""

    def __init__(self, pad: int):
        super().__init__()
        self.pad = pad

    def forward(self, x):
        return F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))


class BasicBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = OptionAShortcut(planes // 4) if stride != 1 or in_planes != planes else nn.Identity()

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNetCifar(nn.Module):
    def __init__(self, depth: int = 20, num_classes: int = 10):
        super().__init__()
        blocks = (depth - 2) // 6
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers, in_planes = [], 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            stage = []
            for b in range(blocks):
                stage.append(BasicBlock(in_planes, planes, stride if b == 0 else 1))
                in_planes = planes
            layers.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3 = layers
        self.linear = nn.Linear(64, num_classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


class HerPN2d(nn.Module):
    """AESPA's HerPN (see aespa.py): gamma * sum_i f_i BN_i(h_i(x)) + beta over the Hermite bases
    h_1 = x, h_2 = (x^2 - 1)/sqrt2, each with batch-norm statistics of its own and no affine part;
    gamma, beta per channel. (h_0 = 1 batch-normalises to exactly 0, so it has no term.)"""

    F = (1 / math.sqrt(2 * math.pi), 0.5, 1 / math.sqrt(4 * math.pi))

    def __init__(self, planes: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(planes, affine=False)
        self.bn2 = nn.BatchNorm2d(planes, affine=False)
        self.weight = nn.Parameter(torch.ones(planes))
        self.bias = nn.Parameter(torch.zeros(planes))

    def forward(self, x):
        y = self.F[1] * self.bn1(x) + self.F[2] * self.bn2((x * x - 1) / math.sqrt(2))
        return y * self.weight.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)

    def frozen(self) -> dict:
        """gamma, beta and the (2, C) running statistics of h_1, h_2, as aespa.fold takes them."""
        return {"gamma": self.weight.detach(), "beta": self.bias.detach(), "eps": self.bn1.eps,
                "mean": torch.stack([self.bn1.running_mean, self.bn2.running_mean]),
                "var": torch.stack([self.bn1.running_var, self.bn2.running_var])}


class AespaBlock(nn.Module):
    """conv1 -> HerPN -> conv2 -> (+ shortcut) -> HerPN: AESPA replaces batch-norm and ReLU both, so
    the batch-norm that the ReLU block has before the addition is gone."""

    def __init__(self, in_planes: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.act1 = HerPN2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.act2 = HerPN2d(planes)
        self.shortcut = OptionAShortcut(planes // 4) if stride != 1 or in_planes != planes else nn.Identity()

    def forward(self, x):
        return self.act2(self.conv2(self.act1(self.conv1(x))) + self.shortcut(x))


class ResNetCifarAespa(nn.Module):
    """ResNetCifar with every batch-norm + ReLU replaced by HerPN (AESPA, 002 Sec. 3)."""

    def __init__(self, depth: int = 20, num_classes: int = 10):
        super().__init__()
        blocks = (depth - 2) // 6
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.act1 = HerPN2d(16)
        layers, in_planes = [], 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            stage = []
            for b in range(blocks):
                stage.append(AespaBlock(in_planes, planes, stride if b == 0 else 1))
                in_planes = planes
            layers.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3 = layers
        self.linear = nn.Linear(64, num_classes)

    def forward(self, x):
        out = self.layer3(self.layer2(self.layer1(self.act1(self.conv1(x)))))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))
