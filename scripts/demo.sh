#!/usr/bin/env bash
# patio demo: set everything up, analyze a bundled real Darshan trace, write a plot.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

if [[ ! -d "$REPO/../shared" ]]; then
    echo "demo.sh: error: shared data directory not found at $REPO/../shared" >&2
    echo "demo.sh: the 'shared' directory (with traces/) must sit beside this clone" >&2
    exit 1
fi
SHARED="$(cd "$REPO/../shared" && pwd)"
TRACE="$SHARED/traces/io_test5_hdf5_192ranks.darshan"
if [[ ! -f "$TRACE" ]]; then
    echo "demo.sh: error: trace not found: $TRACE" >&2
    exit 1
fi

bash "$REPO/scripts/setup.sh"

mkdir -p "$REPO/out"
echo "==> patio analyze $TRACE"
"$REPO/.venv/bin/patio" analyze "$TRACE" --plot "$REPO/out/io_test5.png"

echo "==> plot written to $REPO/out/io_test5.png"
