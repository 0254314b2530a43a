"""Homogeneity degrees of networks in their parameters, derived from traced graphs.

>>> import torch
>>> from torch import nn
>>> mlp = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
>>> report = analyze(mlp, torch.randn(5, 3))
>>> report.degree, str(report.grade)
(2, 'asymptotic')
"""

from homogeneity.analysis import analyze
from homogeneity.builder import GraphBuilder
from homogeneity.certify import certify
from homogeneity.checker import check_certificate
from homogeneity.degree import Degree, Grade, K
from homogeneity.depth import block_degree_map, stack_degree
from homogeneity.errors import HomogeneityError
from homogeneity.rules import RULES, register_rule, rule_for
from homogeneity.tracing import export_model, node_module_path

__all__ = [
    "RULES",
    "Degree",
    "Grade",
    "GraphBuilder",
    "HomogeneityError",
    "K",
    "analyze",
    "block_degree_map",
    "certify",
    "check_certificate",
    "export_model",
    "node_module_path",
    "register_rule",
    "rule_for",
    "stack_degree",
]
