"""Progress on stderr: ``patio convert``, ``patio analyze``, ``patio container
compact|flatten``, ``patio reorg apply``, ``patio layout build`` and ``patio amr reorder``
show what they are doing (a bar where the total is known — bytes of a CSV trace, requests
analyzed, bytes written, boxes reordered — else a spinner naming the stage) when stderr is
a terminal, and nothing when it is not or with ``--json``; the results are the same.

Each command runs on a pseudo-terminal (``pty``) and with stderr on a pipe.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import random
import re
import select
import struct
import subprocess
import termios
from pathlib import Path

import patio
import pytest
from patio._binary import patio_binary
from patio.amr.chombo import read_hierarchy
from test_amr import assert_same_boxes, synthetic
from test_layout_cli import make_file, record_reads
from test_reorg import ior_like


def on_terminal(*args: str) -> tuple[int, bytes, bytes]:
    """Runs patio with stderr on a pseudo-terminal of 40 rows and 120 columns (a fresh
    pty has no size, as no terminal a person uses): exit status, stdout, terminal bytes."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [patio_binary(), *args], stdout=subprocess.PIPE, stderr=follower,
        env={**os.environ, "TERM": "xterm"},
    )
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(leader)
    stdout = proc.stdout.read() if proc.stdout else b""
    return proc.wait(timeout=60), stdout, seen


def on_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([patio_binary(), *args], capture_output=True, text=True,
                          timeout=120, check=False)


