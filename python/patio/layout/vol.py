"""``patio layout vol-env``: the environment that loads patio's HDF5 VOL connector
(``vol/libpatio_vol.so``) into unmodified HDF5 programs, so their ``H5Dread`` calls are
recorded in the layout knowledge base like ``patio.h5``'s reads.

The setup installs the connector alone in ``PREFIX/lib/patio/vol/`` (HDF5 loads every
library of a plugin directory), the layout core it loads beside it in
``PREFIX/lib/patio/``, and the HDF5 it is built for (scripts/hdf5.sh) in
``PREFIX/lib/patio/hdf5-<version>/``: programs are built and run against that HDF5.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

#: The connector's name and its info: pass everything to the native connector (0)
#: (``patio run --hdf5`` sets the same string: ``run_cmd::VOL_CONNECTOR``).
CONNECTOR = "patio under_vol=0;under_info={}"
LIBRARY = "libpatio_vol.so"
#: The VOL connector class version the connector is built for (HDF5's H5VL_VERSION).
CLASS_VERSION = 3


class VolError(Exception):
    """The connector or its HDF5 is not installed."""


def lib_dir(prefix: str | None = None) -> Path:
    return Path(prefix or sys.prefix) / "lib" / "patio"


def hdf5_prefix(prefix: str | None = None) -> tuple[Path, str]:
    """The HDF5 the connector is built for, and its version (from the build's marker)."""
    found = []
    for marker in sorted(lib_dir(prefix).glob("hdf5-*/.complete")):
        version = marker.read_text().split()[0] if marker.read_text().split() else ""
        if version:
            found.append((marker.parent, version))
    if not found:
        raise VolError(f"no HDF5 with VOL support in {lib_dir(prefix)} (run scripts/setup.sh)")
    return found[-1]


def cc_command(source: Path, exe: Path, prefix: str | None = None) -> list[str]:
    """The command that builds the C program ``source`` into ``exe`` against the HDF5 the
    connector is built for (-O2 -Wall -Wextra -Werror; run-path to that HDF5)."""
    hdf5, _ = hdf5_prefix(prefix)
    return ["cc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{hdf5 / 'include'}",
            str(source), f"-L{hdf5 / 'lib'}", "-lhdf5", f"-Wl,-rpath,{hdf5 / 'lib'}", "-o",
            str(exe)]  # fmt: skip


def vol_env(prefix: str | None = None) -> dict[str, str]:
    """``{"HDF5_PLUGIN_PATH", "HDF5_VOL_CONNECTOR", "hdf5_version"}``."""
    plugin_dir = lib_dir(prefix) / "vol"
    if not (plugin_dir / LIBRARY).is_file():
        raise VolError(f"the VOL connector is not built ({plugin_dir / LIBRARY} missing; "
                       "run scripts/setup.sh)")
    _, version = hdf5_prefix(prefix)
    return {"HDF5_PLUGIN_PATH": str(plugin_dir), "HDF5_VOL_CONNECTOR": CONNECTOR,
            "hdf5_version": version}


def cmd_vol_env(a: argparse.Namespace) -> int:
    from .cli import CliError

    try:
        env = vol_env()
        hdf5, _ = hdf5_prefix()
    except VolError as e:
        raise CliError(str(e)) from None
    if a.json:
        print(json.dumps(env, indent=2))
        return 0
    lines: list[Any] = [f"export {k}={shlex.quote(env[k])}"
                        for k in ("HDF5_PLUGIN_PATH", "HDF5_VOL_CONNECTOR")]
    lines.append(f"# HDF5 {env['hdf5_version']} (VOL class version {CLASS_VERSION}): build and "
                 f"run programs against {hdf5} (include/, lib/)")
    print("\n".join(lines))
    return 0
