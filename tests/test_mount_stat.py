"""``patio mount stat``: the counters of a running mount, read without unmounting.

Each test mounts for real (trace, prefetch, cache and container mounts), makes I/O
through the mount and reads the live counters: they move while the mount runs, say
``"ended": "running"``, and have exactly the keys of the ``--stats-json`` file the mount
writes when it ends. After the mount ends, its stats file is gone and ``mount stat``
says, in one line with exit status 1, that the path is not a running mount — as it
does for any other path. ``XDG_RUNTIME_DIR`` points at a scratch directory so the
tests never see the user's own mounts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from patio._binary import patio_binary
from patio._mount_harness import MountProcess
from test_mount_trace import patio, scratch, started

SIZE = 1 << 20


class AnyMount(MountProcess):
    """``patio mount KIND`` of ``base/src`` (or a backend) at ``base/mnt``, with
    ``--stats-json base/stats.json``."""

    def __init__(self, base: Path, kind: str, *options: str):
        self.kind = kind
        self.src, self.mnt, self.stats_file = base / "src", base / "mnt", base / "stats.json"
        for d in (self.src, self.mnt):
            d.mkdir(exist_ok=True)
        if kind != "container":
            (self.src / "data.bin").write_bytes(os.urandom(SIZE))
        args = [patio_binary(), "mount", kind, str(self.src), str(self.mnt)]
        args += {
            "trace": ["--output", str(base / "run.ptrace")],
            "prefetch": ["--policy", "readahead", "--direct-io"],
            "cache": ["--policy", "lru", "--cache-dir", str(base / "cache")],
            "container": [],
        }[kind]
        self.start([*args, "--stats-json", str(self.stats_file), *options])

    def work(self) -> None:
        """Some I/O through the mount: a whole read, or (container) a written file."""
        if self.kind == "container":
            with open(self.mnt / "out.bin", "ab") as f:
                f.writelines(b"x" * 4096 for _ in range(16))
        else:
            with open(self.mnt / "data.bin", "rb", buffering=0) as f:
                while f.read(65536):
                    pass

    def stop(self) -> dict[str, Any]:
        self.end("SIGINT")
        return self.stats()


#: The counter that I/O through each kind of mount moves.
MOVES = {"trace": "requests", "prefetch": "mount_reads", "cache": "reads", "container": "writes"}


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with scratch("patio-runtime-") as path:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
        yield path / "patio"


@pytest.fixture
def mount(runtime: Path) -> Iterator[Callable[..., AnyMount]]:
    with scratch("patio-stat-") as base, started(lambda *a: AnyMount(base, *a)) as start:
        yield start


def live(mnt: Path) -> dict[str, Any]:
    stats: dict[str, Any] = json.loads(patio("mount", "stat", str(mnt), "--json").stdout)
    return stats


def until(mnt: Path, key: str, above: int) -> dict[str, Any]:
    """The live counters once ``key`` exceeds ``above`` (the file is rewritten each
    second; waits at most 5 s)."""
    deadline = time.monotonic() + 5
    while True:
        stats = live(mnt)
        if stats[key] > above or time.monotonic() > deadline:
            return stats
        time.sleep(0.2)


def not_a_mount(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("patio: "), done.stderr
    assert "not a running patio mount" in lines[0], lines[0]
    for w in words:
        assert w in lines[0], lines[0]
    assert done.stdout == ""


@pytest.mark.parametrize("kind", ["trace", "prefetch", "cache", "container"])
def test_counters_move_while_the_mount_runs(
    mount: Callable[..., AnyMount], runtime: Path, kind: str
) -> None:
    m = mount(kind)
    key = MOVES[kind]
    first = live(m.mnt)
    assert first["ended"] == "running"
    before = first[key]
    m.work()
    second = until(m.mnt, key, before)
    assert second[key] > before, (key, first, second)
    m.work()
    third = until(m.mnt, key, second[key])
    assert third[key] > second[key], (key, second, third)

    text = patio("mount", "stat", str(m.mnt)).stdout
    assert f"patio mount {kind} of {m.src}" in text, text
    assert "running" in text, text
    assert len(list(runtime.iterdir())) == 1

    final = m.stop()
    assert final["ended"] == "unmounted"
    assert sorted(final) == sorted(third), "live and at-unmount counters have one set of keys"
    assert final[key] >= third[key]
    assert list(runtime.iterdir()) == [], "the stats file is removed when the mount ends"
    not_a_mount(patio("mount", "stat", str(m.mnt), check=False), str(m.mnt))


@pytest.mark.parametrize("kind", ["trace", "prefetch", "cache", "container"])
def test_json_prints_at_the_end_what_stats_json_writes(
    mount: Callable[..., AnyMount], kind: str
) -> None:
    m = mount(kind, "--json")
    m.work()
    stderr = m.end("SIGINT")
    printed = json.loads(m.stdout)
    assert printed == json.loads(m.stats_file.read_text())
    assert printed["ended"] == "unmounted" and printed[MOVES[kind]] > 0, printed
    # The counters instead of the text report, which would start "patio: MNT unmounted".
    assert f"patio: {m.mnt} unmounted" not in stderr, stderr
    assert not [line for line in stderr.splitlines() if line.startswith("  ")], stderr


def test_a_path_that_is_not_a_patio_mount_is_one_line(runtime: Path) -> None:
    not_a_mount(patio("mount", "stat", "/", check=False))
    not_a_mount(patio("mount", "stat", "/proc", "--json", check=False))
    done = patio("mount", "stat", "/no/such/dir", check=False)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def test_a_stats_file_left_by_a_killed_mount_is_not_a_running_mount(runtime: Path) -> None:
    with scratch("patio-stale-") as d:
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
        pid = int(gone.stdout)
        runtime.mkdir(mode=0o700, exist_ok=True)
        canonical = os.path.realpath(d)
        stale = {"mount": {"kind": "prefetch", "pid": pid, "source": "/x",
                           "mountpoint": canonical, "updated_unix_ms": 0},
                 "stats": {"ended": "running"}, "text": ""}
        path = runtime / f"mount-{fnv1a64(canonical.encode()):016x}.json"
        path.write_text(json.dumps(stale))
        not_a_mount(patio("mount", "stat", str(d), check=False), f"process {pid} has ended")
        # A live process but another mount point's file (a hash collision): refused too.
        stale["mount"].update(pid=os.getpid(), mountpoint="/elsewhere")
        path.write_text(json.dumps(stale))
        not_a_mount(patio("mount", "stat", str(d), check=False), "/elsewhere")
        # A live process (a reused pid, say) but nothing mounted there: refused too.
        stale["mount"]["mountpoint"] = canonical
        path.write_text(json.dumps(stale))
        not_a_mount(patio("mount", "stat", str(d), check=False), "nothing is mounted there")


def test_found_whether_or_not_xdg_runtime_dir_is_set(
    mount: Callable[..., AnyMount], runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mount started without ``XDG_RUNTIME_DIR`` (a batch job) writes under
    ``$TMPDIR/patio-UID``; ``mount stat`` from a shell that has it set still finds it."""
    with scratch("patio-tmpdir-") as tmp:
        monkeypatch.delenv("XDG_RUNTIME_DIR")
        monkeypatch.setenv("TMPDIR", str(tmp))
        m = mount("prefetch")
        assert list((tmp / f"patio-{os.getuid()}").iterdir()), "written under TMPDIR"
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime.parent))
        assert live(m.mnt)["ended"] == "running"
        m.stop()
        not_a_mount(patio("mount", "stat", str(m.mnt), check=False))


