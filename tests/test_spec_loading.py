"""Loading specs (checks/spec_loading.py): a spec file's own specs, a source's exact set whatever
this process loaded before, and files that cannot be loaded told by path."""

from __future__ import annotations

from pathlib import Path

import pytest

from alignbot.checks.spec_loading import SpecFileError, SpecSource, library_specs, load_file

SPECS = '''from typing import Any

from alignbot.checks import autotest, random_tensor


@autotest(n={n})
def {name}(torch: Any) -> Any:
    return torch.exp(random_tensor(ndim=1))
'''


def spec_file(folder: Path, stem: str, *names: str, n: int = 3) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.py"
    path.write_text("\n\n".join(SPECS.format(name=name, n=n) for name in names))
    return path


def test_a_spec_file_gives_its_own_specs(tmp_path: Path) -> None:
    specs = load_file(spec_file(tmp_path, "loading_one", "b_exp", "a_exp"))
    assert [spec.name for spec in specs] == ["loading_one.a_exp", "loading_one.b_exp"]
    assert all(spec.n == 3 for spec in specs)


def test_a_source_holds_its_files_specs_alone_by_name(tmp_path: Path) -> None:
    load_file(spec_file(tmp_path / "other", "loading_other", "exp"))  # loaded before, not asked
    source = SpecSource(library=False, files=(spec_file(tmp_path, "loading_z", "exp"),
                                              spec_file(tmp_path, "loading_a", "exp")))
    assert [spec.name for spec in source.load()] == ["loading_a.exp", "loading_z.exp"]


def test_a_file_loaded_again_gives_its_new_contents(tmp_path: Path) -> None:
    path = spec_file(tmp_path, "loading_again", "exp", n=3)
    assert [spec.n for spec in SpecSource(library=False, files=(path,)).load()] == [3]
    # a longer file: a cached bytecode of the same size and second could be taken for it
    spec_file(tmp_path, "loading_again", "exp", n=12)
    assert [spec.n for spec in SpecSource(library=False, files=(path,)).load()] == [12]


def test_a_later_file_replaces_a_spec_of_the_same_name(tmp_path: Path) -> None:
    first = spec_file(tmp_path / "one", "loading_twice", "exp", n=3)
    second = spec_file(tmp_path / "two", "loading_twice", "exp", n=5)
    (spec,) = SpecSource(library=False, files=(first, second)).load()
    assert spec.name == "loading_twice.exp" and spec.n == 5


def test_a_missing_or_broken_file_is_told_by_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.py"
    with pytest.raises(SpecFileError, match=r"nowhere\.py: no such file"):
        SpecSource(library=False, files=(missing,)).load()
    broken = tmp_path / "loading_broken.py"
    broken.write_text("import no_such_module_anywhere\n")
    with pytest.raises(SpecFileError, match=r"loading_broken\.py: ModuleNotFoundError: "):
        SpecSource(library=False, files=(broken,)).load()


def test_a_directory_is_no_spec_file_and_said_to_be_one(tmp_path: Path) -> None:
    with pytest.raises(SpecFileError, match=r": is a directory; expected a Python file of "
                                            r"@autotest specs \(one --spec-file per file\)$"):
        SpecSource(library=False, files=(tmp_path,)).load()


def test_the_library_holds_the_library_specs_only(tmp_path: Path) -> None:
    load_file(spec_file(tmp_path, "loading_mine", "exp"))
    library = library_specs()
    assert library and all(spec.fn.__module__.startswith("alignbot.checks.library.")
                           for spec in library)
    with_files = SpecSource(files=(spec_file(tmp_path, "loading_extra", "exp"),)).load()
    assert {spec.name for spec in with_files} == {spec.name for spec in library} | {
        "loading_extra.exp"}
    assert [spec.name for spec in with_files] == sorted(spec.name for spec in with_files)
