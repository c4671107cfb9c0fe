"""``python -m patio ARGS…``: the ``patio`` command of this installation, for environments
whose ``bin/`` is not on ``PATH`` (the wheel installs the binary there as a script)."""

from __future__ import annotations

import os
import sys

from patio._binary import patio_binary


def main() -> None:
    binary = patio_binary(prog="python -m patio")
    os.execv(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
