"""Where the ``patio`` command is: one rule for the package, ``bench/`` and ``tests/``.

Search order: an explicit path (a script's ``--patio``), then ``$PATIO_BIN``, then the
``patio`` beside this interpreter (the virtual environment's: installed there by the wheel,
or linked to the release build by ``scripts/setup.sh``), then the scripts directories of
this Python installation (where ``pip install [--user]`` put the wheel's binary), then the
release build of the checkout this package runs from (``target/release/patio``), then
``PATH``.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

#: The checkout this package runs from (when it runs from one).
_REPO = Path(__file__).resolve().parents[2]

NOT_BUILT = "the patio binary is not built: run scripts/setup.sh"


def _scripts_dirs() -> list[Path]:
    """Where ``pip install`` and ``pip install --user`` put a wheel's scripts for this
    Python installation."""
    found = {sysconfig.get_path("scripts"), sysconfig.get_path("scripts", f"{os.name}_user")}
    return [Path(d) for d in sorted(d for d in found if d)]


def find_patio(explicit: str | os.PathLike[str] | None = None) -> str | None:
    """The ``patio`` command to run, or ``None`` when there is none."""
    if explicit is not None:
        return str(Path(explicit).resolve())
    env = os.environ.get("PATIO_BIN")
    if env:
        return env
    for candidate in (
        Path(sys.executable).with_name("patio"),
        *(d / "patio" for d in _scripts_dirs()),
        _REPO / "target" / "release" / "patio",
    ):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("patio")


def patio_binary(explicit: str | os.PathLike[str] | None = None, prog: str | None = None) -> str:
    """The ``patio`` command to run. When there is none: exit with ``prog: NOT_BUILT``
    (scripts) or, without ``prog``, raise :class:`FileNotFoundError` (tests, library)."""
    found = find_patio(explicit)
    if found is not None:
        return found
    if prog is not None:
        sys.exit(f"{prog}: {NOT_BUILT}")
    raise FileNotFoundError(NOT_BUILT)
