"""Tests for the registration of reorganized files: ``patio reorg apply`` registers its
container for the source (``.NAME.patio-reorg`` beside it), ``patio reorg status``
says whether the source is served from it and why not (a touched or rewritten source,
a deleted container), ``patio reorg register`` accepts an existing container only when
it holds the source's bytes, ``unregister`` removes the link, and a corrupt registration
is a one-line error. Through the C ABI (``libpatio_reorg.so``, via ctypes and from the
C program tests/c/reorg_capi.c) a registered source reads as its bytes — the reference
model — and a stale one is bypassed.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from patio._binary import patio_binary
from test_mount_trace import one_line_error, patio
from test_reorg import ior_like

ROOT = Path(__file__).resolve().parents[1]
STATUS_KEYS = {"file", "container", "source_matches", "patterns"}


def applied(tmp_path: Path, *extra: str) -> tuple[Path, Path, bytes]:
    """The IOR-like source reorganized into ``data.pc`` beside it."""
    src, trace, data = ior_like(tmp_path)
    out = tmp_path / "data.pc"
    patio(
        "reorg",
        "apply",
        str(trace),
        "--file",
        str(src),
        "--trace-file",
        "/lustre/run7/data.bin",
        "-o",
        str(out),
        *extra,
    )
    return src, out, data


def status(src: Path) -> dict:
    done = patio("reorg", "status", str(src), "--json")
    return json.loads(done.stdout)


def registration(src: Path) -> Path:
    return src.with_name(f".{src.name}.patio-reorg")


def later() -> None:
    """Past the file system's timestamp granularity."""
    time.sleep(0.02)


def test_apply_registers_and_status_follows_the_source(tmp_path: Path) -> None:
    src, out, data = applied(tmp_path)
    assert registration(src).is_file()
    s = status(src)
    assert STATUS_KEYS <= s.keys()
    assert s["file"] == str(src) and Path(s["container"]) == out
    assert s["source_matches"] is True and s["served"] is True and "reason" not in s
    assert s["patterns"] >= 1 and s["index_bytes"] > 0
    text = patio("reorg", "status", str(src)).stdout
    assert text.startswith(f"{src}: served from {out}"), text

    later()
    os.utime(src)  # touched: the same bytes, another version
    s = status(src)
    assert s["source_matches"] is False and s["served"] is False
    assert "modification time" in s["reason"] and str(src) not in s["reason"]
    assert "not served" in patio("reorg", "status", str(src)).stdout

    # Registered again (the bytes are the same), then rewritten in place with other bytes.
    patio("reorg", "register", str(src), str(out))
    assert status(src)["served"] is True
    later()
    with open(src, "r+b") as f:
        f.seek(100)
        f.write(bytes([data[100] ^ 0xFF]))
    s = status(src)
    assert s["source_matches"] is False and s["reason"]
    # …which the register check now sees.
    one_line_error(
        patio("reorg", "register", str(src), str(out), check=False), "bytes differ at offset 100"
    )


def test_a_deleted_container_is_not_served(tmp_path: Path) -> None:
    src, out, _ = applied(tmp_path)
    subprocess.run(["rm", "-r", str(out)], check=True)
    s = status(src)
    assert s["source_matches"] is True and s["served"] is False
    assert str(out) in s["reason"] and s["patterns"] is None


def test_register_refuses_a_container_of_other_bytes(tmp_path: Path) -> None:
    _, out, data = applied(tmp_path)
    rng = random.Random(1)
    for where in (0, len(data) - 1, rng.randrange(len(data))):
        other = tmp_path / f"other{where}"
        changed = bytearray(data)
        changed[where] ^= 0x01
        other.write_bytes(bytes(changed))
        done = patio("reorg", "register", str(other), str(out), "--samples", "4096", check=False)
        one_line_error(done, str(other), str(out), f"bytes differ at offset {where}")
        assert not registration(other).exists()
    short = tmp_path / "short"
    short.write_bytes(data[:1000])
    one_line_error(patio("reorg", "register", str(short), str(out), check=False), "holds", "1000")
    # A copy under another name (another inode, as through a mount) is registered,
    # with the container stored relative to the directory (both in it).
    copy = tmp_path / "copy.bin"
    copy.write_bytes(data)
    done = patio("reorg", "register", str(copy), str(out), "--json")
    j = json.loads(done.stdout)
    assert j["container_relative"] is True and j["size"] == len(data)
    assert status(copy)["served"] is True


def test_a_corrupt_registration_is_a_one_line_error(tmp_path: Path) -> None:
    src, _, _ = applied(tmp_path)
    reg = registration(src)
    raw = bytearray(reg.read_bytes())
    raw[-1] ^= 0x10
    reg.write_bytes(bytes(raw))
    one_line_error(patio("reorg", "status", str(src), check=False), reg.name, "checksum")
    one_line_error(patio("reorg", "status", str(src), "--json", check=False), reg.name)
    reg.write_bytes(bytes(raw[:7]))
    one_line_error(patio("reorg", "status", str(src), check=False), reg.name, "truncated")
    j = json.loads(patio("reorg", "unregister", str(src), "--json").stdout)
    assert j["removed"] is True and not reg.exists()
    # No registration: one line and a non-zero exit, or "container": null under --json.
    one_line_error(patio("reorg", "status", str(src), check=False), "no reorganized container")
    s = status(src)
    assert STATUS_KEYS <= s.keys() and s["container"] is None and s["source_matches"] is False
    j = json.loads(patio("reorg", "unregister", str(src), "--json").stdout)
    assert j["removed"] is False


