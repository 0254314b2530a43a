"""Homogeneity degrees of networks in their parameters, derived from traced graphs."""

from homogeneity.errors import HomogeneityError
from homogeneity.tracing import export_model, export_ready, node_module_path, parameter_names

__all__ = [
    "HomogeneityError",
    "export_model",
    "export_ready",
    "node_module_path",
    "parameter_names",
]
