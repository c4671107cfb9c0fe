"""``--help`` stands alone: every leaf command (the Rust commands and the Python front
ends, walked as tests/test_cli_vocabulary.py walks them) says what it does, and every
argument and option it lists says what it is — a reader of the installed command needs
nothing else to use it."""

from __future__ import annotations

import re

import pytest
from test_cli_vocabulary import help_text, subcommands

#: The heading of each section that lists arguments or options (clap, argparse).
SECTIONS = ("Arguments:", "Options:", "positional arguments:", "options:")


def leaves() -> dict[str, str]:
    found: dict[str, str] = {}

    def walk(path: tuple[str, ...]) -> None:
        text = help_text(path)
        subs = subcommands(text)
        if not subs:
            found[" ".join(path)] = text
        for sub in subs:
            walk((*path, sub))

    walk(())
    return found


def undescribed(text: str) -> list[str]:
    """The entries of ``text``'s argument and option sections that have no help: an
    entry's help follows it on its line (after two spaces) or on the next lines, indented
    deeper than the entry."""
    missing = []
    lines = text.splitlines()
    section = False
    for i, line in enumerate(lines):
        if line.strip() in SECTIONS:
            section = True
            continue
        if line.strip() and not line.startswith(" "):
            section = False  # another heading (Examples:) or text after the sections
        if not section or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent > 6:
            continue  # a help line of the entry above
        entry = line.strip()
        inline = re.search(r"\S {2,}\S", entry) is not None
        after = lines[i + 1] if i + 1 < len(lines) else ""
        below = bool(after.strip()) and len(after) - len(after.lstrip()) > indent
        if not (inline or below):
            missing.append(entry)
    return missing


def description(text: str) -> str:
    """What the command says it does: clap's text before ``Usage:``, argparse's text
    between the usage and the first section."""
    if "\nUsage:" in text or text.startswith("Usage:"):
        return text.split("Usage:", 1)[0].strip()
    blocks = text.split("\n\n")
    return "" if len(blocks) < 2 or blocks[1].strip() in SECTIONS or any(
        blocks[1].startswith(s) for s in SECTIONS) else blocks[1].strip()


def test_the_checks_find_what_is_missing() -> None:
    argparse_text = ("usage: patio x [-h] [--json] file\n\npositional arguments:\n  file\n\n"
                     "options:\n  -h, --help  show this help message and exit\n  --json\n"
                     "  --long-one LONG\n              what it is\n")
    assert undescribed(argparse_text) == ["file", "--json"]
    assert description(argparse_text) == ""
    clap_text = ("Does x.\n\nUsage: patio x [OPTIONS] <PATH>\n\nArguments:\n  <PATH>  \n\n"
                 "Options:\n      --json\n          Print JSON\n      --bare\n"
                 "  -h, --help  Print help\n")
    assert undescribed(clap_text) == ["<PATH>", "--bare"]
    assert description(clap_text) == "Does x."


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    return leaves()


def test_every_command_says_what_it_does(helps: dict[str, str]) -> None:
    assert "amr advise" in helps and "container compact" in helps, sorted(helps)
    silent = sorted(cmd for cmd, text in helps.items() if not description(text))
    assert not silent, silent


def test_every_argument_and_option_says_what_it_is(helps: dict[str, str]) -> None:
    missing = {cmd: undescribed(text) for cmd, text in helps.items()}
    missing = {cmd: entries for cmd, entries in missing.items() if entries}
    assert not missing, missing
