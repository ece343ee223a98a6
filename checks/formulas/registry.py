"""Which PyTorch call each formula stands for: functions by target, modules by class.

A module's formula is its functional formula with the module's constructor arguments (bound
by the class's own signature) passed on by name, or, for the normalization layers with
parameters and running statistics, a formula that takes the module's state too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from . import interpolation, losses, normalization, pooling, special

FUNCTIONAL = "torch.nn.functional."
SPECIAL_PREFIXES = ("torch.", "torch.special.", "torch.Tensor.")


@dataclass(frozen=True)
class Formula:
    """A formula: the function ``name`` of ``module`` (a plain top-level name, so that a
    repro can carry its source)."""
    module: ModuleType
    name: str

    @property
    def fn(self) -> Callable[..., Any]:
        fn: Callable[..., Any] = getattr(self.module, self.name)
        return fn


@dataclass(frozen=True)
class ModuleFormula:
    """A module class: ``formula`` called on the module's inputs with the constructor's
    arguments it accepts (and ``fixed`` ones); ``stateful`` formulas take
    ``(input, state, training, **constructor arguments)`` and return
    :class:`~alignbot.checks.formulas.normalization.Updated` with the buffers they write."""
    formula: Formula
    fixed: dict[str, Any] = field(default_factory=dict)
    stateful: bool = False


POOLING = [f"{kind}_pool{n}d" for kind in ("max", "avg", "lp", "adaptive_max", "adaptive_avg")
           for n in (1, 2, 3)]
INTERPOLATION = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]
LOSSES = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
          "binary_cross_entropy_with_logits", "cross_entropy", "nll_loss", "kl_div",
          "poisson_nll_loss", "gaussian_nll_loss", "hinge_embedding_loss",
          "margin_ranking_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
          "cosine_embedding_loss", "pairwise_distance", "triplet_margin_loss",
          "multi_margin_loss"]
NORMALIZATION = ["batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm",
                 "local_response_norm", "normalize"]


def _functions() -> dict[str, Formula]:
    table: dict[str, Formula] = {}
    for module, names in ((pooling, POOLING), (interpolation, INTERPOLATION),
                          (losses, LOSSES), (normalization, NORMALIZATION)):
        for name in names:
            table[FUNCTIONAL + name] = Formula(module, name)
    for torch_name, name in special.SPECIAL.items():
        for prefix in SPECIAL_PREFIXES:
            table[prefix + torch_name] = Formula(special, name)
    del table["torch.Tensor.polygamma"]  # x.polygamma(n): the order comes second
    return table


def _modules() -> dict[str, ModuleFormula]:
    table: dict[str, ModuleFormula] = {}
    for n in (1, 2, 3):
        for cls, fn in ((f"MaxPool{n}d", f"max_pool{n}d"), (f"AvgPool{n}d", f"avg_pool{n}d"),
                        (f"LPPool{n}d", f"lp_pool{n}d"),
                        (f"AdaptiveAvgPool{n}d", f"adaptive_avg_pool{n}d"),
                        (f"AdaptiveMaxPool{n}d", f"adaptive_max_pool{n}d")):
            table["torch.nn." + cls] = ModuleFormula(Formula(pooling, fn))
        table[f"torch.nn.BatchNorm{n}d"] = ModuleFormula(
            Formula(normalization, "batch_norm_module"), stateful=True)
        table[f"torch.nn.InstanceNorm{n}d"] = ModuleFormula(
            Formula(normalization, "instance_norm_module"), fixed={"spatial": n},
            stateful=True)
    table["torch.nn.Upsample"] = ModuleFormula(Formula(interpolation, "interpolate"))
    table["torch.nn.UpsamplingNearest2d"] = ModuleFormula(
        Formula(interpolation, "interpolate"), fixed={"mode": "nearest"})
    table["torch.nn.UpsamplingBilinear2d"] = ModuleFormula(
        Formula(interpolation, "interpolate"), fixed={"mode": "bilinear", "align_corners": True})
    table["torch.nn.LayerNorm"] = ModuleFormula(Formula(normalization, "layer_norm"))
    table["torch.nn.GroupNorm"] = ModuleFormula(Formula(normalization, "group_norm"))
    table["torch.nn.RMSNorm"] = ModuleFormula(Formula(normalization, "rms_norm"))
    table["torch.nn.LocalResponseNorm"] = ModuleFormula(
        Formula(normalization, "local_response_norm"))
    for cls, fn in (("MSELoss", "mse_loss"), ("L1Loss", "l1_loss"),
                    ("SmoothL1Loss", "smooth_l1_loss"), ("HuberLoss", "huber_loss"),
                    ("BCELoss", "binary_cross_entropy"),
                    ("BCEWithLogitsLoss", "binary_cross_entropy_with_logits"),
                    ("CrossEntropyLoss", "cross_entropy"), ("NLLLoss", "nll_loss"),
                    ("KLDivLoss", "kl_div"), ("PoissonNLLLoss", "poisson_nll_loss"),
                    ("GaussianNLLLoss", "gaussian_nll_loss"),
                    ("HingeEmbeddingLoss", "hinge_embedding_loss"),
                    ("MarginRankingLoss", "margin_ranking_loss"),
                    ("SoftMarginLoss", "soft_margin_loss"),
                    ("MultiLabelSoftMarginLoss", "multilabel_soft_margin_loss"),
                    ("CosineEmbeddingLoss", "cosine_embedding_loss"),
                    ("TripletMarginLoss", "triplet_margin_loss"),
                    ("MultiMarginLoss", "multi_margin_loss")):
        table["torch.nn." + cls] = ModuleFormula(Formula(losses, fn))
    return table


FUNCTIONS = _functions()
MODULES = _modules()
# parameters a module's formula takes from its parameters rather than its constructor
AFFINE = {"torch.nn.LayerNorm": ("weight", "bias"), "torch.nn.GroupNorm": ("weight", "bias"),
          "torch.nn.RMSNorm": ("weight",)}


def lookup(target: str) -> Formula | None:
    """The formula of a call's target (``torch.nn.functional.lp_pool2d``), if there is one."""
    return FUNCTIONS.get(target)