def csv_trace(path: Path, n: int) -> Path:
    rows = ["module,file,rank,op,offset,length,start,end"]
    rows += [f"POSIX,/d,0,read,{i * 4096},4096,{i * 1e-6},{i * 1e-6 + 1e-7}" for i in range(n)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_convert_and_analyze_show_their_stages_only_on_a_terminal(tmp_path: Path) -> None:
    trace = csv_trace(tmp_path / "t.csv", 50_000)
    code, _, seen = on_terminal("convert", str(trace), "-o", str(tmp_path / "a.ptrace"))
    assert code == 0
    assert f"reading {trace}".encode() in seen, seen[:400]
    assert b"/50000 requests, writing " + str(tmp_path / "a.ptrace").encode() in seen, seen[:400]
    code, out, seen = on_terminal("convert", str(trace), "-o", str(tmp_path / "b.ptrace"),
                                  "--json")
    assert code == 0 and seen == b"", seen
    assert json.loads(out)["requests"] == 50_000
    assert (tmp_path / "a.ptrace").read_bytes() == (tmp_path / "b.ptrace").read_bytes()
    done = on_pipe("convert", str(trace), "-o", str(tmp_path / "c.ptrace"))
    assert done.returncode == 0 and "reading" not in done.stderr, done.stderr

    code, _, seen = on_terminal("analyze", str(tmp_path / "a.ptrace"))
    assert code == 0 and b"reading " in seen, seen[:400]
    code, out, seen = on_terminal("analyze", str(tmp_path / "a.ptrace"), "--json")
    assert code == 0 and seen == b"", seen
    json.loads(out)


def test_convert_writes_under_a_bar_of_the_requests(tmp_path: Path) -> None:
    """Writing is a bar too: the requests coded into a .ptrace (block by block: random
    offsets make many blocks) or written to a .csv, never past the total, never back."""
    rng = random.Random(5)
    rows = ["module,file,rank,op,offset,length,start,end"]
    rows += [f"POSIX,/d,{i % 2},read,{rng.randrange(1 << 40)},4096,{i * 1e-6},{i * 1e-6 + 1e-7}"
             for i in range(150_000)]
    trace = tmp_path / "r.csv"
    trace.write_text("\n".join(rows) + "\n")
    for src, out in ((trace, tmp_path / "r.ptrace"), (tmp_path / "r.ptrace", tmp_path / "r2.csv")):
        code, _, seen = on_terminal("convert", str(src), "-o", str(out))
        assert code == 0, seen[-400:]
        shown = re.findall(rb"(\d+)/(\d+) requests, writing " + re.escape(str(out).encode()), seen)
        assert shown, seen[-400:]
        assert {int(total) for _, total in shown} == {150_000}, shown
        done = [int(d) for d, _ in shown]
        assert done == sorted(done) and done[-1] <= 150_000, done
        piped = on_pipe("convert", str(src), "-o", str(tmp_path / ("p" + out.suffix)))
        assert piped.returncode == 0 and piped.stderr == "", piped.stderr
        assert (tmp_path / ("p" + out.suffix)).read_bytes() == out.read_bytes()
    assert len((tmp_path / "r2.csv").read_text().splitlines()) == len(rows)


def test_container_compact_shows_its_stages_only_on_a_terminal(tmp_path: Path) -> None:
    def make(path: Path) -> None:
        for w in range(3):
            with patio.Container(path, "a") as c:
                assert c.write_at(w * 4096, bytes([w + 1]) * 4096) == 4096

    make(tmp_path / "c1")
    code, out, seen = on_terminal("container", "compact", str(tmp_path / "c1"))
    assert code == 0, seen
    assert b"compacting " in seen and b"writing the compacted log set" in seen, seen[:600]
    assert b"3 log set(s) rewritten" in out, out
    make(tmp_path / "c2")
    code, out, seen = on_terminal("container", "compact", str(tmp_path / "c2"), "--json")
    assert code == 0 and seen == b"", seen
    assert json.loads(out)["sources"] == 3
    make(tmp_path / "c3")
    done = on_pipe("container", "compact", str(tmp_path / "c3"))
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_container_compact_copies_under_a_bar_of_the_live_bytes(tmp_path: Path) -> None:
    """Three writers of 3 MiB, the second overwriting half of the first: 7.5 MiB live,
    copied under a bar of bytes that ends at that total (and nothing on a pipe); the
    three compacted files read the same."""
    def make(path: Path) -> None:
        for w, at in enumerate((0, 3 << 19, 6 << 20)):
            with patio.Container(path, "a") as c:
                assert c.write_at(at, bytes([w + 1]) * (3 << 20)) == 3 << 20

    live = (9 << 19) + (3 << 20)  # [0, 4.5 MiB) and [6 MiB, 9 MiB)
    make(tmp_path / "c1")
    code, out, seen = on_terminal("container", "compact", str(tmp_path / "c1"), "--json")
    assert code == 0 and seen == b"", seen
    assert json.loads(out)["live_bytes"] == live
    make(tmp_path / "c2")
    code, out, seen = on_terminal("container", "compact", str(tmp_path / "c2"))
    assert code == 0, seen
    total = human_bytes(live).encode()
    shown = re.findall(rb"([\d.]+ [KMG]?i?B)/" + re.escape(total), seen)
    assert shown, seen[-600:]
    assert shown[-1] == total, shown
    make(tmp_path / "c3")
    done = on_pipe("container", "compact", str(tmp_path / "c3"))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    flat = [on_pipe("container", "flatten", str(tmp_path / c), str(tmp_path / f"{c}.bin"))
            for c in ("c1", "c2", "c3")]
    assert all(f.returncode == 0 for f in flat), flat
    assert len({(tmp_path / f"{c}.bin").read_bytes() for c in ("c1", "c2", "c3")}) == 1


def human_bytes(n: int) -> str:
    """A byte count as the binary's bars print it (indicatif's binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")


def test_a_large_csv_trace_is_read_and_analyzed_under_bars_with_their_totals(
    tmp_path: Path,
) -> None:
    # Above analyze's threshold for a bar of requests (200,000).
    trace = csv_trace(tmp_path / "big.csv", 210_000)
    total = human_bytes(trace.stat().st_size).encode()
    code, _, seen = on_terminal("convert", str(trace), "-o", str(tmp_path / "a.ptrace"))
    assert code == 0
    # A bar of the CSV's bytes while it is parsed: "N MiB/TOTAL".
    assert re.search(rb"[\d.]+ [KMG]?i?B/" + re.escape(total), seen), seen[-400:]
    done = on_pipe("convert", str(trace), "-o", str(tmp_path / "b.ptrace"))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (tmp_path / "a.ptrace").read_bytes() == (tmp_path / "b.ptrace").read_bytes()

    # One run only: the generic coders' baselines take half a minute on this trace.
    code, out, seen = on_terminal("analyze", str(tmp_path / "a.ptrace"))
    assert code == 0
    assert b"/210000 requests analyzed" in seen, seen[-400:]
    assert re.search(r"\b210,?000\b", out.decode()), out[:400]


def test_reorg_apply_and_container_flatten_show_bars_of_their_bytes(tmp_path: Path) -> None:
    src, trace, data = ior_like(tmp_path)
    apply = ["reorg", "apply", str(trace), "--file", str(src), "--no-register"]
    code, out, seen = on_terminal(*apply, "-o", str(tmp_path / "t.pc"))
    assert code == 0, seen
    assert f"/{len(data)}".encode() in seen, seen[-400:]
    piped = on_pipe(*apply, "-o", str(tmp_path / "p.pc"))
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    code, _, seen = on_terminal(*apply, "-o", str(tmp_path / "j.pc"), "--json")
    assert code == 0 and seen == b"", seen

    def report(text: str, out: str) -> list[str]:
        """The text report without the output's name and the time taken."""
        return [re.sub(r", [\d.]+ s$", "", line.replace(out, "OUT"))
                for line in text.splitlines()]

    assert report(out.decode(), str(tmp_path / "t.pc")) == report(piped.stdout,
                                                                  str(tmp_path / "p.pc"))
    code, _, seen = on_terminal("container", "flatten", str(tmp_path / "t.pc"),
                                str(tmp_path / "t.bin"))
    assert code == 0 and f"/{len(data)}".encode() in seen, seen[-400:]
    piped = on_pipe("container", "flatten", str(tmp_path / "p.pc"), str(tmp_path / "p.bin"))
    assert piped.returncode == 0, piped.stderr
    # Its one line of report, and no bar.
    assert piped.stderr.splitlines() == [
        f"patio: wrote {tmp_path / 'p.bin'} ({len(data)} bytes, {len(data)} of data)"]
    assert (tmp_path / "t.bin").read_bytes() == (tmp_path / "p.bin").read_bytes() == data


@pytest.mark.usefixtures("layout_dir")
def test_layout_build_shows_a_bar_of_the_replicas_bytes(tmp_path: Path) -> None:
    files = {how: tmp_path / f"{how}.h5" for how in ("terminal", "pipe", "json")}
    for path in files.values():
        make_file(path)
        record_reads(path)
    build = ("layout", "build", "--budget", "200%")
    code, out, seen = on_terminal(*build[:2], str(files["terminal"]), *build[2:])
    assert code == 0, seen
    assert b"[1/" in seen and b"B/" in seen, seen[-400:]
    piped = on_pipe(*build[:2], str(files["pipe"]), *build[2:])
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    code, jout, seen = on_terminal(*build[:2], str(files["json"]), *build[2:], "--json")
    assert code == 0 and seen == b"", seen
    text = out.decode()

    def decided(report: str, path: Path) -> list[str]:
        """What was built, without the modelled times (they use a measured overhead)."""
        return [re.sub(r", modelled .*", "", line) for line in
                report.replace(str(path), "F").splitlines()]

    assert decided(text, files["terminal"]) == decided(piped.stdout, files["pipe"])
    built = json.loads(jout)["built"]
    assert built, jout
    for b in built:
        assert f"built {b['dataset']} {b['layout']} ({b['bytes']:,} B" in text, text


def test_amr_reorder_shows_a_bar_of_the_boxes(tmp_path: Path) -> None:
    src = tmp_path / "in.hdf5"
    synthetic(src, seed=3, dim=3, nlevels=3)
    reorder = ("amr", "reorder", str(src), "--layout", "hilbert", "-o")
    code, out, seen = on_terminal(*reorder, str(tmp_path / "t.hdf5"))
    assert code == 0, seen
    assert b"reordering" in seen and b"box" in seen, seen[-400:]
    piped = on_pipe(*reorder, str(tmp_path / "p.hdf5"))
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    code, jout, seen = on_terminal(*reorder, str(tmp_path / "j.hdf5"), "--json")
    assert code == 0 and seen == b"", seen
    assert out.decode().replace("t.hdf5", "X") == piped.stdout.replace("p.hdf5", "X")
    res = json.loads(jout)
    assert res["layout"] == "hilbert"
    assert [lv["boxes"] for lv in res["levels"]] == [lev.n for lev in read_hierarchy(src).levels]
    for name in ("t.hdf5", "j.hdf5"):
        assert_same_boxes(tmp_path / "p.hdf5", tmp_path / name)
