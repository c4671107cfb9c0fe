"""Running a ``patio mount …`` process from Python: start it, wait until its mount point is
mounted, end it (``fusermount3 -u`` or a signal) and check that it ended cleanly, read its
statistics, and remove it whatever state it is in. The tests and the benchmarks
(``bench/``, ``patio bench reorg``) mount through it; it is patio-harness, the one harness
``patio bench cache`` mounts through too, reached through ``patio._native``.

The mount's stdout and stderr go to temporary files, not pipes: a mount that logs a lot
(``-v``) never blocks on a full pipe, and what it wrote so far can be read while it runs.
Every failure is a :class:`MountError` whose message ends with the mount's stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from patio import _native

#: How long a mount may take to appear, and to exit once asked to.
APPEAR_S = 15.0
EXIT_S = 60.0


class MountError(RuntimeError):
    """A mount that did not appear, died, or did not end cleanly."""


def fusermount() -> str:
    """The ``fusermount3`` (or ``fusermount``) command."""
    try:
        return str(_native.fusermount())
    except RuntimeError as e:
        raise MountError(str(e)) from None


def is_mounted(mnt: str | os.PathLike[str]) -> bool:
    """Whether something is mounted at ``mnt``, from ``/proc/self/mountinfo``: a FUSE mount
    whose process died (its accesses fail with ENOTCONN) counts, whatever a ``stat`` of
    its mount point answers."""
    return bool(_native.is_mounted(os.fspath(mnt)))


def unmount(mnt: str | os.PathLike[str], lazy: bool = False) -> subprocess.CompletedProcess[str]:
    """``fusermount3 -u [-z] MNT``; the caller decides what a failure means."""
    try:
        code, err = _native.unmount(os.fspath(mnt), lazy)
    except RuntimeError as e:
        raise MountError(str(e)) from None
    args = ["fusermount3", "-u", *(["-z"] if lazy else []), str(mnt)]
    return subprocess.CompletedProcess(args, code, "", err)


class _Process:
    """The mount process, as much of :class:`subprocess.Popen` as callers use."""

    def __init__(self, native: Any) -> None:
        self._native = native
        self.pid: int = native.pid

    @property
    def returncode(self) -> int | None:
        self._native.running()
        code: int | None = self._native.returncode
        return code

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._native.running():
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.01)
        code: int = self._native.returncode
        return code

    def send_signal(self, sig: int) -> None:
        self._native.send_signal(int(sig))

    def terminate(self) -> None:
        self.send_signal(15)

    def kill(self) -> None:
        self.send_signal(9)


class MountProcess:
    """One ``patio mount KIND …`` process serving ``self.mnt``.

    ``MountProcess(argv, mnt, stats_file=…)`` starts one; a subclass that builds its own
    command line sets ``mnt`` (and ``stats_file`` when it passes ``--stats-json``) and
    calls :meth:`start`. Used as a context manager it is removed on leaving.
    """

    mnt: Path
    stats_file: Path | None = None
    proc: _Process | None = None
    _native: Any = None

    def __init__(
        self,
        argv: Sequence[str | os.PathLike[str]],
        mnt: str | os.PathLike[str],
        stats_file: str | os.PathLike[str] | None = None,
        timeout: float = APPEAR_S,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.mnt = Path(mnt)
        self.stats_file = Path(stats_file) if stats_file is not None else None
        self.start(argv, timeout, env)

    # ---- starting ------------------------------------------------------------------
    def start(
        self,
        argv: Sequence[str | os.PathLike[str]],
        timeout: float = APPEAR_S,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Runs ``argv`` and waits (at most ``timeout`` s) until ``self.mnt`` is mounted."""
        self.argv = [str(a) for a in argv]
        stats = None if self.stats_file is None else str(self.stats_file)
        envs = None if env is None else list(dict(env).items())
        try:
            self._native = _native.MountHarness(self.argv, str(self.mnt), stats, timeout, envs)
        except RuntimeError as e:
            raise MountError(str(e)) from None
        self.proc = _Process(self._native)

    @property
    def name(self) -> str:
        """``patio mount KIND`` (what the messages call this mount)."""
        argv = getattr(self, "argv", [])
        kind = argv[argv.index("mount") + 1] if "mount" in argv[:-1] else "?"
        return f"patio mount {kind}"

    @property
    def stdout(self) -> str:
        return "" if self._native is None else str(self._native.stdout)

    @property
    def stderr(self) -> str:
        return "" if self._native is None else str(self._native.stderr)

    def running(self) -> bool:
        return self._native is not None and bool(self._native.running())

    def output(self) -> str:
        """What the mount wrote to stderr so far (its log lines, while it runs)."""
        return "" if self._native is None else str(self._native.output())

    # ---- ending ----------------------------------------------------------------------
    def end(self, how: str = "fusermount", timeout: float = EXIT_S) -> str:
        """Ends the mount — ``"fusermount"`` (``fusermount3 -u``) or a signal's name
        (``"SIGINT"``, ``"SIGTERM"``) — and checks that it ended cleanly: exit status 0,
        unmounted, no panic, and on stdout nothing but, with ``--json``, one JSON object
        (a mount's report goes to stderr). Returns its stderr."""
        assert self._native is not None, "the mount was never started"
        try:
            return str(self._native.end(how, timeout))
        except RuntimeError as e:
            raise MountError(str(e)) from None

    @property
    def json_output(self) -> bool:
        """Whether the mount prints its counters as JSON on stdout when it ends (``--json``)."""
        return "--json" in getattr(self, "argv", [])

    def stats(self) -> dict[str, Any]:
        """The counters the mount reported when it ended: its ``--stats-json`` file, or
        with ``--json`` alone what it printed on stdout."""
        assert self._native is not None, "the mount was never started"
        try:
            stats: dict[str, Any] = json.loads(self._native.stats_text())
        except RuntimeError as e:
            raise MountError(str(e)) from None
        return stats

    def live_stats(self) -> dict[str, Any]:
        """The running mount's counters, as ``patio mount stat MNT --json`` prints them."""
        done = subprocess.run([self.argv[0], "mount", "stat", str(self.mnt), "--json"],
                              capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise MountError(f"patio mount stat {self.mnt}: {done.stderr.strip()}")
        stats: dict[str, Any] = json.loads(done.stdout)
        return stats

    def kill(self) -> None:
        """SIGKILL, as a crash would end it, then detaches the dead mount (lazily)."""
        if self._native is not None:
            self._native.kill()

    def cleanup(self) -> None:
        """Removes the mount whatever state it is in, never raising: ``fusermount3 -u``;
        if that is refused (a file is open on it) or the mount does not exit, SIGTERM and,
        if it is still busy, SIGTERM again (patio then detaches it lazily); then SIGKILL;
        then a lazy unmount of what is left."""
        if self._native is not None:
            self._native.cleanup()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
