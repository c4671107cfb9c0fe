"""pytest setup: make the repository's ``python/`` package importable without installing it.

If ``patio`` is already importable (installed, or ``PYTHONPATH=python``) that one is used;
otherwise the repository's ``python/`` directory is put first on ``sys.path``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1] / "python"

if importlib.util.find_spec("patio") is None:
    sys.path.insert(0, str(PYTHON_DIR))
