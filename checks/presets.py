"""Built-in candidates: a name -> the prelude that binds ``torch`` in the worker."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from .candidate import CandidateConfig
from .installs import PINS, TORCH, lacks
from .runtime.dtypes import TABLE


def _compile_each_call(imports: str, compile_options: str) -> str:
    """A prelude that sends every call through ``torch.compile(…, {compile_options})``, one
    compiled caller per API name."""
    return f'''
import torch
{imports}
for _name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
              "accumulated_recompile_limit"):
    if hasattr(torch._dynamo.config, _name):
        setattr(torch._dynamo.config, _name, 100000)
_callers = {{}}


def alignbot_wrap(target, fn):
    """Every call goes through torch.compile (one compiled caller per API name)."""
    caller = _callers.get(target)
    if caller is None:
        namespace = {{}}
        exec("def call(fn, *args, **kwargs):\\n    return fn(*args, **kwargs)\\n", namespace)
        caller = torch.compile(namespace["call"], {compile_options})
        _callers[target] = caller
    return lambda *args, **kwargs: caller(fn, *args, **kwargs)
'''


_COMPILE = _compile_each_call("", "dynamic=False")

# OpenVINO's torch.compile backend. aot_autograd: without it the compiled outputs carry no
# grad_fn (no gradient to compare); f32: by default it computes in bfloat16 on CPUs that have
# it, which no PyTorch float32 tolerance admits.
_OPENVINO = _compile_each_call(
    "import openvino\nimport openvino.torch  # registers the \"openvino\" backend\n",
    'backend="openvino", dynamic=False, options={"aot_autograd": True, '
    '"config": {"INFERENCE_PRECISION_HINT": "f32"}}')

# torchax: PyTorch ops on JAX. torchax 0.0.13 names about twenty named-tensor overloads at
# import (aten.std.names_dim, aten.unbind.Dimname, …) that torch 2.13 no longer has; while
# it loads, such a name resolves to a stand-in that nothing dispatches to. Accuracy mode:
# without it float64 is silently computed in float32.
_TORCHAX = '''
import torch
import torch._ops

_overload = torch._ops.OpOverloadPacket.__getattr__


class _RemovedOverload:
    """A named-tensor overload this torch no longer has: a table key, never called."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<removed overload {self.name}>"


def _overload_or_stand_in(packet, name):
    try:
        return _overload(packet, name)
    except AttributeError:
        if "imname" in name or "names" in name:
            return _RemovedOverload(f"{packet}.{name}")
        raise


torch._ops.OpOverloadPacket.__getattr__ = _overload_or_stand_in
try:
    import torchax
    torchax.enable_globally()  # loads its op tables
finally:
    torch._ops.OpOverloadPacket.__getattr__ = _overload
torchax.enable_accuracy_mode()
alignbot_device = "jax"
'''

_COMPILE_PROGRAM = '''
import torch

for _name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
              "accumulated_recompile_limit"):
    if hasattr(torch._dynamo.config, _name):
        setattr(torch._dynamo.config, _name, 100000)


def alignbot_program(forward):
    """The drawn program's whole forward as one torch.compile'd function: Inductor fuses
    across calls. Every program is a new function (a fresh compile, no stale guards)."""
    torch._dynamo.reset()  # one program, one compile: no cache of guards to walk
    return torch.compile(forward, dynamic=False)
'''

# The dtypes a candidate may compute float64 in, computed in float64 here.
_LOW = ", ".join(f"torch.{row.name}" for row in TABLE if "float64" in row.narrows)
_FLOAT64 = '''
import torch

_LOW = (''' + _LOW + ''')


def _up(value):
    if isinstance(value, torch.Tensor) and value.dtype in _LOW:
        return value.to(torch.float64)
    if isinstance(value, (list, tuple)):
        return type(value)(_up(v) for v in value)
    if isinstance(value, torch.nn.Module):
        return value.to(torch.float64)
    return value


