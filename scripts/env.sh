# Sourced (not run) by the scripts that work after scripts/setup.sh: puts Rust and the
# project's virtual environment first on PATH, and builds against the venv's interpreter
# so cargo and maturin agree on pyo3's configuration. Needs REPO set to the checkout.
# shellcheck shell=bash disable=SC1091
[[ -f "$HOME/.cargo/env" ]] && . "$HOME/.cargo/env"
export VIRTUAL_ENV="$REPO/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
export PYO3_PYTHON="$VIRTUAL_ENV/bin/python"
