"""pytest setup: make the repository's ``python/`` package importable without installing it.

If ``patio`` is already importable (installed, or ``PYTHONPATH=python``) that one is used;
otherwise the repository's ``python/`` directory is put first on ``sys.path``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1] / "python"

if importlib.util.find_spec("patio") is None:
    sys.path.insert(0, str(PYTHON_DIR))


@pytest.fixture
def layout_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A knowledge-base directory of the test's own (``PATIO_LAYOUT_DIR``), for the layout
    tests (``pytest.mark.usefixtures("layout_dir")``)."""
    d = tmp_path / "kb"
    monkeypatch.setenv("PATIO_LAYOUT_DIR", str(d))
    return d
