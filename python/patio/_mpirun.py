"""How patio starts MPI jobs on one machine (``patio bench reorg``, the MPI tests):
the ``mpirun`` command line and its environment, for OpenMPI with more ranks than
cores and no network."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def command(ranks: int) -> list[str] | None:
    """``mpirun -n RANKS --oversubscribe`` (and ``--allow-run-as-root`` as root), or
    ``None`` when there is no ``mpirun``."""
    exe = shutil.which("mpirun")
    if exe is None:
        return None
    cmd = [exe, "-n", str(ranks), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def environment() -> dict[str, str]:
    """The caller's environment for an MPI job: shared-memory transports only, ranks
    that yield the CPU while they wait (oversubscribed ranks would otherwise spin and
    take it from the others), and this package importable by every rank."""
    env = dict(os.environ)
    env.setdefault("OMPI_MCA_btl", "self,vader")
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    package_root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_root, env.get("PYTHONPATH", "")])
    return env
