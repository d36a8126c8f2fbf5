"""Validated input schemas: one frozen pydantic model per concept (STYLE lesson 1)."""

from placement.specs.hardware import AcceleratorSpec, ClusterSpec, ScaleUpKind, ScaleUpSpec, SwitchTier
from placement.specs.layout import Layout, Recompute
from placement.specs.model import FfnKind, Llama3RopeSpec, MLASpec, ModelSpec, MoESpec, YarnRopeSpec
from placement.specs.training import AttentionKernel, Precision, TrainingSpec

__all__ = [
    "AcceleratorSpec",
    "AttentionKernel",
    "ClusterSpec",
    "FfnKind",
    "Layout",
    "Llama3RopeSpec",
    "MLASpec",
    "MoESpec",
    "ModelSpec",
    "Precision",
    "Recompute",
    "ScaleUpKind",
    "ScaleUpSpec",
    "SwitchTier",
    "TrainingSpec",
    "YarnRopeSpec",
]
