"""Running a ``patio mount …`` process from Python: start it, wait until its mount point is
mounted, end it (``fusermount3 -u`` or a signal) and check that it ended cleanly, read its
statistics, and remove it whatever state it is in. The one harness the tests and the
benchmarks (``bench/``, ``patio bench reorg``) mount through.

The mount's stdout and stderr go to temporary files, not pipes: a mount that logs a lot
(``-v``) never blocks on a full pipe, and what it wrote so far can be read while it runs.
Every failure is a :class:`MountError` whose message ends with the mount's stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Self

#: How long a mount may take to appear, and to exit once asked to.
APPEAR_S = 15.0
EXIT_S = 60.0


class MountError(RuntimeError):
    """A mount that did not appear, died, or did not end cleanly."""


def fusermount() -> str:
    """The ``fusermount3`` (or ``fusermount``) command."""
    for name in ("fusermount3", "fusermount"):
        found = shutil.which(name) or shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
        if found:
            return found
    raise MountError("fusermount3 is not installed (it comes with fuse3: run scripts/setup.sh)")


def _unescape(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are octal escapes there."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def is_mounted(mnt: str | os.PathLike[str]) -> bool:
    """Whether something is mounted at ``mnt``, from ``/proc/self/mountinfo``: a FUSE mount
    whose process died (its accesses fail with ENOTCONN) counts, whatever a ``stat`` of
    its mount point answers."""
    want = os.path.realpath(mnt)
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        return any(_unescape(line.split(" ")[4]) == want for line in f)


def unmount(mnt: str | os.PathLike[str], lazy: bool = False) -> subprocess.CompletedProcess[str]:
    """``fusermount3 -u [-z] MNT``; the caller decides what a failure means."""
    args = [fusermount(), "-u", *(["-z"] if lazy else []), str(mnt)]
    return subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)


class MountProcess:
    """One ``patio mount KIND …`` process serving ``self.mnt``.

    ``MountProcess(argv, mnt, stats_file=…)`` starts one; a subclass that builds its own
    command line sets ``mnt`` (and ``stats_file`` when it passes ``--stats-json``) and
    calls :meth:`start`. Used as a context manager it is removed on leaving.
    """

    mnt: Path
    stats_file: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    stdout: str = ""
    stderr: str = ""

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
        # Open for the mount's lifetime; closed by cleanup().
        self._out: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self._err: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.argv, stdout=self._out, stderr=self._err, env=None if env is None else dict(env)
        )
        deadline = time.monotonic() + timeout
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None:
                self._collect()
                raise MountError(f"{self.name} exited with status {self.proc.returncode} "
                                 f"before {self.mnt} was mounted: {self.stderr.strip()}")
            if time.monotonic() > deadline:
                self.cleanup()
                raise MountError(f"{self.name}: {self.mnt} was not mounted within {timeout:g} s: "
                                 f"{self.stderr.strip()}")
            time.sleep(0.02)

    @property
    def name(self) -> str:
        """``patio mount KIND`` (what the messages call this mount)."""
        argv = getattr(self, "argv", [])
        kind = argv[argv.index("mount") + 1] if "mount" in argv[:-1] else "?"
        return f"patio mount {kind}"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        """What the mount wrote to stderr so far (its log lines, while it runs)."""
        self._collect()
        return self.stderr

    def _collect(self) -> None:
        for attr, f in (("stdout", getattr(self, "_out", None)), ("stderr", getattr(self, "_err", None))):
            if f is not None and not f.closed:
                f.seek(0)
                setattr(self, attr, f.read().decode("utf-8", errors="replace"))

    # ---- ending ----------------------------------------------------------------------
    def end(self, how: str = "fusermount", timeout: float = EXIT_S) -> str:
        """Ends the mount — ``"fusermount"`` (``fusermount3 -u``) or a signal's name
        (``"SIGINT"``, ``"SIGTERM"``) — and checks that it ended cleanly: exit status 0,
        unmounted, no panic, and on stdout nothing but, with ``--json``, one JSON object
        (a mount's report goes to stderr). Returns its stderr."""
        assert self.proc is not None, "the mount was never started"
        if how == "fusermount":
            done = unmount(self.mnt)
            if done.returncode != 0:
                raise MountError(f"fusermount3 -u {self.mnt}: {done.stderr.strip()}")
        else:
            self.proc.send_signal(getattr(signal, how))
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._collect()
            raise MountError(f"{self.name} did not exit within {timeout:g} s of {how}: "
                             f"{self.stderr.strip()}") from None
        self._collect()
        problems = []
        if self.proc.returncode != 0:
            problems.append(f"exited with status {self.proc.returncode}")
        if is_mounted(self.mnt):
            problems.append(f"left {self.mnt} mounted")
        if "panicked" in self.stderr:
            problems.append("panicked")
        if self.json_output:
            try:
                printed = json.loads(self.stdout)
            except ValueError:
                printed = None
            if not isinstance(printed, dict):
                problems.append(f"printed no JSON object with --json ({self.stdout[:200]!r})")
        elif self.stdout:
            problems.append(f"wrote to stdout ({self.stdout[:200]!r})")
        if problems:
            raise MountError(f"{self.name} (ended by {how}) {', '.join(problems)}: "
                             f"{self.stderr.strip()}")
        return self.stderr

    @property
    def json_output(self) -> bool:
        """Whether the mount prints its counters as JSON on stdout when it ends (``--json``)."""
        return "--json" in getattr(self, "argv", [])

    def stats(self) -> dict[str, Any]:
        """The counters the mount reported when it ended: its ``--stats-json`` file, or
        with ``--json`` alone what it printed on stdout."""
        if self.stats_file is not None:
            where, read = str(self.stats_file), self.stats_file.read_text
        elif self.json_output:
            self._collect()
            where, read = "its stdout", lambda: self.stdout
        else:
            raise MountError(f"{self.name} was started without --stats-json or --json")
        try:
            stats: dict[str, Any] = json.loads(read())
        except (OSError, ValueError) as e:
            raise MountError(f"{self.name}: no statistics in {where}: {e}") from None
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
        if self.running():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(timeout=30)
        if is_mounted(self.mnt):
            unmount(self.mnt, lazy=True)
        self._collect()

    def cleanup(self) -> None:
        """Removes the mount whatever state it is in, never raising: ``fusermount3 -u``;
        if that is refused (a file is open on it) or the mount does not exit, SIGTERM and,
        if it is still busy, SIGTERM again (patio then detaches it lazily); then SIGKILL;
        then a lazy unmount of what is left."""
        if self.proc is None:
            return
        try:
            if self.running() and is_mounted(self.mnt) and unmount(self.mnt).returncode == 0:
                self._wait(10)
            for wait in (2, 5):
                if self.running():
                    self.proc.terminate()
                    self._wait(wait)
            if self.running():
                self.proc.kill()
                self._wait(30)
            if is_mounted(self.mnt):
                unmount(self.mnt, lazy=True)
        except (OSError, MountError, subprocess.SubprocessError):
            pass
        self._collect()
        for f in (getattr(self, "_out", None), getattr(self, "_err", None)):
            if f is not None:
                f.close()

    def _wait(self, seconds: float) -> None:
        assert self.proc is not None
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
