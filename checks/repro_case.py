"""What a repro script says of itself: its case (the ``case()`` function, the inputs and the
call it runs on both sides, which a reader of a failure or a comment needs before the whole
script) and whether it starts the candidate's interpreter itself."""

from __future__ import annotations

import ast

CASE_LINES = 15  # a longer case (large literal inputs) is left to the script itself
SCRIPT_CHARS = 200_000  # a repro is read from an untrusted report: larger ones are not parsed


def case_source(repro: str, limit: int = CASE_LINES) -> str | None:
    """The ``case()`` function of ``repro`` as written, or None when the script has none,
    does not parse, or the function is longer than ``limit`` lines. The script may come
    from an untrusted report: one over ``SCRIPT_CHARS``, or nested past the parser's limits,
    is no case."""
    if len(repro) > SCRIPT_CHARS:
        return None
    try:
        tree = ast.parse(repro)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "case":
            source = ast.get_source_segment(repro, node)
            if source is None or len(source.splitlines()) > limit:
                return None
            return source
    return None


CANDIDATE_SIDE = "--candidate-side"  # how a two-process script runs its candidate's side


def starts_the_candidate(script: str) -> bool:
    """Whether ``script`` is of the two-process form: it starts the candidate's interpreter
    itself (``--python PATH``, default the one running it)."""
    return CANDIDATE_SIDE in script
