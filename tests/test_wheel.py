"""The one wheel, installed as a user installs it: ``scripts/wheel.sh`` builds
``patio_io-*.whl``, ``pip install`` puts it into a fresh virtual environment outside the
checkout, and from a directory that is not the checkout the installed ``patio`` analyzes
a bundled Darshan log, traces a command with the tracer the wheel ships, serves a file
through ``patio mount prefetch``, ``import patio, patio.h5`` works, and a C program built
against the HDF5 the wheel ships records its reads through the VOL connector under
``patio run --hdf5`` — with nothing of the checkout (its ``.venv``, ``target/`` or
``python/``) on any search path.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from patio._mount_harness import MountProcess

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtual environment with the wheel installed; yields its ``bin/``."""
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    subprocess.run(["bash", str(REPO / "scripts" / "wheel.sh"), str(dist)], check=True)
    wheels = sorted(dist.glob("patio_io-*.whl"))
    assert len(wheels) == 1, wheels
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, str(wheels[0])], check=True, env=outside_env(), cwd=base)
    yield venv / "bin"


def outside_env() -> dict[str, str]:
    """The environment of a user who never saw the checkout: no venv of ours, no
    package source, no patio overrides on any search path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATIO_", "PYTHON"))}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and not p.startswith(str(REPO))
    )
    return env


def run(bindir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = outside_env()
    env["PATH"] = os.pathsep.join([str(bindir), env["PATH"]])
    return subprocess.run(
        list(args), check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_wheel_holds_every_part(installed: Path) -> None:
    wheel = next((installed.parents[1] / "dist").glob("patio_io-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for suffix in (
        "/scripts/patio",
        "/data/lib/patio/libpatio_trace.so",
        "/data/lib/patio/libpatio_layout.so",
        "/data/lib/patio/libpatio_reorg.so",
        "/data/lib/patio/libpatio_mpiio.so",
        "/data/lib/patio/libpatio_prefetch.so",
        "/data/lib/patio/vol/libpatio_vol.so",
        "/data/lib/patio/hdf5-2.2.0/lib/libhdf5.so",
        "/data/lib/patio/hdf5-2.2.0/include/hdf5.h",
        "/data/lib/patio/hdf5-2.2.0/.complete",
        "/data/include/patio/patio_layout.h",
        "/data/include/patio/patio_reorg.h",
        "/data/include/patio/patio_prefetch.h",
        "/data/share/man/man1/patio.1",
        "/data/share/man/man1/patio-mount-prefetch.1",
        "/data/share/bash-completion/completions/patio",
        "/data/share/zsh/site-functions/_patio",
        "/data/share/fish/vendor_completions.d/patio.fish",
        "patio/__init__.py",
        "patio/h5.py",
    ):
        assert any(n.endswith(suffix) for n in names), suffix
    assert any(n.startswith("patio/_native") and n.endswith(".so") for n in names)
    # Nothing compiled in from the build tree: the checkout's path is not in the binary.
    binary = (installed / "patio").read_bytes()
    assert str(REPO).encode() not in binary


def test_requires_python_is_the_version_tested(installed: Path, tmp_path: Path) -> None:
    """The wheel claims the oldest Python these tests run on (the suite's interpreter,
    which made the fresh environment): a claim below it is untested, above it false."""
    wheel = next((installed.parents[1] / "dist").glob("patio_io-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode().splitlines()
    claims = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Requires-Python:")]
    tested = "{}.{}".format(*sys.version_info[:2])
    assert claims == [f">={tested}"], claims
    out = run(installed, "python", "-c", "import sys; print(*sys.version_info[:2], sep='.')",
              cwd=tmp_path)
    assert out.stdout.strip() == tested, out


def test_installed_man_pages_and_completions_are_the_binarys(
    installed: Path, tmp_path: Path
) -> None:
    """The shipped man pages and completion scripts are what the installed binary
    generates from its CLI definition, and they work: ``man`` renders a page from the
    environment's share/man, bash completes a subcommand from the installed script."""
    share = installed.parent / "share"
    fresh = tmp_path / "man1"
    assert run(installed, "patio", "man", "-o", str(fresh), cwd=tmp_path).returncode == 0
    shipped = sorted(p.name for p in (share / "man" / "man1").glob("patio*.1"))
    assert shipped == sorted(p.name for p in fresh.glob("*.1")), shipped
    for name in shipped:
        assert (share / "man" / "man1" / name).read_bytes() == (fresh / name).read_bytes(), name
    for shell, path in (
        ("bash", "bash-completion/completions/patio"),
        ("zsh", "zsh/site-functions/_patio"),
        ("fish", "fish/vendor_completions.d/patio.fish"),
    ):
        out = run(installed, "patio", "completions", shell, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert (share / path).read_text() == out.stdout, path
    page = run(installed, "man", "-P", "cat", "-M", str(share / "man"), "patio-mount-prefetch",
               cwd=tmp_path)
    assert page.returncode == 0, page.stderr
    assert "--policy" in page.stdout, page.stdout[:400]
    complete = (
        f"source {share / 'bash-completion/completions/patio'}; COMP_WORDS=(patio mount pre); "
        'COMP_CWORD=2; COMP_LINE="patio mount pre"; COMP_POINT=${#COMP_LINE}; '
        '_patio patio pre mount; echo "${COMPREPLY[@]}"'
    )
    done = run(installed, "bash", "-c", complete, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.split() == ["prefetch"], (done.stdout, done.stderr)


def test_installed_python_package(installed: Path, tmp_path: Path) -> None:
    out = run(
        installed,
        "python",
        "-c",
        "import patio, patio.h5, patio._native; print(patio.__file__)",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert not out.stdout.strip().startswith(str(REPO)), out.stdout
    version = run(installed, "python", "-m", "patio", "--version", cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("patio"), version.stdout


def test_installed_analyze_reads_darshan(installed: Path, tmp_path: Path) -> None:
    log = TRACES / "ior_hdf5_4ranks.darshan"
    out = run(installed, "patio", "analyze", str(log), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report, "an empty report"


def test_installed_trace_uses_shipped_tracer(installed: Path, tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    dd = ["dd", "if=/dev/zero", f"of={tmp_path / 'f.bin'}", "bs=4096", "count=16"]
    out = run(installed, "patio", "trace", "-o", str(cap), "--", *dd, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    merged = tmp_path / "run.csv"
    out = run(installed, "patio", "trace", "merge", str(cap), "-o", str(merged), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = merged.read_text().splitlines()
    writes = [r for r in rows if "f.bin" in r and ",write," in r.lower()]
    assert len(writes) >= 16, rows[:5]


class InstalledPrefetchMount(MountProcess):
    """``patio mount prefetch`` run from the installed binary (it needs no Python)."""

    def __init__(self, binary: Path, src: Path, mnt: Path):
        self.mnt = mnt
        args = ["mount", "prefetch", str(src), str(mnt), "--policy", "pattern", "--latency-ms", "1"]
        self.start([str(binary), *args])


def test_installed_prefetch_mount(installed: Path, tmp_path: Path) -> None:
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    data = random.Random(7).randbytes(1 << 20)
    (src / "data.bin").write_bytes(data)
    mount = InstalledPrefetchMount(installed / "patio", src, mnt)
    try:
        with open(mnt / "data.bin", "rb") as f:
            for off in range(0, len(data), 3 << 14):
                f.seek(off)
                assert f.read(1 << 14) == data[off : off + (1 << 14)], off
        mount.end("SIGINT")
    finally:
        mount.cleanup()


# Run inside the installed environment: builds tests/c/vol_read.c against the HDF5 the
# wheel ships, runs it natively and under the installed `patio run --hdf5`, and reports
# whether the bytes agree and how many patterns the connector recorded.
VOL_SCRIPT = """
import json, os, subprocess, sys
from pathlib import Path
import h5py, numpy as np
from patio.layout.kb import KnowledgeBase
from patio.layout.vol import cc_command, vol_env
env = vol_env()
exe = Path("vol_read").resolve()
subprocess.run(cc_command(Path(sys.argv[1]), exe), check=True)
data = np.arange(6 * 10 * 8, dtype="f8").reshape(6, 10, 8)
with h5py.File("run.h5", "w") as f:
    f.create_dataset("d", data=data, chunks=(2, 5, 4))
KnowledgeBase("run.h5").close()
plain = {k: v for k, v in os.environ.items() if not k.startswith("HDF5_")}
subprocess.run([str(exe), "run.h5", "/d", "native.bin"], env=plain, check=True)
subprocess.run(["patio", "run", "--hdf5", "--", str(exe), "run.h5", "/d", "vol.bin"],
               env=plain, check=True)
with KnowledgeBase("run.h5") as kb:
    kb.compact()
    n = len(kb.patterns())
print(json.dumps({"env": env, "prefix": sys.prefix, "patterns": n,
                  "same": Path("native.bin").read_bytes() == Path("vol.bin").read_bytes()}))
"""


def test_installed_vol_connector_records_an_unmodified_program(
    installed: Path, tmp_path: Path
) -> None:
    out = run(installed, "python", "-c", VOL_SCRIPT, str(REPO / "tests" / "c" / "vol_read.c"),
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["env"]["HDF5_PLUGIN_PATH"].startswith(report["prefix"]), report
    assert report["env"]["hdf5_version"] == "2.2.0", report
    assert report["same"], report
    assert report["patterns"] > 0, report
