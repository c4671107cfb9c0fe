#!/usr/bin/env bash
# patio — one-shot environment setup for Debian 12 (idempotent; fast when already set up).
#
#   * system packages via apt-get (only the missing ones; uses sudo when not root)
#   * Rust toolchain >= 1.87 via rustup (with rustfmt and clippy)
#   * Python venv at $REPO/.venv with requirements-dev.txt
#   * release build of the `patio` CLI (linked as .venv/bin/patio)
#   * the Python extension `patio._native` installed into the venv via `maturin develop`
#   * the LD_PRELOAD tracer capture/libpatio_trace.so (make), installed as
#     .venv/lib/patio/libpatio_trace.so where `patio trace` finds it
#   * the MPI-IO layer mpiio/libpatio_mpiio.so (make, with mpicc) and the C libraries it
#     loads (libpatio_reorg.so: reorganized files; libpatio_prefetch.so: the prefetch
#     engine), installed beside the tracer
#   * an HDF5 with VOL support (scripts/hdf5.sh: built once, cached) and the VOL connector
#     vol/libpatio_vol.so, installed as .venv/lib/patio/vol/libpatio_vol.so
#
# Environment overrides:
#   PATIO_PYTHON       interpreter used to create the venv (default: /usr/bin/python3 if
#                      present, else python3 on PATH)
#   PATIO_SKIP_APT=1   skip the system-package step
#   PATIO_SKIP_BUILD=1 stop after the venv step (no cargo/maturin build)
#   PATIO_FORCE_BUILD=1 re-run `maturin develop` even if its inputs look unchanged
#   CARGO_TARGET_DIR   honoured when locating target/release/patio
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

VENV="$REPO/.venv"
REQ="$REPO/requirements-dev.txt"
MIN_RUST="1.87"
APT_PACKAGES=(
    build-essential pkg-config python3 python3-venv python3-dev xz-utils zstd
    curl ca-certificates git libfuse3-dev fuse3 fio
    openmpi-bin libopenmpi-dev pnetcdf-bin zlib1g-dev gfortran
)

say() { printf '==> %s\n' "$*"; }
die() { printf 'setup.sh: error: %s\n' "$*" >&2; exit 1; }

# --------------------------------------------------------------------------- apt
pkg_installed() {
    local out
    out="$(dpkg -s "$1" 2>/dev/null)" || return 1
    [[ "$out" == *"Status: install ok installed"* ]]
}

