"""Entry point the ``patio`` command uses to run its Python helpers.

``python -m patio._run dxt LOG.darshan -o OUT.csv`` and ``python -m patio._run plot
analyze IN.json OUT.png`` import the helper only after this stdlib-only module is
running, so an interpreter that lacks numpy, PyDarshan or matplotlib gets a one-line
message saying what to do instead of a traceback.
"""

from __future__ import annotations

import importlib
import sys

HELPERS = {
    "dxt": "patio.dxt",
    "plot": "patio.plot",
    "layout": "patio.layout.cli",
    "bench-layout": "patio.layout.bench",
    "amr": "patio.amr.cli",
    "bench-amr": "patio.amr.bench",
    "bench-reorg": "patio.reorg.bench",
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in HELPERS:
        print(f"patio: error: unknown helper; expected one of {sorted(HELPERS)}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(HELPERS[argv[0]])
    except ModuleNotFoundError as e:
        print(
            f"patio: error: {sys.executable} lacks the Python package '{e.name}' that patio "
            "needs: run scripts/setup.sh, or set PATIO_PYTHON to the project's .venv/bin/python",
            file=sys.stderr,
        )
        return 2
    result: int = module.main(argv[1:])
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
