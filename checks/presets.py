"""Built-in candidates: a name -> the prelude that binds ``torch`` in the worker."""

from __future__ import annotations

import dataclasses
import sys

from .candidate import CandidateConfig

_COMPILE = '''
import torch

for _name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
              "accumulated_recompile_limit"):
    if hasattr(torch._dynamo.config, _name):
        setattr(torch._dynamo.config, _name, 100000)
_callers = {}


def alignbot_wrap(target, fn):
    """Every call goes through torch.compile (one compiled caller per API name)."""
    caller = _callers.get(target)
    if caller is None:
        namespace = {}
        exec("def call(fn, *args, **kwargs):\\n    return fn(*args, **kwargs)\\n", namespace)
        caller = torch.compile(namespace["call"], dynamic=False)
        _callers[target] = caller
    return lambda *args, **kwargs: caller(fn, *args, **kwargs)
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

_FLOAT64 = '''
import torch

_LOW = (torch.float16, torch.bfloat16, torch.float32)


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
}


class NoCandidate(ValueError):
    """What to check was not said, or said wrongly (an unknown preset)."""


class UnknownPreset(NoCandidate):
    pass


def preset(name: str, python: str | None = None, timeout: float = 60.0) -> CandidateConfig:
    if name not in PRESETS:
        raise UnknownPreset(f"unknown candidate preset {name!r}; choose one of "
                            f"{', '.join(sorted(PRESETS))}")
    return CandidateConfig(name=name, prelude=PRESETS[name], python=python or sys.executable,
                           timeout=timeout)


def candidate(preset_name: str | None, prelude: str | None, *, python: str | None = None,
              timeout: float = 60.0, overrides: dict[str, str] | None = None,
              sys_path: tuple[str, ...] | None = None) -> CandidateConfig:
    """The candidate a command names: a built-in preset, or a prelude of the user's own (named
    ``prelude``). The CLI and the pytest plugin both build theirs here; :class:`NoCandidate`
    says what is wrong in one line."""
    if prelude is None and preset_name is None:
        raise NoCandidate("say what to check: a candidate preset or a prelude")
    config = (CandidateConfig(name="prelude", prelude=prelude) if prelude is not None
              else preset(str(preset_name)))
    config = dataclasses.replace(config, python=python or sys.executable, timeout=timeout,
                                 overrides=dict(overrides or {}))
    return config if sys_path is None else dataclasses.replace(config, sys_path=sys_path)
