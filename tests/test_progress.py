"""Progress on stderr: ``patio convert``, ``patio analyze`` and ``patio container
compact`` show what they are doing (a spinner naming the stage) when stderr is a
terminal, and nothing when it is not or with ``--json``; the results are the same.

Each command runs on a pseudo-terminal (``pty``) and with stderr on a pipe.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
from pathlib import Path

import patio
from patio._binary import patio_binary


def on_terminal(*args: str) -> tuple[int, bytes, bytes]:
    """Runs patio with stderr on a pseudo-terminal: exit status, stdout, terminal bytes."""
    leader, follower = pty.openpty()
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
    assert b"writing " in seen and b"50,000 requests in 1 streams" in seen, seen[:400]
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
