"""OpInfo's test wrappers read back: the public API a lambda calls and how it passes the
sample's arguments on (``lambda x, n: torch.special.polygamma(n, x)``, ``lambda x: x.mT``,
``lambda inp, *a, **k: wrapper_set_seed(torch.Tensor.cauchy_, inp, *a, **k)``).

Only a lambda whose body is one call (or attribute) of a ``torch`` API, taking the lambda's
own parameters each once and unchanged, is read; one that computes an argument
(``torch.linalg.pinv(a @ b.mT)``) or works on a copy (``x.clone().resize_(shape)``) is not the
API called on the sample, and is left out with the reason :func:`unwrap` gives.
"""

from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass
from typing import Any

SOURCE_LINES = 12  # a lambda in op_db spans a few lines at most
SEEDED = "wrapper_set_seed"  # OpInfo's wrapper for ops that draw from the random generator


@dataclass(frozen=True)
class WrappedCall:
    """How a wrapper calls ``target``: the lambda's named parameters (the sample's input and
    first args) in ``positions`` order and as ``keywords``, then the rest of the sample's args
    (``rest``) and its kwargs (``extra``) where the lambda passes them on."""

    target: str
    method: bool  # a Tensor method called on (or attribute read from) its first argument
    attribute: bool  # read, not called: ``x.T``
    params: int
    positions: tuple[int, ...]
    keywords: tuple[tuple[str, int], ...]
    rest: bool
    extra: bool
    random: bool  # wrapped in wrapper_set_seed: its values depend on the framework's generator

    def arrange(self, values: list[Any], kwargs: dict[str, Any]
                ) -> tuple[list[Any], dict[str, Any]] | None:
        """The API's arguments for a sample's ``[input, *args]`` and ``kwargs``; None where
        the lambda itself would not accept them."""
        if len(values) < self.params or (len(values) > self.params and not self.rest) \
                or (kwargs and not self.extra):
            return None
        named = values[:self.params]
        args = [named[i] for i in self.positions] + values[self.params:]
        return args, {**{key: named[i] for key, i in self.keywords}, **kwargs}


def unwrap(fn: Any) -> WrappedCall | str:
    """The :class:`WrappedCall` a lambda makes, or why it cannot be read as one."""
    node = _parse(fn)
    if node is None:
        return "whose source cannot be read"
    spec = node.args
    if spec.defaults or spec.kwonlyargs or spec.kw_defaults:
        return "with default or keyword-only parameters"
    params = [a.arg for a in [*spec.posonlyargs, *spec.args]]
    vararg = spec.vararg.arg if spec.vararg else None
    kwarg = spec.kwarg.arg if spec.kwarg else None
    body = node.body
    if isinstance(body, ast.Attribute) and isinstance(body.value, ast.Name) \
            and params == [body.value.id] and vararg is None and kwarg is None:
        return WrappedCall(f"torch.Tensor.{body.attr}", True, True, 1, (0,), (), False, False,
                           False)
    if not isinstance(body, ast.Call):
        return "whose body is not one call"
    func, args, random = body.func, list(body.args), False
    if isinstance(func, ast.Name) and func.id == SEEDED and args:
        func, args, random = args[0], args[1:], True
    path = _dotted(func)
    if path is None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id in params:
        path, args = f"torch.Tensor.{func.attr}", [func.value, *args]
    if path is None or not path.startswith("torch."):
        return "whose call is not a torch API"
    return _arguments(path, args, body.keywords, params, vararg, kwarg, random)


def _arguments(path: str, args: list[ast.expr], keywords: list[ast.keyword],
               params: list[str], vararg: str | None, kwarg: str | None,
               random: bool) -> WrappedCall | str:
    positions: list[int] = []
    rest = extra = False
    for index, arg in enumerate(args):
        if isinstance(arg, ast.Name) and arg.id in params:
            positions.append(params.index(arg.id))
        elif isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name) \
                and arg.value.id == vararg and index == len(args) - 1:
            rest = True
        else:
            return "that computes an argument"
    named: list[tuple[str, int]] = []
    for keyword in keywords:
        if keyword.arg is None and isinstance(keyword.value, ast.Name) \
                and keyword.value.id == kwarg:
            extra = True
        elif keyword.arg is not None and isinstance(keyword.value, ast.Name) \
                and keyword.value.id in params:
            named.append((keyword.arg, params.index(keyword.value.id)))
        else:
            return "that computes an argument"
    if sorted(positions + [i for _, i in named]) != list(range(len(params))):
        return "that drops or repeats a parameter"
    method = path.startswith("torch.Tensor.")
    if method and not positions:
        return "that calls a method on no tensor"
    return WrappedCall(path, method, False, len(params), tuple(positions), tuple(named), rest,
                       extra, random)


def _dotted(node: ast.expr) -> str | None:
    """``torch.nn.functional.relu`` for an attribute chain on a name; None for others."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _parse(fn: Any) -> ast.Lambda | None:
    """The lambda's own expression: the longest text from a ``lambda`` on its first line
    that parses as a lambda with ``fn``'s parameters."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    lines = linecache.getlines(code.co_filename)[code.co_firstlineno - 1:]
    text = "".join(lines[:SOURCE_LINES])
    first = len(lines[0]) if lines else 0
    wanted = code.co_varnames[:code.co_argcount]
    start = text.find("lambda")
    while 0 <= start < first:
        found = _longest(text[start:], wanted)
        if found is not None:
            return found
        start = text.find("lambda", start + 1)
    return None


def _longest(text: str, wanted: tuple[str, ...]) -> ast.Lambda | None:
    for end in range(len(text), 0, -1):
        if not (text[end - 1].isalnum() or text[end - 1] in ")]}_"):
            continue
        try:
            tree = ast.parse("(" + text[:end] + "\n)", mode="eval")
        except SyntaxError:
            continue
        body = tree.body
        if isinstance(body, ast.Lambda) and tuple(
                a.arg for a in [*body.args.posonlyargs, *body.args.args]) == wanted:
            return body
    return None
