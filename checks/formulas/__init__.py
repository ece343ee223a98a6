"""Independent implementations of PyTorch ops, written in NumPy (mpmath for special
functions) from the formulas PyTorch's documentation states: pooling, interpolation, losses,
normalization and special functions. Triage uses them where the reference's own float64
run would otherwise be the only oracle (``formula_observations``), and a PyTorch-alone repro
carries one as plain source (``standalone``)."""

from .common import Ambiguous
from .evaluate import formula_observations
from .registry import FUNCTIONS, MODULES, Formula, ModuleFormula, lookup

__all__ = ["FUNCTIONS", "MODULES", "Ambiguous", "Formula", "ModuleFormula",
           "formula_observations", "lookup"]
