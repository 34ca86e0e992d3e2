"""Layer shapes (no weights) of the networks the planner and simulator study: ResNet-50, VGG-16,
MobileNetV1, MobileNetV2, AlexNet, SqueezeNet 1.0 and DenseNet-121 on 224x224 ImageNet inputs
(AlexNet: 227), as the original papers define them. Weights are zero arrays of the right shape
that take no memory (zero strides); batch-norm is taken as folded into the convolution before it
(its parameters are not counted). MobileNetV2's ReLU6 is a `clip` node (0..6).
"""

from __future__ import annotations

import numpy as np

from .ir import Graph, Node


def _zeros(*shape) -> np.ndarray:
    return np.broadcast_to(np.float64(0.0), shape)


class _Builder:
    def __init__(self, name: str, shape=(3, 224, 224)):
        self.g = Graph("image", shape, name=name)
        self.last = "image"
        self.count = 0

    def _name(self, op: str) -> str:
        self.count += 1
        return f"{op}{self.count}"

    def conv(self, out_c, k, stride=1, pad=0, groups=1, relu=True, x=None):
        x = x or self.last
        in_c = self.g.shapes()[x][0]
        name = self._name("conv")
        self.g.add(Node("conv", name, [x], name, {"stride": (stride, stride), "pads": (pad,) * 4, "groups": groups}, {"weight": _zeros(out_c, in_c // groups, k, k), "bias": None}))
        self.last = name
        if relu:
            self.relu()
        return self.last

    def relu(self):
        name = self._name("relu")
        self.g.add(Node("relu", name, [self.last], name))
        self.last = name
        return name

    def relu6(self):
        """ReLU6, min(max(x, 0), 6): a `clip` node."""
        name = self._name("relu6")
        self.g.add(Node("clip", name, [self.last], name, {"min": 0.0, "max": 6.0}))
        self.last = name
        return name

    def pool(self, op, k, stride, pad=0):
        name = self._name(op)
        self.g.add(Node(op, name, [self.last], name, {"kernel": (k, k), "stride": (stride, stride), "pads": (pad,) * 4}))
        self.last = name
        return name

    def gap(self):
        name = self._name("gap")
        self.g.add(Node("global_avgpool", name, [self.last], name))
        self.last = name

    def flatten(self):
        name = self._name("flatten")
        self.g.add(Node("flatten", name, [self.last], name))
        self.last = name

    def fc(self, out_f, relu=False):
        in_f = self.g.shapes()[self.last][0]
        name = self._name("fc")
        self.g.add(Node("linear", name, [self.last], name, {}, {"weight": _zeros(out_f, in_f), "bias": _zeros(out_f)}))
        self.last = name
        if relu:
            self.relu()

    def add(self, a, b, relu=False):
        name = self._name("add")
        self.g.add(Node("add", name, [a, b], name))
        self.last = name
        if relu:
            self.relu()
        return self.last

    def concat(self, parts):
        name = self._name("concat")
        self.g.add(Node("concat", name, list(parts), name))
        self.last = name
        return name


def resnet50() -> Graph:
    b = _Builder("resnet50")
    b.conv(64, 7, 2, 3)
    b.pool("maxpool", 3, 2, 1)
    for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            x = b.last
            s = stride if i == 0 else 1
            b.conv(planes, 1)
            b.conv(planes, 3, s, 1)
            y = b.conv(planes * 4, 1, relu=False)
            shortcut = b.conv(planes * 4, 1, s, relu=False, x=x) if i == 0 else x
            b.add(y, shortcut, relu=True)
    b.gap()
    b.flatten()
    b.fc(1000)
    return b.g


def resnet18(activation: str = "relu") -> Graph:
    """ResNet-18 at ImageNet shape (He et al.; torchvision's layout, batch-norm folded away).
    ``activation="quadratic"``: the FHE variant of 002's ResNet-18 (AESPA): each ReLU a
    per-channel quadratic (a ``poly`` node, coefficients (C, 3) to be filled) and the stem's
    max pooling a 3 x 3 average pooling at stride 2 (CKKS has no max)."""
    if activation not in ("relu", "quadratic"):
        raise ValueError(f"activation '{activation}': expected relu or quadratic")
    quadratic = activation == "quadratic"
    b = _Builder("resnet18" + ("-quadratic" if quadratic else ""))

    def act():
        if not quadratic:
            return b.relu()
        name = b._name("act")
        channels = b.g.shapes()[b.last][0]
        b.g.add(Node("poly", name, [b.last], name, {"kind": "aespa-quadratic"}, {"coefficients": _zeros(channels, 3)}))
        b.last = name
        return name

    b.conv(64, 7, 2, 3, relu=False)
    act()
    b.pool("avgpool" if quadratic else "maxpool", 3, 2, 1)
    for planes, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for i in range(2):
            x = b.last
            s = stride if i == 0 else 1
            b.conv(planes, 3, s, 1, relu=False)
            act()
            y = b.conv(planes, 3, 1, 1, relu=False)
            shortcut = b.conv(planes, 1, s, relu=False, x=x) if s != 1 or b.g.shapes()[x][0] != planes else x
            b.add(y, shortcut)
            act()
    b.gap()
    b.flatten()
    b.fc(1000)
    return b.g


def vgg16() -> Graph:
    b = _Builder("vgg16")
    for width, convs in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(convs):
            b.conv(width, 3, 1, 1)
        b.pool("maxpool", 2, 2)
    b.flatten()
    b.fc(4096, relu=True)
    b.fc(4096, relu=True)
    b.fc(1000)
    return b.g


def mobilenet_v1() -> Graph:
    b = _Builder("mobilenet_v1")
    b.conv(32, 3, 2, 1)
    for out_c, stride in ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), *[(512, 1)] * 5, (1024, 2), (1024, 1)):
        c = b.g.shapes()[b.last][0]
        b.conv(c, 3, stride, 1, groups=c)
        b.conv(out_c, 1)
    b.gap()
    b.flatten()
    b.fc(1000)
    return b.g


def mobilenet_v2() -> Graph:
    """MobileNetV2 (Sandler et al. 2018), width 1.0: ReLU6 after the stem, every expansion and
    depthwise convolution and the last 1x1 convolution; the projections are linear."""
    b = _Builder("mobilenet_v2")
    b.conv(32, 3, 2, 1, relu=False)
    b.relu6()
    in_c = 32
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            x = b.last
            stride = s if i == 0 else 1
            hidden = in_c * t
            if t != 1:
                b.conv(hidden, 1, relu=False)
                b.relu6()
            b.conv(hidden, 3, stride, 1, groups=hidden, relu=False)
            b.relu6()
            y = b.conv(c, 1, relu=False)
            if stride == 1 and in_c == c:
                b.add(y, x)
            in_c = c
    b.conv(1280, 1, relu=False)
    b.relu6()
    b.gap()
    b.flatten()
    b.fc(1000)
    return b.g


def alexnet() -> Graph:
    b = _Builder("alexnet", (3, 227, 227))
    b.conv(96, 11, 4)
    b.pool("maxpool", 3, 2)
    b.conv(256, 5, 1, 2)
    b.pool("maxpool", 3, 2)
    b.conv(384, 3, 1, 1)
    b.conv(384, 3, 1, 1)
    b.conv(256, 3, 1, 1)
    b.pool("maxpool", 3, 2)
    b.flatten()
    b.fc(4096, relu=True)
    b.fc(4096, relu=True)
    b.fc(1000)
    return b.g


def squeezenet(shape: tuple = (3, 224, 224)) -> Graph:
    """SqueezeNet 1.0 (Iandola et al. 2016): fire modules squeeze (1x1) then expand (1x1 || 3x3).
    ``shape`` (3, 227, 227) is the input Cheetah's evaluation ran."""
    b = _Builder("squeezenet", tuple(shape))
    b.conv(96, 7, 2)
    b.pool("maxpool", 3, 2)

    def fire(squeeze, expand):
        s = b.conv(squeeze, 1)
        e1 = b.conv(expand, 1, x=s)
        e3 = b.conv(expand, 3, 1, 1, x=s)
        b.concat([e1, e3])

    fire(16, 64)
    fire(16, 64)
    fire(32, 128)
    b.pool("maxpool", 3, 2)
    fire(32, 128)
    fire(48, 192)
    fire(48, 192)
    fire(64, 256)
    b.pool("maxpool", 3, 2)
    fire(64, 256)
    b.conv(1000, 1)
    b.gap()
    b.flatten()
    return b.g


def densenet121(growth: int = 32, blocks: tuple = (6, 12, 24, 16), bottleneck: int = 4, compression: float = 0.5) -> Graph:
    """DenseNet-121 (Huang et al. 2017) on 224x224 ImageNet inputs: a 7x7/2 stem convolution (64
    channels) and a 3x3/2 max-pool (pad 1); four dense blocks of (6, 12, 24, 16) layers, each a
    1x1 bottleneck convolution to 4 x 32 channels then a 3x3 convolution to 32 (growth rate)
    whose output is concatenated to the block's features; between blocks a transition, a 1x1
    convolution halving the channels (compression 0.5) and a 2x2/2 average pool; then global
    average pooling and a 1024 -> 1000 fully connected layer.

    The real network is pre-activation (BN-ReLU-conv: each layer normalises and rectifies the
    concatenated features itself). With batch-norm folded, the hybrid runtime needs conv -> ReLU
    order, so this is the post-activation variant common in private-inference benchmarks: every
    convolution (batch-norm folded into it) is followed by a ReLU, and the blocks concatenate
    post-ReLU features (the final BN-ReLU before pooling is then absorbed). Convolutions, channel
    counts and so the cost of the linear layers are those of the original: 2.834 G multiply-
    accumulates (torchvision lists 2.83 G; "2.9 G" is often quoted) and 7.895 M parameters (conv
    and fc weights, fc bias; with batch-norm's 83,648 scales and shifts, torchvision's 7,978,856);
    120 ReLU layers (the original: 121 BN-ReLU pairs)."""
    b = _Builder("densenet121")
    b.conv(64, 7, 2, 3)
    b.pool("maxpool", 3, 2, 1)
    for index, layers in enumerate(blocks):
        for _ in range(layers):
            features = b.last
            b.conv(bottleneck * growth, 1)
            new = b.conv(growth, 3, 1, 1)
            b.concat([features, new])
        if index + 1 < len(blocks):
            channels = b.g.shapes()[b.last][0]
            b.conv(int(channels * compression), 1)
            b.pool("avgpool", 2, 2)
    b.gap()
    b.flatten()
    b.fc(1000)
    return b.g


ARCHITECTURES = {"resnet18": resnet18, "resnet50": resnet50, "vgg16": vgg16, "mobilenet_v1": mobilenet_v1, "mobilenet_v2": mobilenet_v2, "alexnet": alexnet, "squeezenet": squeezenet, "densenet121": densenet121}