def _down(value, dtype):
    if isinstance(value, torch.Tensor) and value.dtype == torch.float64 and dtype is not None:
        return value.to(dtype)
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        items = [_down(v, dtype) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value


def _low_dtype(values):
    found = [v.dtype for v in values if isinstance(v, torch.Tensor) and v.dtype in _LOW]
    return max(found, key=lambda d: torch.finfo(d).bits) if found else None


def alignbot_wrap(target, fn):
    """Every call computes in float64 and casts its result back to the input precision."""
    if isinstance(fn, torch.nn.Module):
        def call_module(*args, **kwargs):
            dtype = _low_dtype(list(args) + list(kwargs.values()))
            if dtype is None:
                return fn(*args, **kwargs)
            tensors = {n: _up(t) for n, t in fn.named_parameters()}
            buffers = {n: _up(b) for n, b in fn.named_buffers() if b is not None}
            out = torch.func.functional_call(fn, {**tensors, **buffers}, _up(tuple(args)),
                                             {k: _up(v) for k, v in kwargs.items()})
            with torch.no_grad():  # buffers updated in float64 (running stats) go back
                for name, buf in fn.named_buffers():
                    if buf is not None and buffers[name] is not buf:
                        buf.copy_(buffers[name])
            return _down(out, dtype)
        return call_module
    owner = getattr(fn, "__self__", None)
    inplace = target.endswith("_") or target.rsplit(".", 1)[-1].startswith("__i")

    def call(*args, **kwargs):
        values = ([owner] if isinstance(owner, torch.Tensor) else []) + list(args)
        dtype = _low_dtype(values + list(kwargs.values()))
        if dtype is None or inplace or kwargs.get("inplace"):
            return fn(*args, **kwargs)
        up_args = tuple(_up(a) for a in args)
        up_kwargs = {k: _up(v) for k, v in kwargs.items()}
        if isinstance(owner, torch.Tensor):
            return _down(getattr(_up(owner), fn.__name__)(*up_args, **up_kwargs), dtype)
        return _down(fn(*up_args, **up_kwargs), dtype)
    return call
'''

PRESETS: dict[str, str] = {
    "torch": "import torch\n",
    "torch-compile": _COMPILE,
    "torch-compile-program": _COMPILE_PROGRAM,
    "torch-float64": _FLOAT64,
    "torch-no-mkldnn": "import torch\ntorch.backends.mkldnn.enabled = False\n",
    "paddle": "import paddle\npaddle.enable_compat()\nimport torch\n",
    "torchax": _TORCHAX,
    "openvino": _OPENVINO,
}

# What each preset's prelude imports at top level, and the pip requirement that provides it
# (checks/installs.py): a preset whose interpreter lacks one is refused in one line that says
# what to install.
REQUIREMENTS: dict[str, dict[str, str]] = {
    **{name: {"torch": TORCH} for name in ("torch", "torch-compile", "torch-compile-program",
                                           "torch-float64", "torch-no-mkldnn")},
    "paddle": {"paddle": PINS["paddle"]},
    "torchax": {"torch": TORCH, "torchax": PINS["torchax"]},
    "openvino": {"torch": TORCH, "openvino": PINS["openvino"]},
}
# The presets that run in an interpreter of their own, not alignbot's (`--python`).
OWN_INTERPRETER = frozenset(n for n, needs in REQUIREMENTS.items() if set(needs) != {"torch"})


class NoCandidate(ValueError):
    """What to check was not said, or said wrongly (an unknown preset, an interpreter that
    lacks the preset's packages)."""


class UnknownPreset(NoCandidate):
    pass


class MissingPackage(NoCandidate):
    pass


def preset(name: str, python: str | None = None, timeout: float = 60.0) -> CandidateConfig:
    if name not in PRESETS:
        raise UnknownPreset(f"unknown candidate preset {name!r}; choose one of "
                            f"{', '.join(sorted(PRESETS))}")
    return CandidateConfig(name=name, prelude=PRESETS[name], python=python or sys.executable,
                           timeout=timeout)


# One marked line: an interpreter may print at startup (sitecustomize, a .pth file).
_MISSING = "alignbot-missing:"
_FIND = ("import importlib.util, sys\n"
         f"print({_MISSING!r}, *(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))")


def missing_packages(name: str, python: str, env: dict[str, str] | None = None,
                     flags: tuple[str, str] = ("--candidate", "--python")) -> str | None:
    """Why ``python`` cannot run preset ``name`` (what to install there), or None when it has
    every package the preset imports, or when it does not run at all (starting the worker
    says so). ``flags``: how the preset and the interpreter are given (the CLI's, or the
    pytest plugin's)."""
    needs = REQUIREMENTS.get(name, {})
    if not needs:
        return None
    try:
        found = subprocess.run([python, "-c", _FIND, *needs], capture_output=True, text=True,
                               timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    marked = [line for line in found.stdout.splitlines() if line.startswith(_MISSING)]
    said = marked[-1].split()[1:] if found.returncode == 0 and marked else []
    missing = [m for m in needs if m in said]
    return f"{flags[0]} {name}: {lacks(python, missing, flags[1])}" if missing else None


def candidate(preset_name: str | None, prelude: str | None, *, python: str | None = None,
              timeout: float = 60.0, overrides: dict[str, str] | None = None,
              sys_path: tuple[str, ...] | None = None,
              flags: tuple[str, str] = ("--candidate", "--python")) -> CandidateConfig:
    """The candidate a command names: a built-in preset, or a prelude of the user's own (named
    ``prelude``). The CLI and the pytest plugin both build theirs here (``flags``: how each
    spells the preset's and the interpreter's options); :class:`NoCandidate` says what is
    wrong in one line."""
    if prelude is None and preset_name is None:
        raise NoCandidate("say what to check: a candidate preset or a prelude")
    config = (CandidateConfig(name="prelude", prelude=prelude) if prelude is not None
              else preset(str(preset_name)))
    config = dataclasses.replace(config, python=python or sys.executable, timeout=timeout,
                                 overrides=dict(overrides or {}))
    if prelude is None:
        problem = missing_packages(config.name, config.python, config.env, flags)
        if problem is not None:
            raise MissingPackage(problem)
    return config if sys_path is None else dataclasses.replace(config, sys_path=sys_path)
