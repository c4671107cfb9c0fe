"""Tests for patio.plot: the access-pattern figure of ``patio analyze --plot``.

Draws small synthetic analyses through the command line and checks the PNG; malformed
input must exit with status 2 and a one-line ``patio: error:`` message, no traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import patio
import pytest
from patio.plot import KINDS, PlotError, format_bytes, load_analysis, plot_analysis

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _cli_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(patio.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "TkAgg"  # the command must force Agg itself
    env.pop("DISPLAY", None)
    return env


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patio.plot", *args],
        check=False,
        capture_output=True,
        text=True,
        env=_cli_env(),
        timeout=300,
    )


def _synthetic(n_streams: int = 3) -> dict[str, Any]:
    streams = []
    for k in range(n_streams):
        contiguous = [i * 4096 for i in range(20)]
        strided = [2**20 + i * 65536 for i in range(15)]
        kd = [2**24 + (i // 4) * 2**20 + (i % 4) * 8192 for i in range(16)]
        deltas = [3 * 2**20]
        for i in range(11):
            deltas.append(deltas[-1] + (4096, 12288, 8192)[i % 3])
        literal = [12345, 7 * 2**20, 99]
        offsets = contiguous + strided + kd + deltas + literal
        bounds = [0, 20, 35, 51, 63, 66]
        segments = [[bounds[i], bounds[i + 1], KINDS[i]] for i in range(5)]
        # Leave the tail uncovered in the second stream; make the third the longest.
        if k == 1:
            segments = segments[:3]
        if k == 2:
            offsets = offsets + [o + 2**30 for o in offsets]
            segments = segments + [[a + 66, b + 66, kind] for a, b, kind in segments]
        streams.append(
            {
                "key": f"POSIX /data/out_{k}.h5 rank {k} write",
                "offsets": offsets,
                "segments": segments,
            }
        )
    return {"title": "synthetic analysis", "streams": streams}


def _write_json(tmp_path: Path, doc: Any, name: str = "in.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc), encoding="utf-8")
    return p


def _assert_png(p: Path) -> None:
    assert p.exists()
    data = p.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 10_000, f"suspiciously small PNG: {len(data)} bytes"


def _assert_clean_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("patio: error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_cli_draws_png(tmp_path: Path) -> None:
    src = _write_json(tmp_path, _synthetic())
    out = tmp_path / "out.png"
    proc = _run_cli("analyze", str(src), str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and proc.stdout == ""
    _assert_png(out)


def test_many_streams_and_edge_cases(tmp_path: Path) -> None:
    doc = _synthetic(20)
    doc["streams"].append({"key": "empty", "offsets": [], "segments": []})
    doc["streams"].append({"key": "one", "offsets": [0], "segments": [[0, 1, "literal"]]})
    doc["streams"].append({"key": "huge", "offsets": [2**64 - 1, 0], "segments": []})
    out = tmp_path / "many.png"
    plot_analysis(doc, out)
    _assert_png(out)


def test_no_streams(tmp_path: Path) -> None:
    out = tmp_path / "none.png"
    plot_analysis({"title": "nothing", "streams": []}, out)
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_format_bytes() -> None:
    assert format_bytes(0) == "0"
    assert format_bytes(512) == "512 B"
    assert format_bytes(4096) == "4 KiB"
    assert format_bytes(1.5 * 2**20) == "1.5 MiB"
    assert format_bytes(10 * 2**30) == "10 GiB"
    assert format_bytes(2**64) == "16 EiB"


def test_bad_json_exits_2(tmp_path: Path) -> None:
    src = tmp_path / "broken.json"
    src.write_text('{"title": "x", "streams": [', encoding="utf-8")
    out = tmp_path / "out.png"
    _assert_clean_error(_run_cli("analyze", str(src), str(out)), str(src), "not valid JSON")
    assert not out.exists()


def test_missing_input_exits_2(tmp_path: Path) -> None:
    src = tmp_path / "absent.json"
    _assert_clean_error(_run_cli("analyze", str(src), str(tmp_path / "o.png")), "does not exist")


def test_unwritable_output_exits_2(tmp_path: Path) -> None:
    src = _write_json(tmp_path, _synthetic(1))
    out = tmp_path / "no" / "dir" / "o.png"
    _assert_clean_error(_run_cli("analyze", str(src), str(out)), "cannot write")


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ([1, 2, 3], "top level"),
        ({"title": 5, "streams": []}, "title"),
        ({"title": "t"}, "streams"),
        ({"streams": [{"key": "k", "offsets": [1, "x"], "segments": []}]}, "integers"),
        ({"streams": [{"key": "k", "offsets": [1, -2], "segments": []}]}, "non-negative"),
        (
            {"streams": [{"key": "k", "offsets": [1, 2], "segments": [[0, 3, "literal"]]}]},
            "outside",
        ),
        (
            {"streams": [{"key": "k", "offsets": [1, 2], "segments": [[0, 2, "zigzag"]]}]},
            "unknown kind",
        ),
        ({"streams": [{"key": "k", "offsets": [1, 2], "segments": [[0, 2]]}]}, "segments[0]"),
    ],
)
def test_malformed_documents(tmp_path: Path, doc: Any, needle: str) -> None:
    src = _write_json(tmp_path, doc)
    with pytest.raises(PlotError, match=needle.replace("[", r"\[")):
        load_analysis(src)
    _assert_clean_error(_run_cli("analyze", str(src), str(tmp_path / "o.png")), needle)


def test_panels_show_each_file_and_operation_first() -> None:
    import numpy as np
    from patio.plot import _Stream, select_panels

    def stream(key: str, n: int) -> _Stream:
        return _Stream(key=key, offsets=np.zeros(n), segments=[])

    # Twenty ranks writing one file, then a smaller read stream and another file.
    streams = [stream(f"POSIX rank {r} write /a.h5", 100 - r) for r in range(20)]
    streams += [stream("POSIX rank 0 read /a.h5", 10), stream("MPIIO rank 3 write /b.h5", 5)]
    shown = [s.key for s in select_panels(streams, 4)]
    assert shown == [
        "POSIX rank 0 write /a.h5",
        "POSIX rank 1 write /a.h5",
        "POSIX rank 0 read /a.h5",
        "MPIIO rank 3 write /b.h5",
    ]
    assert len(select_panels(streams, 100)) == len(streams)