def test_without_a_mount_point_the_running_mounts_are_listed(
    mount: Callable[..., AnyMount], runtime: Path
) -> None:
    """Other mounts of this user (in the fallback directory) may be listed too: only
    this test's mount and a stale file are looked at."""
    m = mount("cache")
    ours = os.path.realpath(m.mnt)
    # A file left by a killed mount is not listed.
    (runtime / "mount-0000000000000000.json").write_text(json.dumps(
        {"mount": {"kind": "trace", "pid": 0, "source": "/x", "mountpoint": "/gone",
                   "updated_unix_ms": 0}, "stats": {}, "text": ""}))
    rows = [ln.split()[:2] for ln in patio("mount", "stat").stdout.splitlines()]
    assert rows.count(["cache", ours]) == 1, rows
    assert not [r for r in rows if r[1] == "/gone"], rows
    listed = json.loads(patio("mount", "stat", "--json").stdout)
    mine = [e for e in listed if e["mount"]["mountpoint"] == ours]
    assert len(mine) == 1 and mine[0]["mount"]["kind"] == "cache"
    assert mine[0]["stats"]["ended"] == "running" and "hit_rate" in mine[0]["stats"]
    assert "/gone" not in [e["mount"]["mountpoint"] for e in listed]
    m.stop()
    listed = json.loads(patio("mount", "stat", "--json").stdout)
    assert ours not in [e["mount"]["mountpoint"] for e in listed]
    assert ours not in patio("mount", "stat").stdout
