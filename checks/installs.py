"""What to install where a candidate's interpreter lacks a module: the pip requirements
alignbot is tested with, and the one line that names the interpreter, the module and the
fix."""

from __future__ import annotations

from collections.abc import Sequence

TORCH = "torch==2.13.0+cpu"  # the reference's build: a plain torch==2.13.0 may be CUDA's
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"  # where that build is: not on PyPI
# A module -> the pip requirement that provides it (quoted where a shell would mangle it).
PINS: dict[str, str] = {
    "numpy": "'numpy>=1.26,<3'",  # the candidate's worker itself imports it (pyproject.toml)
    "torch": TORCH,
    "paddle": "paddlepaddle==3.3.1",
    "torchax": "'torchax[cpu]==0.0.13'",
    "openvino": "openvino==2026.4.1",
}


def lacks(python: str, modules: Sequence[str], python_flag: str = "--python") -> str:
    """``PYTHON has no M; install it there (pip install R) or point --python at an
    interpreter that has it``; without the pip command for a module of no known
    requirement, with PyTorch's index for torch."""
    them = "it" if len(modules) == 1 else "them"
    known = [PINS[m] for m in modules if m in PINS]
    index = f" --extra-index-url {TORCH_INDEX}" if "torch" in modules else ""
    command = f" (pip install {' '.join(known)}{index})" if len(known) == len(modules) else ""
    return (f"{python} has no {' or '.join(modules)}; install {them} there{command} or "
            f"point {python_flag} at an interpreter that has {them}")
