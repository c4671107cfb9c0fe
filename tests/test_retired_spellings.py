"""Every retired option spelling of docs/CLI.md's "Shared options" table still works for
one release: the command given the old spelling does what it does given the new one (the
same exit status and the same messages) after exactly one line
``patio: warning: OLD is deprecated and will be removed; use NEW``. Each case runs up to
a deterministic refusal (a missing mount point, a value out of range), so that nothing is
mounted or measured; what the options mean once a command runs is tested with it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from patio._binary import patio_binary

#: A cache mount of an empty source on a mount point that does not exist.
CACHE = ["mount", "cache", "{src}", "{nomnt}", "--cache-dir", "{cd}"]
PREFETCH = ["mount", "prefetch", "{src}", "{nomnt}", "--policy", "none"]

#: (command, old options, new options, the retired spelling, what the warning says to
#: use instead)
CASES = [
    (CACHE, ["--disk-gib", "1"], ["--disk", "1GiB"], "--disk-gib", "--disk 1GiB"),
    (CACHE, ["--memory-mib", "8"], ["--memory", "8MiB"], "--memory-mib", "--memory 8MiB"),
    (CACHE, ["--segment-mib", "4"], ["--segment", "4MiB"], "--segment-mib", "--segment 4MiB"),
    (CACHE, ["--item-kib", "4"], ["--item", "4KiB"], "--item-kib", "--item 4KiB"),
    (PREFETCH, ["--cache-mib", "8"], ["--memory", "8MiB"], "--cache-mib", "--memory 8MiB"),
    (["mount", "trace", "{src}", "{nomnt}"], ["--out", "{tmp}/t.ptrace"],
     ["--output", "{tmp}/t.ptrace"], "--out", "--output"),
    (["container", "map", "{src}"], ["--out", "{tmp}/m.csv"], ["--output", "{tmp}/m.csv"],
     "--out", "--output"),
    (["bench", "cache", "--segment", "16MiB"], ["--memory-mib", "8"], ["--memory", "8MiB"],
     "--memory-mib", "--memory 8MiB"),
    (["bench", "cache"], ["--segment-mib", "128"], ["--segment", "128MiB"], "--segment-mib",
     "--segment 128MiB"),
    (["bench", "cache", "--segment", "1GiB"], ["--repeat", "2"], ["--reps", "2"], "--repeat",
     "--reps"),
    (["bench", "reorg"], ["--repeat", "0"], ["--reps", "0"], "--repeat", "--reps"),
    (["bench", "reorg"], ["--targets", "0"], ["--store-targets", "0"], "--targets",
     "--store-targets"),
    (["layout", "probe"], ["--model", "nosuch"], ["--store", "nosuch"], "--model", "--store"),
]


def run(argv: list[str], where: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATIO_PYTHON=sys.executable)
    return subprocess.run([patio_binary(), *(a.format(**where) for a in argv)], check=False,
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("command, old, new, spelling, instead", CASES,
                         ids=[f"{c[0][0]} {c[0][1]} {c[3]}" for c in CASES])
def test_a_retired_spelling_does_what_the_new_one_does_after_one_line(
    command: list[str], old: list[str], new: list[str], spelling: str, instead: str,
    tmp_path: Path,
) -> None:
    where = {"src": str(tmp_path / "src"), "nomnt": str(tmp_path / "no-mount-point"),
             "cd": str(tmp_path / "cache"), "tmp": str(tmp_path)}
    (tmp_path / "src").mkdir()
    (tmp_path / "cache").mkdir()
    was, now = run([*command, *old], where), run([*command, *new], where)
    warning = f"patio: warning: {spelling} is deprecated and will be removed; use {instead}"
    lines = was.stderr.splitlines()
    assert lines[:1] == [warning], was.stderr
    assert "deprecated" not in now.stderr, now.stderr
    assert (was.returncode, lines[1:], was.stdout) == (now.returncode, now.stderr.splitlines(),
                                                       now.stdout)
    # Each case stops at a refusal: one line, status 2, nothing written; it names the
    # option as --help spells it, never the retired spelling.
    assert now.returncode == 2 and len(now.stderr.splitlines()) == 1, now.stderr
    assert not re.search(re.escape(spelling) + r"(?![\w-])", now.stderr), now.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "src"]
