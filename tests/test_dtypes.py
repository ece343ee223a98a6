"""checks/runtime/dtypes.py: one row per dtype, each held to torch's and NumPy's own facts,
and every place that needs a dtype's facts reading them from its row."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alignbot.checks import catalog, compare, triage
from alignbot.checks.capabilities import PRECISIONS
from alignbot.checks.opinfo import specs as opinfo_specs
from alignbot.checks.runtime import values
from alignbot.checks.runtime.dtypes import BY_NAME, DTYPES, TABLE, Dtype
from alignbot.checks.signatures import NARROWER, holds

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parent.parent
ROWS = pytest.mark.parametrize("row", TABLE, ids=lambda row: row.name)


def _torch(row: Dtype) -> Any:
    return getattr(torch, row.name)


def test_every_dtype_is_one_row_and_every_list_of_dtypes_is_the_table() -> None:
    names = [row.name for row in TABLE]
    assert len(set(names)) == len(names) == len(BY_NAME)
    for listed in (DTYPES, catalog.DTYPE_ORDER, opinfo_specs.DTYPES):
        assert sorted(listed) == sorted(names)
    assert opinfo_specs.DTYPES[0] == "float32"  # what an OpInfo draw shrinks to


@ROWS
def test_a_row_is_the_torch_dtype_of_its_name_and_family(row: Dtype) -> None:
    dtype = _torch(row)
    assert values.dtype_name(dtype) == row.name
    family = ("complex" if dtype.is_complex else "float" if dtype.is_floating_point
              else "bool" if dtype == torch.bool else "int")
    assert row.family == family
    assert (row.part is not None) == (family == "complex")
    if row.part is not None:
        assert values.dtype_name(dtype.to_real()) == row.part
        assert row.eps == BY_NAME[row.part].eps


@ROWS
def test_rounding_step_and_range_are_torch_finfo(row: Dtype) -> None:
    if row.family not in ("float", "complex"):
        assert row.eps is None and row.finite_max is None
        return
    info = torch.finfo(_torch(row))
    assert row.eps == pytest.approx(info.eps, rel=5e-3)
    assert triage.EPS[row.name] == row.eps
    # a range is clipped exactly where it is narrower than float32's (what draws are made in)
    if info.max < torch.finfo(torch.float32).max:
        assert row.finite_max == pytest.approx(info.max, rel=1e-4)
    else:
        assert row.finite_max is None


@ROWS
def test_significand_bits_are_the_dtype_s_own(row: Dtype) -> None:
    """1 + 2**-bits is a value of the dtype and 1 + 2**-(bits + 1) is not."""
    if row.significand is None:
        assert row.family != "float"
        return
    checks = [(row.significand, True)]
    if row.significand < 52:  # float64's own: a finer value is not a float64 to test with
        checks.append((row.significand + 1, False))
    for bits, held in checks:
        one_up = torch.tensor(1 + 2.0 ** -bits, dtype=torch.float64)
        assert (one_up.to(_torch(row)).to(torch.float64) == one_up).item() is held


@ROWS
def test_values_round_trip_through_their_numpy_dtype(row: Dtype) -> None:
    """A dtype NumPy has travels in it as itself; one it has not, in a NumPy dtype that holds
    each of its values, cast back by torch as the runtime casts it."""
    if not row.cast:
        assert np.dtype(row.numpy) == values.numpy_dtype(row.name)
        arr = np.zeros(3, dtype=row.numpy)
        assert torch.from_numpy(arr).dtype == _torch(row)
        assert torch.zeros(3, dtype=_torch(row)).numpy().dtype == arr.dtype
        return
    with pytest.raises(TypeError):
        np.dtype(row.name)
    drawn = values.make_array({"kind": "uniform", "seed": 1, "low": -3.0, "high": 3.0},
                              row.name, [64])
    assert drawn.dtype == np.dtype(row.numpy)
    exact = values.cast_input(torch, torch.from_numpy(drawn), row.name)  # rounded once
    assert exact.dtype == _torch(row)
    name, back = values.to_numpy(torch, exact)
    assert name == row.name and back.dtype == np.dtype(row.numpy)
    again = values.cast_input(torch, torch.from_numpy(back), row.name)
    assert torch.equal(again.view(torch.uint8), exact.view(torch.uint8))  # bit for bit


@ROWS
def test_every_recipe_makes_an_array_of_the_row_s_numpy_dtype(row: Dtype) -> None:
    recipes: list[dict[str, Any]] = [{"kind": "uniform", "seed": 3, "low": -2.0, "high": 2.0},
                                     *({"kind": "pattern", "pattern": name} for name in
                                       ("zeros", "ones", "arange", "arange-centered"))]
    for recipe in recipes:
        assert values.make_array(recipe, row.name, [2, 3]).dtype == np.dtype(row.numpy)


@ROWS
def test_tolerances_are_what_compare_and_triage_use(row: Dtype) -> None:
    assert compare.tolerance(row.name) == (row.rtol, row.atol)
    assert compare.tolerance(row.name, 0.5, 0.25) == (0.5, 0.25)
    assert (row.eps is not None) == (row.name in triage.EPS)


def test_a_dtype_s_tolerance_decides_a_comparison() -> None:
    def tensor(value: float, dtype: str) -> dict[str, Any]:
        arr = np.asarray([value], dtype=values.numpy_dtype(dtype))
        return {"t": "tensor", "dtype": dtype, "shape": [1], "data": arr}

    assert compare.compare(tensor(1.0, "float32"), tensor(1.0001, "float32")) is not None
    assert compare.compare(tensor(1.0, "float16"), tensor(1.0001, "float16")) is None
    assert compare.compare(tensor(1.0, "bfloat16"), tensor(1.0078125, "bfloat16")) is None
    assert compare.compare(tensor(1, "int64"), tensor(2, "int64")) is not None


def test_every_declarable_precision_is_a_floating_row_with_tolerances() -> None:
    for name in PRECISIONS:
        row = BY_NAME[name]
        assert row.family == "float" and row.rtol > 0 and row.atol > 0


@ROWS
def test_autograd_is_asked_of_a_dtype_only_where_it_works(row: Dtype) -> None:
    assert values.differentiable(row.name) is row.grad
    if row.grad:
        torch.zeros(2, dtype=_torch(row), requires_grad=True)
    elif row.family in ("int", "bool"):
        with pytest.raises(RuntimeError, match="can require gradients"):
            torch.zeros(2, dtype=_torch(row), requires_grad=True)
    else:  # float8: the tensor takes a gradient, its kernels have no backward
        x = torch.zeros(2, dtype=_torch(row), requires_grad=True)
        with pytest.raises(NotImplementedError):
            (x * x).sum().backward()


@ROWS
def test_a_repro_casts_an_arange_where_torch_has_no_kernel_for_it(row: Dtype) -> None:
    if not row.arange:
        with pytest.raises(RuntimeError, match="not implemented"):
            torch.arange(3, dtype=_torch(row))


def test_every_dtype_without_an_arange_kernel_is_cast_in_a_repro() -> None:
    lacking = set()
    for row in TABLE:
        try:
            torch.arange(3, dtype=_torch(row))
        except RuntimeError:
            lacking.add(row.name)
    assert lacking == {row.name for row in TABLE if not row.arange}


@ROWS
@pytest.mark.parametrize("pattern", ["zeros", "ones", "arange", "arange-centered"])
def test_a_repro_makes_a_pattern_s_values_bit_for_bit_as_the_runtime_does(
        row: Dtype, pattern: str) -> None:
    """The expression a repro writes for an input, run, is the tensor the runtime made."""
    from alignbot.checks.codegen import tensor_expr

    recipe: dict[str, Any] = {"kind": "pattern", "pattern": pattern}
    made = values.cast_input(torch, torch.from_numpy(values.make_array(recipe, row.name, [2, 3])),
                             row.name)
    written = eval(tensor_expr(recipe, row.name, [2, 3], False, None), {"torch": torch})
    assert written.dtype == made.dtype and written.shape == made.shape
    assert torch.equal(written.view(torch.uint8), made.view(torch.uint8)), (written, made)


def test_narrower_dtypes_are_of_the_family_less_precise_and_most_precise_first() -> None:
    assert NARROWER
    for wide, narrower in NARROWER.items():
        eps = [BY_NAME[name].eps or 0.0 for name in narrower]
        assert eps == sorted(eps) and min(eps) > (BY_NAME[wide].eps or 0.0)
        assert {BY_NAME[name].family for name in narrower} == {BY_NAME[wide].family}
    for row in TABLE:
        assert all(wide in NARROWER and row.name in NARROWER[wide] for wide in row.narrows)


@pytest.mark.parametrize("name", sorted({n for names in NARROWER.values() for n in names}))
def test_a_narrower_dtype_holds_exactly_its_own_values(name: str) -> None:
    """:func:`holds` against torch's own rounding: values rounded to the dtype are held, the
    same values unrounded are not."""
    rng = np.random.default_rng(0)
    wide = rng.normal(size=200) * 100
    if BY_NAME[name].family == "complex":
        wide = wide + 1j * rng.normal(size=200)
    rounded = torch.from_numpy(wide).to(getattr(torch, name)).to(torch.from_numpy(wide).dtype)
    assert holds(rounded.numpy(), name)
    assert not holds(wide, name)


def test_the_float64_preset_computes_in_float64_what_a_candidate_may_narrow() -> None:
    from alignbot.checks.presets import PRESETS

    low = [f"torch.{row.name}" for row in TABLE if "float64" in row.narrows]
    assert f"_LOW = ({', '.join(low)})\n" in PRESETS["torch-float64"]


def test_random_ops_leave_out_the_dtypes_whose_range_is_clipped() -> None:
    assert set(opinfo_specs.LOW_PRECISION) == {
        row.name for row in TABLE if row.finite_max is not None}
    assert "float32" not in opinfo_specs.LOW_PRECISION


def test_the_table_imports_neither_torch_nor_the_engine() -> None:
    """The worker imports it as a top-level module beside its own, and the engine reads it
    before torch is imported."""
    code = ("import sys; import dtypes, values; "
            "assert 'torch' not in sys.modules and 'alignbot' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT / "checks" / "runtime", check=True)
    code = "import sys, alignbot.checks.runtime.dtypes; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_every_precision_a_candidate_may_declare_is_a_declarable_row() -> None:
    """The command line, the report's types and the App's model all read the table."""
    import typing

    from alignbot.bot.engine_report import Capabilities
    from alignbot.checks.report_types import Precision
    from alignbot.checks.runtime.dtypes import DECLARABLE

    assert PRECISIONS == DECLARABLE == typing.get_args(Precision)
    assert tuple(row.name for row in TABLE if row.declarable) == DECLARABLE
    field = Capabilities.model_fields["precision"].annotation
    assert {arg for union in typing.get_args(field) for arg in typing.get_args(union)} == \
        set(DECLARABLE)


def _torch_dtype_names() -> set[str]:
    """torch's own names of its dtypes (``float32``, not the alias ``float``)."""
    return {name for name in dir(torch) if isinstance(getattr(torch, name), torch.dtype)
            and str(getattr(torch, name)) == f"torch.{name}"}


