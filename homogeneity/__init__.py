"""Homogeneity degrees of networks in their parameters, derived from traced graphs.

>>> import torch
>>> from torch import nn
>>> mlp = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
>>> report = analyze(mlp, torch.randn(5, 3))
>>> report.degree, str(report.grade)
(2, 'asymptotic')
"""

from homogeneity.analysis import (
    META_KEY,
    DegreeInterpreter,
    analyze,
    analyze_program,
    output_names,
    select_parameters,
)
from homogeneity.builder import GraphBuilder, Value
from homogeneity.certificate import Certificate
from homogeneity.certify import certify
from homogeneity.checker import CertificateCheck, check_certificate
from homogeneity.degree import Case, Degree, Grade, K, add_degrees
from homogeneity.depth import DegreeMap, L, block_degree_map, stack_degree
from homogeneity.errors import HomogeneityError
from homogeneity.report import HomogeneityReport, ModuleSummary, NodeDegree
from homogeneity.rules import RULES, register_rule, rule_for, rule_table, rule_table_markdown
from homogeneity.tracing import export_model, export_ready, node_module_path, parameter_names

__all__ = [
    "META_KEY",
    "RULES",
    "Case",
    "Certificate",
    "CertificateCheck",
    "Degree",
    "DegreeInterpreter",
    "DegreeMap",
    "Grade",
    "GraphBuilder",
    "HomogeneityError",
    "HomogeneityReport",
    "K",
    "L",
    "ModuleSummary",
    "NodeDegree",
    "Value",
    "add_degrees",
    "analyze",
    "analyze_program",
    "block_degree_map",
    "certify",
    "check_certificate",
    "export_model",
    "export_ready",
    "node_module_path",
    "output_names",
    "parameter_names",
    "register_rule",
    "rule_for",
    "rule_table",
    "rule_table_markdown",
    "select_parameters",
    "stack_degree",
]
