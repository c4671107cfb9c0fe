"""``patio._binary``: the one rule that finds the ``patio`` command for the package,
``bench/`` and ``tests/`` (explicit path, ``$PATIO_BIN``, beside the interpreter, the
scripts directories of this Python installation, the checkout's release build,
``PATH``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from patio import _binary


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv = executable(tmp_path / "venv" / "bin" / "patio")
    build = executable(tmp_path / "repo" / "target" / "release" / "patio")
    on_path = executable(tmp_path / "path" / "patio")
    scripts = executable(tmp_path / "user" / "bin" / "patio")
    monkeypatch.setattr(sys, "executable", str(venv.with_name("python")))
    monkeypatch.setattr(_binary, "_scripts_dirs", lambda: [scripts.parent])
    monkeypatch.setattr(_binary, "_REPO", tmp_path / "repo")
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.setenv("PATIO_BIN", str(tmp_path / "env-patio"))
    assert _binary.patio_binary(tmp_path / "x" / ".." / "given") == str(tmp_path / "given")
    assert _binary.patio_binary() == str(tmp_path / "env-patio")
    monkeypatch.delenv("PATIO_BIN")
    assert _binary.patio_binary() == str(venv)
    venv.unlink()
    assert _binary.patio_binary() == str(scripts)
    scripts.unlink()
    assert _binary.patio_binary() == str(build)
    build.chmod(0o644)  # not executable: skipped
    assert _binary.patio_binary() == str(on_path)
    on_path.unlink()
    assert _binary.find_patio() is None
    with pytest.raises(FileNotFoundError, match="not built"):
        _binary.patio_binary()
    with pytest.raises(SystemExit, match="^bench_x: the patio binary is not built"):
        _binary.patio_binary(prog="bench_x")