def test_every_dtype_the_engine_names_has_a_row() -> None:
    """A dtype written anywhere under checks/ (``"float16"``, ``torch.bfloat16``) is one the
    table knows: no module keeps a dtype of its own."""
    import ast

    named: dict[str, str] = {}
    known = _torch_dtype_names()
    for path in sorted((ROOT / "checks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in known:
                named.setdefault(str(node.value), str(path.relative_to(ROOT)))
            elif isinstance(node, ast.Attribute) and node.attr in known and \
                    isinstance(node.value, ast.Name) and node.value.id in ("torch", "np"):
                named.setdefault(node.attr, str(path.relative_to(ROOT)))
    assert named and {name: where for name, where in named.items() if name not in BY_NAME} == {}


def test_every_fact_of_a_row_is_read() -> None:
    """Each field of :class:`Dtype` is read somewhere under checks/ (a fact nobody reads is
    not one the engine has)."""
    import ast
    import dataclasses

    read = {node.attr for path in (ROOT / "checks").rglob("*.py")
            for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Attribute)}
    facts = {field.name for field in dataclasses.fields(Dtype)} - {"_"} | {"cast"}
    assert facts - read == set()


# The one line that adds a dtype (torch's float8_e8m0fnu, a power of two in 8 bits); its facts
# are chosen to reach every place that reads a row: declarable, narrowing float64 and float32.
NEW_ROW = ('    Dtype("float8_e8m0fnu", "float", "float32", draw_rank=17, rtol=1.0, atol=1e-5, '
           'eps=1.0,\n          significand=0, finite_max=1.7014e38, arange=False,\n'
           '          narrows=("float64", "float32"), declarable=True),\n')
LAST_ROW = '    _float8("float8_e5m2fnuz", eps=0.125, finite_max=57344.0, significand=2),\n'
SEES_THE_NEW_ROW = '''
import typing
import numpy as np
import alignbot.checks.runtime.dtypes as table
from alignbot.checks import catalog, compare, dsl, triage
from alignbot.checks.capabilities import PRECISIONS
from alignbot.checks.cli import build_parser
from alignbot.checks.codegen import tensor_expr
from alignbot.checks.opinfo import specs
from alignbot.checks.presets import PRESETS
from alignbot.checks.report_types import Precision
from alignbot.checks.runtime import values
from alignbot.checks.signatures import NARROWER, holds
from alignbot.bot.engine_report import Capabilities

NEW = "float8_e8m0fnu"
assert table.__file__.startswith(COPY), table.__file__
assert NEW in table.DTYPES and NEW in table.FLOAT_DTYPES and table.WIDE[NEW] == "float64"
assert catalog.DTYPE_ORDER[-1] == NEW and specs.DTYPES[-1] == NEW  # the highest draw rank
assert NEW in specs.LOW_PRECISION  # its range is clipped
assert compare.tolerance(NEW) == (1.0, 1e-5) and triage.EPS[NEW] == 1.0
assert values.numpy_dtype(NEW) == np.float32 and not values.differentiable(NEW)
assert values.finite_range(NEW, -1e39, 1e39) == (-1.7014e38, 1.7014e38)
dsl.random_tensor(ndim=1, dtype=NEW)
dsl.random_dtype(NEW)
assert tensor_expr({"kind": "pattern", "pattern": "arange"}, NEW, [3], False, None) == \\
    "torch.arange(3).to(torch.float8_e8m0fnu).reshape(3)"
assert NARROWER["float32"][-1] == NEW and NEW in NARROWER["float64"]
assert holds(np.array([0.25, 4.0, 2.0 ** 100]), NEW) and not holds(np.array([3.0]), NEW)
assert "torch.float8_e8m0fnu)" in PRESETS["torch-float64"]
assert PRECISIONS[-1] == NEW and typing.get_args(Precision)[-1] == NEW
assert Capabilities.model_validate({"gradients": True, "precision": NEW,
                                    "declared_by": {}}).precision == NEW
args = build_parser().parse_args(["check", "--candidate", "torch", "--precision", NEW])
assert args.precision == NEW
print("seen")
'''


def test_a_new_dtype_is_one_row_that_every_place_reads(tmp_path: Path) -> None:
    """The engine's sources copied, one row added to the table (nothing else), and the new
    dtype is drawn, compared, triaged, written in repros, declared and validated."""
    import shutil

    copy = tmp_path / "alignbot" / "checks"  # found first on PYTHONPATH, by its import name
    shutil.copytree(ROOT / "checks", copy, ignore=shutil.ignore_patterns("__pycache__"))
    source = (copy / "runtime" / "dtypes.py").read_text()
    assert source.count(LAST_ROW) == 1
    (copy / "runtime" / "dtypes.py").write_text(source.replace(LAST_ROW, LAST_ROW + NEW_ROW))
    proc = subprocess.run([sys.executable, "-c", f"COPY = {str(copy)!r}\n{SEES_THE_NEW_ROW}"],
                          env={**os.environ, "PYTHONPATH": str(tmp_path)},
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "seen\n", proc.stderr[-3000:]
