#!/usr/bin/env bash
# patio test suite: set up, then lint and test Rust and Python. Stops at the first failure.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

bash "$REPO/scripts/setup.sh"

# shellcheck source=scripts/env.sh
. "$REPO/scripts/env.sh"

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

step "cargo clippy --workspace --all-targets --release -- -D warnings"
cargo clippy --workspace --all-targets --release -- -D warnings

step "cargo test --workspace --release"
cargo test --workspace --release

step "ruff check python tests bench"
ruff check python tests bench

step "pytest -q tests"
# The suite's scratch files live in one directory removed at the end; say so
# up front when the disk is too full for them, instead of failing test by test.
scratch_parent="${TMPDIR:-/tmp}"
free_kib=$(df -Pk "$scratch_parent" | awk 'NR == 2 { print $4 }')
if [[ -n "$free_kib" && "$free_kib" -lt $((3 * 1024 * 1024)) ]]; then
    echo "test.sh: warning: only $((free_kib / 1024)) MiB free in $scratch_parent; the tests need about 3 GiB of scratch space" >&2
fi
basetemp="$(mktemp -d "$scratch_parent/patio-tests.XXXXXX")"
trap 'rm -rf "$basetemp"' EXIT
rc=0
pytest -q tests --basetemp "$basetemp/t" || rc=$?
if [[ $rc -eq 5 ]]; then
    echo "test.sh: error: pytest collected no tests (exit 5)" >&2
    exit 1
elif [[ $rc -ne 0 ]]; then
    echo "test.sh: error: pytest failed (exit $rc)" >&2
    exit "$rc"
fi

printf '\n==> all checks passed\n'