def test_no_register_and_the_apply_json(tmp_path: Path) -> None:
    src, _, _ = applied(tmp_path, "--no-register")
    assert not registration(src).exists()
    one_line_error(patio("reorg", "status", str(src), check=False), str(src))
    (tmp_path / "b").mkdir()
    src2, trace, _ = ior_like(tmp_path / "b")
    done = patio(
        "reorg",
        "apply",
        str(trace),
        "--file",
        str(src2),
        "--trace-file",
        "/lustre/run7/data.bin",
        "-o",
        str(tmp_path / "elsewhere.pc"),
        "--json",
    )
    j = json.loads(done.stdout)
    assert j["registration"]["registration"] == str(registration(src2))
    # Outside the source's directory: stored absolute.
    assert j["registration"]["container_relative"] is False
    assert status(src2)["served"] is True


@pytest.mark.parametrize("sub", ["register", "status", "unregister"])
def test_help_stands_alone(sub: str) -> None:
    text = patio("reorg", sub, "--help").stdout
    assert "FILE" in text and "--json" in text
    assert len(text.splitlines()) >= 6


def reorg_library() -> ctypes.CDLL | None:
    """libpatio_reorg.so: $PATIO_REORG_LIB, installed beside the virtual environment's
    other patio libraries, or built beside the ``patio`` binary."""
    candidates = [os.environ.get("PATIO_REORG_LIB", "")]
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        candidates.append(str(Path(venv) / "lib" / "patio" / "libpatio_reorg.so"))
    candidates.append(str(Path(patio_binary()).resolve().parent / "libpatio_reorg.so"))
    for c in candidates:
        if c and Path(c).is_file():
            return ctypes.CDLL(c)
    return None


def test_the_c_abi_serves_a_registered_source_as_its_bytes(tmp_path: Path) -> None:
    lib = reorg_library()
    if lib is None:
        pytest.skip("libpatio_reorg.so is not built")
    src, _, data = applied(tmp_path)
    handle = ctypes.c_void_p()
    msg = ctypes.create_string_buffer(512)
    lib.patio_reorg_open.argtypes = [
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.patio_reorg_read.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_uint64),
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_uint64),
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.patio_reorg_close.argtypes = [ctypes.c_void_p]
    lib.patio_reorg_size.argtypes = [ctypes.c_void_p]
    lib.patio_reorg_size.restype = ctypes.c_uint64
    rc = lib.patio_reorg_open(str(src).encode(), ctypes.byref(handle), msg, len(msg))
    assert rc == 0, msg.value
    assert lib.patio_reorg_size(handle) == len(data)
    rng = random.Random(3)
    for _ in range(20):
        pairs = [(rng.randrange(len(data) + 100), rng.randrange(20000)) for _ in range(5)]
        flat = (ctypes.c_uint64 * 10)(*[v for p in pairs for v in p])
        buf = ctypes.create_string_buffer(sum(n for _, n in pairs) or 1)
        got = ctypes.c_uint64()
        rc = lib.patio_reorg_read(handle, flat, 5, buf, ctypes.byref(got), msg, len(msg))
        assert rc == 0, msg.value
        want = b"".join(data[o : o + n] for o, n in pairs)
        assert buf.raw[: got.value] == want
    lib.patio_reorg_close(handle)
    later()
    os.utime(src)
    rc = lib.patio_reorg_open(str(src).encode(), ctypes.byref(handle), msg, len(msg))
    assert rc == 2 and b"modification time" in msg.value
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    assert lib.patio_reorg_open(str(plain).encode(), ctypes.byref(handle), msg, len(msg)) == 1


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_c_abi_from_a_c_program(tmp_path: Path) -> None:
    """tests/c/reorg_capi.c compiled with ``-Wall -Wextra -Werror`` against the header
    and the library: random extents equal ``pread`` of the source, four threads on
    one handle, statistics, null arguments, truncated messages."""
    lib = reorg_library()
    if lib is None:
        pytest.skip("libpatio_reorg.so is not built")
    src, _, _ = applied(tmp_path)
    plain = tmp_path / "plain"
    plain.write_bytes(b"plain")
    exe = tmp_path / "reorg_capi"
    libdir = Path(lib._name).parent
    subprocess.run(
        [
            "cc",
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{ROOT / 'crates' / 'patio-reorg' / 'include'}",
            str(ROOT / "tests" / "c" / "reorg_capi.c"),
            f"-L{libdir}",
            "-lpatio_reorg",
            "-lpthread",
            "-o",
            str(exe),
        ],
        check=True,
    )
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    r = subprocess.run(
        [str(exe), str(src), str(plain)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
