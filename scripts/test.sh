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
rc=0
pytest -q tests || rc=$?
if [[ $rc -eq 5 ]]; then
    echo "test.sh: error: pytest collected no tests (exit 5)" >&2
    exit 1
elif [[ $rc -ne 0 ]]; then
    echo "test.sh: error: pytest failed (exit $rc)" >&2
    exit "$rc"
fi

printf '\n==> all checks passed\n'
