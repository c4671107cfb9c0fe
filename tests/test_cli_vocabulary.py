"""One CLI vocabulary: every subcommand's ``--help`` is walked (the Rust commands and the
Python front ends behind ``patio layout``, ``patio amr`` and ``patio bench …``), no
visible option uses a spelling that docs/CLI.md retired, and every option two or more
commands share is in docs/CLI.md's "Shared options" table — one spelling each.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from patio._binary import patio_binary

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "CLI.md"

#: Retired spellings and the one that replaced them (still accepted, hidden, deprecated).
RETIRED = {
    "--cache-mib": "--memory",
    "--memory-mib": "--memory",
    "--budget-mib": "--memory",
    "--disk-gib": "--disk",
    "--segment-mib": "--segment",
    "--item-kib": "--item",
    "--targets": "--store-targets",
    "--out": "--output",
}

CLAP_COMMANDS = re.compile(r"^Commands:\n((?:  .*\n)+)", re.MULTILINE)
ARGPARSE_COMMANDS = re.compile(
    r"^positional arguments:\n  (?:[A-Z_]+|\{[a-z0-9_,-]+\})\n((?:    .*\n|\s{10,}.*\n)+)",
    re.MULTILINE,
)
OPTION = re.compile(r"^\s+(?:-\w(?: \S+)?, )?(--[a-z][a-z0-9-]*)", re.MULTILINE)


def help_text(path: tuple[str, ...]) -> str:
    done = subprocess.run(
        [patio_binary(), *path, "--help"], check=False, capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 0, (path, done.stderr)
    return done.stdout


def subcommands(text: str) -> list[str]:
    clap = CLAP_COMMANDS.search(text)
    if clap:
        names = [ln.split()[0] for ln in clap.group(1).splitlines() if re.match(r"  \S", ln)]
        return [n for n in names if n != "help"]
    argparse = ARGPARSE_COMMANDS.search(text)
    if argparse:
        return [ln.split()[0] for ln in argparse.group(1).splitlines() if re.match(r"    \S", ln)]
    return []


@pytest.fixture(scope="module")
def helps() -> dict[str, tuple[str, bool]]:
    """Every command's ``--help`` (``""`` for ``patio`` itself) and whether it is a leaf."""
    found: dict[str, tuple[str, bool]] = {}

    def walk(path: tuple[str, ...]) -> None:
        text = help_text(path)
        subs = subcommands(text)
        found[" ".join(path)] = (text, not subs)
        for sub in subs:
            assert sub not in path and len(path) < 4, path
            walk((*path, sub))

    walk(())
    return found


