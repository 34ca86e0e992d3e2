"""AESPA (002 Sec. 3): ReLU's Hermite coefficients, the folding of HerPN into one quadratic per
channel, the numpy forward of the folded ResNet-20 against the torch network, and a one-batch
smoke run of scripts/train_resnet20_aespa.py. The numpy tests need no torch; the others skip
without it."""

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lycaon.frontend import aespa

try:
    import torch
except ImportError:  # torch is the optional 'train' extra
    torch = None

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "train_resnet20_aespa.py"
SHARED = ROOT / ".." / "shared" / "data"
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (pip install 'lycaon[train]')")
# The PyTorch networks and the training helpers are not in the installed package: lycaon-benchmarks.
needs_benchmarks = pytest.mark.skipif(importlib.util.find_spec("lycaon_benchmarks") is None,
                                      reason="lycaon-benchmarks is not installed (pip install -e benchmarks)")
needs_cifar = pytest.mark.skipif(not (SHARED / "cifar10" / "train.npz").is_file(), reason="../shared/data/cifar10 is not present")


def random_statistics(rng, c):
    """gamma, beta and running statistics of h_1, h_2 as a trained HerPN could have them."""
    mean = np.stack([rng.normal(0, 1, c), rng.uniform(-0.5, 3, c)])
    var = rng.uniform(0.05, 4, (2, c))
    return rng.normal(1, 0.5, c), rng.normal(0, 0.5, c), mean, var


def test_hermite_coefficients_of_relu():
    # Closed forms: E[relu X] = 1/sqrt(2 pi), E[X relu X] = 1/2, E[relu X (X^2 - 1)]/sqrt2 = 1/sqrt(4 pi);
    # the odd terms above degree 1 vanish.
    assert aespa.HERMITE_RELU == pytest.approx((0.3989422804, 0.5, 0.2820947918), abs=1e-10)
    f = aespa.hermite_relu_coefficients(3)
    np.testing.assert_allclose(f[:3], aespa.HERMITE_RELU, atol=1e-9)
    assert abs(f[3]) < 1e-9


