"""What bubblewrap is asked to build (``bot/sandbox/view.py``): the mounts in an order that
makes hidden win over allowed, what is allowed strictly inside a hidden folder come back,
socket files and FIFOs covered, folders on the way searchable; and the scan that finds them."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from alignbot.bot.sandbox import view


def _mounts(argv: list[str]) -> list[tuple[str, str]]:
    """(kind, target) of each mount bubblewrap makes, in order."""
    found, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("--ro-bind", "--bind", "--symlink"):
            found.append((arg, argv[i + 2]))
            i += 3
        elif arg in ("--tmpfs", "--dir", "--remount-ro", "--proc", "--dev"):
            found.append((arg, argv[i + 1]))
            i += 2
        else:
            i += 1
    return found


def test_hidden_wins_over_allowed_and_allowed_inside_hidden_comes_back(tmp_path: Path) -> None:
    root = tmp_path / "srv"
    keys, venv = root / "keys", root / "keys" / "venv"
    for folder in (root, keys, venv):
        folder.mkdir(parents=True)
    key = root / "app.pem"
    key.write_text("secret")
    built = view.bwrap_argv("bwrap", root=True, network=False, expose=[str(root), str(venv)],
                            hide=[str(keys), str(key), "/nowhere/else"],
                            workspace=str(tmp_path / "top"), empty=str(tmp_path / "empty"))
    mounts = _mounts(built.argv)
    at = {m: i for i, m in enumerate(mounts)}
    assert at[("--ro-bind", str(root))] < at[("--tmpfs", str(keys))] < at[("--ro-bind", str(venv))]
    assert ("--ro-bind", str(key)) in at  # the file hidden by an empty file
    assert built.argv[built.argv.index(str(key)) - 1] == str(tmp_path / "empty")
    assert ("--remount-ro", str(keys)) in at and at[("--remount-ro", str(keys))] > \
        at[("--ro-bind", str(venv))]  # read-only once what comes back inside is mounted
    assert not any("/nowhere" in target for _, target in mounts)  # not in the view at all
    assert mounts[-1] == ("--remount-ro", "/")
    assert "hidden-service-paths:2" in built.layers and str(keys) not in " ".join(built.layers)


def test_scratch_folders_are_fresh_and_run_is_empty() -> None:
    built = view.bwrap_argv("bwrap", root=False, network=True, expose=[], hide=["/tmp"],
                            workspace="/tmp/alignbot-sandbox-x")
    mounts = _mounts(built.argv)
    for folder in view.SCRATCH:
        assert ("--tmpfs", folder) in mounts
    assert mounts.index(("--tmpfs", "/tmp")) < mounts.index(("--bind", "/tmp/alignbot-sandbox-x"))
    assert ("--dir", "/run") in mounts and ("--symlink", "/var/run") in mounts
    assert "--unshare-net" not in built.argv  # the network was allowed
    assert {"--unshare-user", "--disable-userns"} <= set(built.argv)  # not root: a user namespace
    assert not any(target.startswith(("/home", "/root", "/srv", "/opt", "/var/lib"))
                   for _, target in mounts)


def test_folders_on_the_way_to_a_mount_are_searchable(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "venv"
    deep.mkdir(parents=True)
    built = view.bwrap_argv("bwrap", root=True, network=False, expose=[str(deep)], hide=[],
                            workspace=str(tmp_path / "w"))
    argv = built.argv
    for parent in (tmp_path / "a", tmp_path / "a" / "b"):
        at = argv.index(str(parent))
        assert argv[at - 1] == "--dir" and argv[at - 3:at - 1] == ["--perms", "0755"]
    assert ("--dir", "/usr/lib") not in _mounts(argv)  # inside a bound tree: the host's own


def test_socket_files_and_fifos_in_allowed_trees_are_found_and_covered(tmp_path: Path) -> None:
    tree = tmp_path / "venv"
    (tree / "lib").mkdir(parents=True)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tree / "lib" / "agent.sock"))
    os.mkfifo(tree / "pipe")
    (tree / "plain").write_text("x")
    try:
        found = view.special_files([str(tree)], now=0.0)
        assert found == sorted([str(tree / "lib" / "agent.sock"), str(tree / "pipe")])
        built = view.bwrap_argv("bwrap", root=True, network=False, expose=[str(tree)],
                                hide=[str(tree / "lib")], workspace=str(tmp_path / "w"),
                                masks=found)
        mounts = _mounts(built.argv)
        assert ("--ro-bind", str(tree / "pipe")) in mounts
        # inside a hidden folder it is gone already: no mount point that would name it
        assert ("--ro-bind", str(tree / "lib" / "agent.sock")) not in mounts
        assert "masked-special-files:1" in built.layers
    finally:
        listener.close()


def test_a_stale_scan_is_used_while_the_tree_is_scanned_again(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    assert view.special_files([str(tree)], now=1000.0) == []
    os.mkfifo(tree / "late")
    assert view.special_files([str(tree)], now=1000.0 + view.SCAN_SECONDS / 2) == []  # fresh
    assert view.special_files([str(tree)], now=1000.0 + view.SCAN_SECONDS + 1) == []  # stale
    for _ in range(100):  # the rescan runs in a thread
        if view.special_files([str(tree)], now=1000.0 + view.SCAN_SECONDS + 2):
            break
        time.sleep(0.05)
    assert view.special_files([str(tree)], now=1000.0 + view.SCAN_SECONDS + 2) == [
        str(tree / "late")]