@pytest.fixture(scope="module")
def options(helps: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Each leaf command's visible long options (``--help`` and ``--version`` aside)."""
    return {
        command: set(OPTION.findall(text)) - {"--help", "--version"}
        for command, (text, leaf) in helps.items()
        if leaf
    }


#: The commands that report nothing of their own, so take no ``--json``: what they write is
#: their output (a script, man pages, a CSV), or they run another program.
NOT_REPORTING = {"completions", "man", "container map", "run"}


def test_every_command_that_reports_takes_json(options: dict[str, set[str]]) -> None:
    assert NOT_REPORTING <= options.keys(), sorted(options)
    without = sorted(cmd for cmd, opts in options.items() if "--json" not in opts)
    assert without == sorted(NOT_REPORTING), without


#: A document named in a help text (``docs/CLI.md``, ``NOTES.md``), or a section sign.
DOCUMENT = re.compile(r"[\w./-]*\.md\b|§")

#: Help texts known to cite a design note outside the repository (strict: this fails
#: once the text is fixed, so the entry goes).
CITES_OUTSIDE: set[str] = set()


def outside_references(text: str) -> list[str]:
    """What ``text`` cites that a reader of the installed command or the repository
    cannot open: documents that are not in the repository, sections (``§A.7``) of notes."""
    return [ref for ref in DOCUMENT.findall(text) if ref == "§" or not (REPO / ref).is_file()]


def test_help_texts_stand_alone(helps: dict[str, tuple[str, bool]]) -> None:
    assert outside_references("see NOTES.md §B.6 and docs/CLI.md") == ["NOTES.md", "§"]
    cited = {cmd: outside_references(text) for cmd, (text, _) in helps.items()}
    cited = {cmd: refs for cmd, refs in cited.items() if refs}
    assert cited.keys() == CITES_OUTSIDE, cited


def test_the_walk_reaches_every_front_end(options: dict[str, set[str]]) -> None:
    for command in ("mount prefetch", "layout build", "amr read", "bench reorg", "store probe"):
        assert command in options, sorted(options)


def test_no_retired_spelling_is_visible(options: dict[str, set[str]]) -> None:
    for command, opts in options.items():
        for old in opts & RETIRED.keys():
            pytest.fail(f"patio {command} shows {old}; the shared spelling is {RETIRED[old]}")


def test_every_shared_option_is_in_the_table(options: dict[str, set[str]]) -> None:
    text = DOCS.read_text()
    start = text.index("## Shared options")
    table = text[start : text.index("\n## ", start + 1)]
    first_cells = [row.split("|")[1] for row in table.splitlines() if row.startswith("| `")]
    documented = {opt for cell in first_cells for opt in re.findall(r"--[a-z0-9-]+", cell)}
    users: dict[str, list[str]] = defaultdict(list)
    for command, opts in options.items():
        for opt in opts:
            users[opt].append(command)
    shared = {opt for opt, cmds in users.items() if len(cmds) > 1}
    missing = sorted(shared - documented)
    assert not missing, {opt: users[opt] for opt in missing}
    assert not documented & RETIRED.keys()


def test_one_default_store_where_a_model_is_needed(tmp_path: Path) -> None:
    """``reorg plan`` and ``amr advise`` price on the same preset, ``lustre``, when no
    ``--store`` is given (docs/CLI.md, Shared options)."""
    from test_amr import synthetic
    from test_reorg import ior_like

    def run(*args: str) -> dict[str, object]:
        done = subprocess.run([patio_binary(), *args, "--json"], check=False,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (args, done.stderr)
        return json.loads(done.stdout)

    src, trace, _ = ior_like(tmp_path)
    plan = ("reorg", "plan", str(trace), "--file", str(src))
    default = run(*plan)
    assert default == run(*plan, "--store", "lustre")
    assert default != run(*plan, "--store", "hdd")
    amr = tmp_path / "amr.hdf5"
    synthetic(amr, seed=2, dim=3, nlevels=2)
    advise = ("amr", "advise", str(amr), "--queries", "10")
    assert run(*advise) == run(*advise, "--store", "lustre")
    assert "default: lustre" in help_text(("reorg", "apply"))


def test_file_and_trace_in_one_order(tmp_path: Path) -> None:
    """``TRACE --file FILE`` for every command that reads a trace about a file; ``reorg
    apply``'s retired ``FILE --trace TRACE`` still works, with one deprecation line."""
    from test_reorg import ior_like

    src, trace, _ = ior_like(tmp_path)
    for command in (("reorg", "plan"), ("reorg", "apply"), ("layout", "learn")):
        text = help_text(command)
        # The one positional argument is the trace; the data file is --file.
        positional = re.search(r"^(?:Arguments|positional arguments):\n((?:  .*\n)+)", text,
                               re.MULTILINE)
        assert positional, (command, text)
        names = re.findall(r"^  (<\w+>|\w+)", positional.group(1), re.MULTILINE)
        assert [n.strip("<>").lower() for n in names] == ["trace"], (command, names)
        assert re.search(r"^\s+--file\b", text, re.MULTILINE), command

    def apply(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([patio_binary(), "reorg", "apply", *args, "--no-register",
                               "--json"], check=False, capture_output=True, text=True,
                              timeout=300)

    new = apply(str(trace), "--file", str(src), "-o", str(tmp_path / "new.pc"))
    old = apply(str(src), "--trace", str(trace), "-o", str(tmp_path / "old.pc"))
    assert new.returncode == 0 and new.stderr == "", new.stderr
    assert old.returncode == 0, old.stderr
    deprecation = ("patio: warning: `patio reorg apply FILE --trace TRACE` is deprecated and "
                   "will be removed; use `patio reorg apply TRACE --file FILE`")
    assert old.stderr.splitlines() == [deprecation]
    same = [json.loads(done.stdout)["plan"] for done in (new, old)]
    assert same[0] == same[1]
    assert (tmp_path / "new.pc").is_dir() and (tmp_path / "old.pc").is_dir()
    both = apply(str(trace), "--file", str(src), "--trace", str(trace), "-o",
                 str(tmp_path / "x.pc"))
    assert both.returncode == 2 and "cannot be used with" in both.stderr, both.stderr


def test_store_comes_with_targets_and_stripe(options: dict[str, set[str]],
                                             tmp_path: Path) -> None:
    with_store = {cmd for cmd, opts in options.items() if "--store" in opts}
    lacking = {cmd for cmd in with_store
               if not {"--store-targets", "--store-stripe-kib"} <= options[cmd]}
    assert lacking == set(), sorted(lacking)
    from test_reorg import ior_like

    src, trace, _ = ior_like(tmp_path)

    def plan(*args: str) -> dict[str, object]:
        done = subprocess.run([patio_binary(), "reorg", "plan", str(trace), "--file", str(src),
                               "--json", *args], check=False, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    preset, changed = plan(), plan("--store-targets", "16", "--store-stripe-kib", "16")
    assert (preset["store_targets"], preset["store_stripe_kib"]) == (None, None)
    assert (changed["store_targets"], changed["store_stripe_kib"]) == (16, 16)
    assert changed["model_seconds_before"] != preset["model_seconds_before"]
    bad = subprocess.run([patio_binary(), "reorg", "plan", str(trace), "--file", str(src),
                          "--store-targets", "0"], check=False, capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
    assert "--store lustre" in bad.stderr, bad.stderr
