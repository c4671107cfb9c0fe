"""Diagnostics of patio's mounts: ``-v``/``-vv`` and ``PATIO_LOG`` choose the level,
``--log FILE`` sends the lines to FILE (appended, timestamped) instead of stderr.

Real mounts: a prefetch mount and a container mount are started with and without
``--log``, used, and ended; the tests read the log file and stderr.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from patio._binary import patio_binary
from patio._mount_harness import MountProcess
from test_mount_trace import scratch

STAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (ERROR|WARN |INFO |DEBUG|TRACE) \S+: ")


class LoggedMount(MountProcess):
    """``patio FIRST mount KIND base/src base/mnt OPTIONS``."""

    def __init__(self, base: Path, kind: str, *options: str, first: tuple[str, ...] = ()):
        self.src, self.mnt = base / "src", base / "mnt"
        for d in (self.src, self.mnt):
            d.mkdir(exist_ok=True)
        (self.src / "f.bin").write_bytes(os.urandom(1 << 16))
        extra = ["--policy", "readahead"] if kind == "prefetch" else []
        cmd = [patio_binary(), *first, "mount", kind, str(self.src), str(self.mnt), *extra]
        self.start([*cmd, *options])


@pytest.fixture
def base(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv("PATIO_LOG", raising=False)
    with scratch("patio-log-") as path:
        yield path


def run_mount(base: Path, kind: str, *options: str, first: tuple[str, ...] = ()) -> str:
    """Mounts, reads (or writes) a file through the mount, unmounts; patio's stderr."""
    m = LoggedMount(base, kind, *options, first=first)
    try:
        if kind == "container":
            (m.mnt / "new.bin").write_bytes(b"y" * 8192)
        else:
            assert (m.mnt / "f.bin").read_bytes() == (m.src / "f.bin").read_bytes()
        return m.end("SIGINT")
    finally:
        m.cleanup()


@pytest.mark.parametrize("kind", ["prefetch", "container"])
def test_log_file_with_v_gets_timestamped_lines_and_stderr_none(base: Path, kind: str) -> None:
    log = base / "mount.log"
    log.write_text("earlier line\n")
    # -v is global: before the subcommand or after it.
    if kind == "prefetch":
        stderr = run_mount(base, kind, "--log", str(log), first=("-v",))
    else:
        stderr = run_mount(base, kind, "--log", str(log), "-v")
    lines = log.read_text().splitlines()
    assert lines[0] == "earlier line", "the log is appended to"
    assert len(lines) >= 4, lines
    for line in lines[1:]:
        assert STAMPED.match(line), line
    text = "\n".join(lines)
    assert f"mounted patio{'-container' if kind == 'container' else ''} on {base / 'mnt'}" in text
    assert "ended: Signal(2)" in text
    assert "patio_fs::session" not in stderr and "INFO" not in stderr, stderr


def test_levels_from_patio_log_and_the_default(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = base / "a.log"
    monkeypatch.setenv("PATIO_LOG", "info")
    run_mount(base, "prefetch", "--log", str(log))
    assert "mounted patio on" in log.read_text()
    monkeypatch.delenv("PATIO_LOG")
    quiet = base / "b.log"
    stderr = run_mount(base, "prefetch", "--log", str(quiet))
    assert quiet.read_text() == "", "warn by default: nothing to log on a clean run"
    assert "mounted patio on" not in stderr


def test_v_without_log_writes_to_stderr(base: Path) -> None:
    stderr = run_mount(base, "prefetch", "-vv")
    assert f"patio: mounted patio on {base / 'mnt'}" in stderr, stderr
    assert "patio: debug: live statistics in" in stderr, stderr
    assert f"patio: debug: {base / 'src' / 'f.bin'}: backend reads" in stderr, stderr


def test_bad_log_settings_are_one_line_errors(base: Path) -> None:
    (base / "src").mkdir()
    (base / "mnt").mkdir()
    cmd = [patio_binary(), "mount", "prefetch", str(base / "src"), str(base / "mnt")]
    cmd += ["--policy", "none"]
    done = subprocess.run([*cmd, "--log", str(base / "no" / "dir" / "x.log")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("patio: error: cannot write log"), done.stderr
    done = subprocess.run([*cmd, "--log", str(base / "mnt" / "x.log")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "inside the mount point" in lines[0], done.stderr
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PATIO_LOG": "loud"})
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "PATIO_LOG=\"loud\" is not a level" in lines[0], done.stderr
    assert not os.path.ismount(base / "mnt")
