"""checks/spec.py: where a run's specs come from."""

from __future__ import annotations

from pathlib import Path

from alignbot.checks.spec_loading import SpecSource, library_specs, load_file

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_source_loads_its_own_specs_whatever_this_process_loaded_before() -> None:
    library = [s.name for s in library_specs()]
    assert library and all(not name.startswith("chained_bugs_specs.") for name in library)
    load_file(FIXTURES / "chained_bugs_specs.py")  # registered in this process from now on
    assert [s.name for s in SpecSource(library=True).load()] == library
    with_file = [s.name for s in SpecSource(
        library=True, files=(FIXTURES / "chained_bugs_specs.py",)).load()]
    assert with_file == sorted(with_file)
    assert set(with_file) - set(library) == {
        s.name for s in load_file(FIXTURES / "chained_bugs_specs.py")}
    only_file = SpecSource(library=False, files=(FIXTURES / "chained_bugs_specs.py",)).load()
    assert {s.name.split(".")[0] for s in only_file} == {"chained_bugs_specs"}
