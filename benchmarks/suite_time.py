"""Where the test suite's time goes: reads the JUnit XML that `make test` writes
(.test-results.xml) and prints the seconds per test file and the slowest tests.

    .venv/bin/python benchmarks/suite_time.py                  # .test-results.xml
    .venv/bin/python benchmarks/suite_time.py other.xml --top 40

The seconds are each test's own (setup, call and teardown as pytest records them); under
`-n 2` two run at once, so the sum is about twice the wall time."""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path
from xml.etree import ElementTree


def durations(path: Path) -> dict[str, float]:
    """Seconds per test id (``file::name``), from a JUnit XML file pytest wrote."""
    tree = ElementTree.parse(path)  # our own test run's output, not untrusted input
    seconds: dict[str, float] = {}
    for case in tree.iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        seconds[f"{module}.py::{case.get('name', '')}"] = float(case.get("time", "0") or 0)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("xml", nargs="?", type=Path, default=Path(".test-results.xml"))
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    if not args.xml.is_file():
        print(f"suite_time: no {args.xml}; run `make test` first", file=sys.stderr)
        return 2
    seconds = durations(args.xml)
    per_file: dict[str, float] = defaultdict(float)
    for test, spent in seconds.items():
        per_file[test.split("::", 1)[0]] += spent
    total = sum(seconds.values())
    print(f"{len(seconds)} tests, {total:.0f} s of test time")
    print("\nseconds  share  file")
    for name, spent in sorted(per_file.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{spent:7.1f}  {spent / total:5.1%}  {name}")
    print("\nseconds  test")
    for test, spent in sorted(seconds.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{spent:7.1f}  {test}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `suite_time.py | head`: the reader went away
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