def test_hermite_basis_is_orthonormal_under_the_normal_density():
    x = np.linspace(-12, 12, 200_001)
    density = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    gram = np.array([[np.sum(aespa.hermite(x, i) * aespa.hermite(x, j) * density) * (x[1] - x[0]) for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(gram, np.eye(3), atol=1e-9)


def test_herpn_folds_into_one_quadratic_per_channel():
    rng = np.random.default_rng(1)
    for c in (1, 16, 64):
        gamma, beta, mean, var = random_statistics(rng, c)
        x = rng.normal(0, 3, (5, c, 4, 4))
        expected = aespa.herpn(x, gamma, beta, mean, var)
        a, b, cc = aespa.fold(gamma, beta, mean, var)
        assert a.shape == b.shape == cc.shape == (c,)
        np.testing.assert_allclose(aespa.quadratic(x, a, b, cc), expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_with_unit_statistics_herpn_is_the_truncated_hermite_expansion_of_relu():
    # gamma = 1, beta = 0, mu = 0, var = 1 (eps aside): f_1 x + f_2 (x^2 - 1)/sqrt2; adding f_0 gives
    # the degree-2 expansion itself, the least-squares quadratic under N(0, 1).
    a, b, c = aespa.fold(np.ones(1), np.zeros(1), np.zeros((2, 1)), np.ones((2, 1)), eps=0.0)
    f0, f1, f2 = aespa.HERMITE_RELU
    np.testing.assert_allclose([a[0], b[0], c[0] + f0], [f2 / math.sqrt(2), f1, f0 - f2 / math.sqrt(2)], rtol=1e-15)


@needs_torch
@needs_benchmarks
def test_torch_herpn_matches_numpy_and_its_fold():
    from lycaon_benchmarks.torch_models import HerPN2d

    rng = np.random.default_rng(2)
    gamma, beta, mean, var = random_statistics(rng, 8)
    layer = HerPN2d(8).double()
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(gamma))
        layer.bias.copy_(torch.tensor(beta))
        for k, bn in enumerate((layer.bn1, layer.bn2)):
            bn.running_mean.copy_(torch.tensor(mean[k]))
            bn.running_var.copy_(torch.tensor(var[k]))
    x = rng.normal(0, 2, (3, 8, 5, 5))
    got = layer.eval()(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, aespa.herpn(x, gamma, beta, mean, var), rtol=1e-12, atol=1e-12)
    frozen = {k: (v.numpy() if torch.is_tensor(v) else v) for k, v in layer.frozen().items()}
    np.testing.assert_allclose(aespa.quadratic(x, *aespa.fold(**frozen)), got, rtol=1e-10, atol=1e-10)
    # In training, every basis is normalised over the batch: with gamma = 1, beta = 0 the output
    # has mean 0 and variance f_1^2 + f_2^2 (the two normalised bases are uncorrelated for a
    # symmetric input distribution).
    train = HerPN2d(8).double().train()
    y = train(torch.tensor(rng.normal(0.0, 1.0, (64, 8, 8, 8)))).detach().numpy()
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), 0, atol=1e-12)
    f0, f1, f2 = aespa.HERMITE_RELU
    np.testing.assert_allclose(y.var(axis=(0, 2, 3)), f1 ** 2 + f2 ** 2, rtol=0.05)


def load_script():
    spec = importlib.util.spec_from_file_location("train_resnet20_aespa", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_folded_weights(rng, depth=20):
    """Weights of a folded AESPA ResNet under the shipped names, random."""
    # Scaled so that 19 quadratics keep the activations of order 1.
    w = {"conv1.weight": rng.normal(0, 0.5 / math.sqrt(27), (16, 3, 3, 3))}
    channels = 16
    for stage, planes in enumerate((16, 32, 64), start=1):
        for b in range((depth - 2) // 6):
            w[f"layer{stage}.{b}.conv1.weight"] = rng.normal(0, 0.5 / math.sqrt(9 * channels), (planes, channels, 3, 3))
            w[f"layer{stage}.{b}.conv2.weight"] = rng.normal(0, 0.5 / math.sqrt(9 * planes), (planes, planes, 3, 3))
            channels = planes
    for name, c in zip(aespa.activation_names(depth), [16] + [p for p in (16, 32, 64) for _ in range(2 * ((depth - 2) // 6))]):
        w[f"{name}.a"], w[f"{name}.b"], w[f"{name}.c"] = rng.normal(0.05, 0.02, c), rng.normal(0.7, 0.1, c), rng.normal(0, 0.1, c)
    w["linear.weight"], w["linear.bias"] = rng.normal(0, 0.3, (10, 64)), rng.normal(0, 0.1, 10)
    return w


def test_model_front_graph_computes_the_folded_network():
    from lycaon.frontend.executor import run_float

    rng = np.random.default_rng(5)
    weights = random_folded_weights(rng)
    g = aespa.graph(weights)
    polys = [n for n in g.nodes if n.op == "poly"]
    assert [n.name for n in polys] == aespa.activation_names(20)
    assert all(n.params["coefficients"].shape == (n.shape[0], 3) for n in polys)
    x = rng.normal(0, 1, (4, 3, 32, 32))
    expected = aespa.forward(weights, x)
    assert np.isfinite(expected).all() and np.abs(expected).max() > 1e-3
    np.testing.assert_allclose(run_float(g, x), expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())


def test_monic_quadratics_move_every_factor_into_a_layer():
    from lycaon.frontend import ModelError, monic_quadratics
    from lycaon.frontend.executor import run_float

    rng = np.random.default_rng(7)
    weights = random_folded_weights(rng)
    g = aespa.graph(weights)
    m = monic_quadratics(g)
    assert [n.op for n in m.nodes] == [n.op for n in g.nodes]
    assert all(np.all(n.params["coefficients"][:, 2] == 1.0) for n in m.nodes if n.op == "poly")
    x = rng.normal(0, 1, (3, 3, 32, 32))
    expected = run_float(g, x)
    np.testing.assert_allclose(run_float(m, x), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    # The caller's graph keeps its weights.
    np.testing.assert_array_equal(g.nodes[0].params["weight"], weights["conv1.weight"])
    # A channel without a square term cannot be made monic.
    weights["act1.a"][3] = 0.0
    with pytest.raises(ModelError, match=r"channel\(s\) \[3\]"):
        monic_quadratics(aespa.graph(weights))


def test_per_channel_poly_node_is_checked_and_evaluated_per_channel():
    from lycaon.frontend.executor import run_node
    from lycaon.frontend.ir import Graph, ModelError, Node

    g = Graph("x", (2, 3, 3))
    coeffs = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 0.5]])
    node = g.add(Node("poly", "q", ["x"], "y", {}, {"coefficients": coeffs}))
    x = np.random.default_rng(6).normal(size=(5, 2, 3, 3))
    y = run_node(node, [x])
    np.testing.assert_allclose(y[:, 0], 1 + 2 * x[:, 0] + 3 * x[:, 0] ** 2)
    np.testing.assert_allclose(y[:, 1], -x[:, 1] + 0.5 * x[:, 1] ** 2)
    with pytest.raises(ModelError, match=r"\(2, degree \+ 1\) per channel"):
        Graph("x", (2, 3, 3)).add(Node("poly", "q", ["x"], "y", {}, {"coefficients": np.ones((3, 3))}))


@needs_torch
@needs_benchmarks
def test_folded_numpy_resnet_equals_the_torch_network():
    from lycaon_benchmarks.torch_models import HerPN2d, ResNetCifarAespa

    torch.manual_seed(0)
    net = ResNetCifarAespa(20).double()
    x = torch.randn(32, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():  # running statistics away from their initial 0 and 1
        net.train()
        for _ in range(3):
            net(x)
        for m in net.modules():
            if isinstance(m, HerPN2d):
                m.weight.normal_(1, 0.3)
                m.bias.normal_(0, 0.3)
    net.eval()
    with torch.no_grad():
        expected = net(x[:8]).numpy()
    weights = load_script().folded_weights(net)
    assert sorted(k for k in weights if k.endswith(".a")) == sorted(f"{n}.a" for n in aespa.activation_names(20))
    got = aespa.forward(weights, x[:8].numpy())
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


@needs_torch
@needs_benchmarks
@needs_cifar
def test_training_smoke_run(tmp_path):
    registry = (ROOT / "python" / "lycaon" / "models" / "registry.json").read_text()
    env = dict(os.environ)  # the installed package: the source tree has no native module unless built in place
    cmd = [sys.executable, str(SCRIPT), "--limit", "32", "--epochs", "1", "--restart-epochs", "0", "--batch", "32",
           "--check-images", "16", "--checkpoint", str(tmp_path / "smoke.pt")]
    # --train-only (a lent GPU machine): train and checkpoint, fold nothing.
    run = subprocess.run(cmd + ["--train-only"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "epoch 1/1" in run.stdout and "folded vs trained network" not in run.stdout
    assert [f.name for f in tmp_path.iterdir()] == ["smoke.pt"]  # written through a temporary file, none left behind
    # A second run resumes from the checkpoint instead of training again, then folds and tests.
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming after epoch 1" in again.stdout and "epoch 1/1" not in again.stdout
    assert "folded vs trained network" in again.stdout and "test accuracy (folded" in again.stdout
    assert (ROOT / "python" / "lycaon" / "models" / "registry.json").read_text() == registry  # nothing shipped without --ship


@needs_cifar
def test_shipped_weights_classify_as_registered():
    from lycaon.frontend import resnet, zoo
    from lycaon.models import load_weights, registry

    entry = registry()["resnet20-aespa-cifar10"]
    assert entry["test_images"] == 10000 and entry["activation"] == "aespa-quadratic"
    x, y = zoo.cifar10("test")
    rows = np.random.default_rng(3).permutation(len(x))[:300]
    logits = aespa.forward(load_weights("resnet20-aespa-cifar10"), resnet.preprocess(x[rows]))
    # 300 of the 10,000 images the registry's accuracy was measured on: within 4 standard errors.
    assert abs(float((logits.argmax(1) == y[rows]).mean()) - entry["accuracy"]) <= 4 * math.sqrt(0.25 / 300)