as_root() {
    if [[ "$(id -u)" -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root for '$*' (not root and sudo not found); install the packages listed above manually"
    fi
}

apt_lists_present() {
    compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null
}

install_system_packages() {
    if [[ "${PATIO_SKIP_APT:-0}" == "1" ]]; then
        say "skipping system packages (PATIO_SKIP_APT=1)"
        return
    fi
    local missing=() p
    for p in "${APT_PACKAGES[@]}"; do
        pkg_installed "$p" || missing+=("$p")
    done
    if [[ ${#missing[@]} -eq 0 ]]; then
        say "system packages: all present"
        return
    fi
    say "installing system packages: ${missing[*]}"
    if ! command -v apt-get >/dev/null 2>&1; then
        die "apt-get not found (not Debian/Ubuntu?); install these manually: ${missing[*]}"
    fi
    # `apt-get update` only when the package lists are absent or lack a candidate.
    local need_update=0
    if ! apt_lists_present; then
        need_update=1
    else
        for p in "${missing[@]}"; do
            if ! apt-cache show "$p" >/dev/null 2>&1; then need_update=1; break; fi
        done
    fi
    if [[ $need_update -eq 1 ]]; then
        say "apt-get update"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    fi
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
        # Stale lists (404 on a superseded .deb): refresh once and retry.
        say "apt-get install failed; refreshing package lists and retrying"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
}

# -------------------------------------------------------------------------- rust
version_ge() { # version_ge A B  ->  A >= B (numeric, dotted)
    [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]
}

rustc_version() {
    local v
    v="$(rustc --version 2>/dev/null)" || return 1
    [[ "$v" =~ ^rustc\ ([0-9]+\.[0-9]+(\.[0-9]+)?) ]] || return 1
    printf '%s\n' "${BASH_REMATCH[1]}"
}

ensure_rust_components() {
    command -v rustup >/dev/null 2>&1 || return 0
    local installed
    installed="$(rustup component list --installed 2>/dev/null || true)"
    if [[ "$installed" != *rustfmt* || "$installed" != *clippy* ]]; then
        say "adding rustup components rustfmt, clippy"
        rustup component add rustfmt clippy \
            || echo "setup.sh: warning: could not add rustfmt/clippy via rustup" >&2
    fi
}

install_rust() {
    # shellcheck disable=SC1091
    [[ -f "$HOME/.cargo/env" ]] && . "$HOME/.cargo/env"
    local have=""
    if command -v cargo >/dev/null 2>&1; then
        have="$(rustc_version || true)"
    fi
    if [[ -n "$have" ]] && version_ge "$have" "$MIN_RUST"; then
        say "rust: rustc $have"
        ensure_rust_components
        return
    fi
    if [[ -n "$have" ]]; then
        say "rust: rustc $have is older than $MIN_RUST; installing a current toolchain via rustup"
    else
        say "rust: cargo not found; installing via rustup"
    fi
    if command -v rustup >/dev/null 2>&1; then
        rustup toolchain install stable --profile minimal --component rustfmt --component clippy
        rustup default stable
    else
        curl --proto '=https' --tlsv1.2 https://sh.rustup.rs -sSf \
            | sh -s -- -y --profile minimal --component rustfmt --component clippy
    fi
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
    ensure_rust_components
    have="$(rustc_version || true)"
    if [[ -z "$have" ]] || ! version_ge "$have" "$MIN_RUST"; then
        die "rustc >= $MIN_RUST still not available after rustup install (got '${have:-none}'); is an older cargo shadowing ~/.cargo/bin on PATH?"
    fi
    say "rust: rustc $have"
}

# ------------------------------------------------------------------------ python
setup_venv() {
    [[ -f "$REQ" ]] || die "missing $REQ"
    local py="${PATIO_PYTHON:-}"
    if [[ -z "$py" ]]; then
        if [[ -x /usr/bin/python3 ]]; then py=/usr/bin/python3; else py=python3; fi
    fi
    if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
        say "python venv: $VENV ($("$VENV/bin/python" --version 2>&1))"
    else
        say "creating python venv at $VENV (from $py)"
        rm -rf "$VENV"
        "$py" -m venv "$VENV"
        rm -f "$VENV/.req-stamp"
    fi

    local want have=""
    want="$(sha256sum "$REQ" | cut -d' ' -f1)"
    [[ -f "$VENV/.req-stamp" ]] && have="$(cat "$VENV/.req-stamp")"
    if [[ "$want" == "$have" ]]; then
        say "python packages: up to date"
    else
        say "installing python packages (requirements-dev.txt)"
        "$VENV/bin/python" -m pip install --quiet --upgrade pip
        "$VENV/bin/python" -m pip install --quiet -r "$REQ"
        printf '%s\n' "$want" >"$VENV/.req-stamp"
    fi
}

# ------------------------------------------------------------------------- build
build_all() {
    if [[ "${PATIO_SKIP_BUILD:-0}" == "1" ]]; then
        say "skipping build (PATIO_SKIP_BUILD=1)"
        return
    fi
    # Build everything against the venv interpreter so cargo and maturin agree on pyo3's config.
    export VIRTUAL_ENV="$VENV"
    export PATH="$VENV/bin:$PATH"
    export PYO3_PYTHON="$VENV/bin/python"

    local locked=()
    [[ -f "$REPO/Cargo.lock" ]] && locked=(--locked)
    local crates=(-p patio-cli -p patio-layout -p patio-reorg -p patio-prefetch)
    say "building patio CLI and the C libraries (cargo build --release${locked[*]:+ ${locked[*]}} ${crates[*]})"
    cargo build --release "${locked[@]}" "${crates[@]}"

    local target_dir="${CARGO_TARGET_DIR:-$REPO/target}"
    [[ -x "$target_dir/release/patio" ]] || die "expected binary $target_dir/release/patio not found after build"
    ln -sfn "$target_dir/release/patio" "$VENV/bin/patio"
    say "linked $VENV/bin/patio -> $target_dir/release/patio"

    build_tracer
    build_mpiio "$target_dir"
    bash "$REPO/scripts/hdf5.sh"
    build_vol "$target_dir"

    # maturin develop always recompiles the cdylib and re-runs pip, so skip it when nothing
    # it depends on changed since the last successful run (PATIO_FORCE_BUILD=1 forces it).
    local stamp="$VENV/.native-stamp" want have=""
    want="$(native_fingerprint)"
    [[ -f "$stamp" ]] && have="$(cat "$stamp")"
    if [[ "${PATIO_FORCE_BUILD:-0}" != "1" && "$want" == "$have" ]] \
        && compgen -G "$REPO/python/patio/_native*.so" >/dev/null \
        && "$VENV/bin/python" -c 'import patio._native' >/dev/null 2>&1; then
        say "python extension patio._native: up to date"
        return
    fi
    say "building python extension patio._native (maturin develop --release)"
    rm -f "$stamp"
    # pyproject.toml names the wheel's data directory, which scripts/wheel.sh fills and
    # empties again under the same lock; a development install takes nothing from it (the
    # venv links the build instead), so it runs while the directory is empty.
    mkdir -p "$REPO/target"
    (
        flock 9
        rm -rf "$REPO/target/wheel-data" && mkdir -p "$REPO/target/wheel-data"
        maturin develop --release -m crates/patio-py/Cargo.toml
    ) 9>"$REPO/target/wheel-data.lock"
    printf '%s\n' "$want" >"$stamp"
}

# The LD_PRELOAD tracer: make rebuilds it only when its source changed; the installed copy
# is replaced only when it differs.
build_tracer() {
    make -s -C "$REPO/capture"
    install_if_changed "$REPO/capture/libpatio_trace.so" "$VENV/lib/patio/libpatio_trace.so"
}

# The MPI-IO layer and the library of reorganized files it loads from its own directory.
build_mpiio() {
    local target_dir="$1"
    make -s -C "$REPO/mpiio"
    install_if_changed "$target_dir/release/libpatio_reorg.so" "$VENV/lib/patio/libpatio_reorg.so"
    install_if_changed "$target_dir/release/libpatio_prefetch.so" "$VENV/lib/patio/libpatio_prefetch.so"
    install_if_changed "$REPO/mpiio/libpatio_mpiio.so" "$VENV/lib/patio/libpatio_mpiio.so"
}

# The VOL connector, alone in its plugin directory (HDF5 loads every library there), and
# the layout core it loads from the directory above.
build_vol() {
    local target_dir="$1"
    make -s -C "$REPO/vol" HDF5="$VENV/lib/patio/hdf5-2.2.0"
    install_if_changed "$target_dir/release/libpatio_layout.so" "$VENV/lib/patio/libpatio_layout.so"
    install_if_changed "$REPO/vol/libpatio_vol.so" "$VENV/lib/patio/vol/libpatio_vol.so"
}

install_if_changed() {
    local lib="$1" dest="$2"
    if cmp -s "$lib" "$dest"; then
        say "$dest: up to date"
    else
        install -D -m 0755 "$lib" "$dest"
        say "installed $dest"
    fi
}

# Hash of everything the extension build depends on: Rust sources and manifests, the lock
# file, pyproject.toml, the compiler and the interpreter.
native_fingerprint() {
    {
        find crates -type f -not -path '*/target/*' -print0 \
            | sort -z | xargs -0 -r sha256sum
        local f
        for f in Cargo.toml Cargo.lock pyproject.toml rust-toolchain rust-toolchain.toml; do
            [[ -f "$f" ]] && sha256sum "$f"
        done
        rustc -vV
        "$VENV/bin/python" -VV
    } | sha256sum | cut -d' ' -f1
}

install_system_packages
install_rust
setup_venv
build_all
say "setup complete (activate with: source .venv/bin/activate)"
