"""PyTorch definitions of the networks Lycaon trains and ships (torch is an optional extra:
pip install 'lycaon[train]'). The CIFAR ResNet matches resnet.resnet_cifar layer for layer."""

from __future__ import annotations

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
