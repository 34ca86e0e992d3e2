"""The model front: a small network IR, ONNX import, graph rewrites and a float executor."""

from .executor import run_float
from .ir import SUPPORTED_OPS, Graph, ModelError, Node
from .onnx_export import to_onnx
from .onnx_import import SUPPORTED_ONNX_OPS, load_onnx
from .torch_import import load_torch
from .transforms import compose_pointwise, fold_batchnorm, monic_quadratics, pool_before_relu, relu_input_bound, scale_relu_inputs, simplify, subsample_before_pointwise

__all__ = ["Graph", "Node", "ModelError", "SUPPORTED_OPS", "SUPPORTED_ONNX_OPS", "load_onnx", "load_torch", "to_onnx", "run_float", "fold_batchnorm", "compose_pointwise", "pool_before_relu", "simplify", "subsample_before_pointwise", "monic_quadratics", "relu_input_bound", "scale_relu_inputs"]
