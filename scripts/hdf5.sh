#!/usr/bin/env bash
# patio — an HDF5 with VOL support (connector class version 3) for the VOL connector
# (vol/libpatio_vol.so) and the programs it is loaded into. Debian's HDF5 1.10 has no VOL,
# so the HDF5 source that crates.io carries (the `hdf5-metno-src` crate) is fetched the
# cargo way and built once with cmake (shared libraries, zlib filter, Release, no tools,
# tests, examples, Fortran or C++) into a cache keyed by its version; a later run finds
# the cache and does nothing. Called by scripts/setup.sh; may be run alone.
#
#   PATIO_HDF5_PREFIX   install directory (default: $REPO/.venv/lib/patio/hdf5-$VERSION)
#   PATIO_HDF5_JOBS     parallel build jobs (default: number of cores)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CRATE=hdf5-metno-src
CRATE_VERSION=0.10.4
HDF5_VERSION=2.2.0   # the HDF5 release inside $CRATE $CRATE_VERSION
PREFIX="${PATIO_HDF5_PREFIX:-$REPO/.venv/lib/patio/hdf5-$HDF5_VERSION}"

say() { printf '==> %s\n' "$*"; }
die() { printf 'hdf5.sh: error: %s\n' "$*" >&2; exit 1; }

if [[ -f "$PREFIX/.complete" && -f "$PREFIX/lib/libhdf5.so" ]]; then
    say "HDF5 $HDF5_VERSION (VOL): $PREFIX"
    exit 0
fi
# HDF5 2.2 needs CMake >= 3.26 (Debian 12 has 3.25): PyPI's cmake wheel, in the venv.
CMAKE=cmake
cmake_ok() { "$1" --version 2>/dev/null | awk 'NR == 1 { split($3, v, "."); exit !(v[1] > 3 || (v[1] == 3 && v[2] >= 26)) }'; }
if ! cmake_ok cmake; then
    CMAKE="$REPO/.venv/bin/cmake"
    if ! cmake_ok "$CMAKE"; then
        [[ -x "$REPO/.venv/bin/python" ]] || die "CMake >= 3.26 needed and no venv to install it into (run scripts/setup.sh)"
        say "installing CMake >= 3.26 into the venv (pip: cmake)"
        "$REPO/.venv/bin/python" -m pip install --quiet "cmake>=3.26,<4"
        cmake_ok "$CMAKE" || die "CMake >= 3.26 not available"
    fi
fi
[[ -f /usr/include/zlib.h ]] || die "zlib headers not found (apt-get install zlib1g-dev)"
# shellcheck disable=SC1091
[[ -f "$HOME/.cargo/env" ]] && . "$HOME/.cargo/env"
command -v cargo >/dev/null 2>&1 || die "cargo not found (run scripts/setup.sh)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/patio-hdf5.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# A one-dependency manifest of its own (its own workspace root) makes cargo download the
# crate into its registry cache; `cargo metadata` says where the source was unpacked.
mkdir -p "$WORK/fetch/src"
cat >"$WORK/fetch/Cargo.toml" <<TOML
[package]
name = "patio-hdf5-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
$CRATE = "=$CRATE_VERSION"

[workspace]
TOML
: >"$WORK/fetch/src/lib.rs"
say "fetching $CRATE $CRATE_VERSION (cargo fetch)"
cargo fetch --quiet --manifest-path "$WORK/fetch/Cargo.toml"
manifest="$(cargo metadata --format-version 1 --manifest-path "$WORK/fetch/Cargo.toml" \
    | python3 -c '
import json, sys
meta = json.load(sys.stdin)
print(next(p["manifest_path"] for p in meta["packages"] if p["name"] == sys.argv[1]))
' "$CRATE")"
SRC="$(dirname "$manifest")/ext/hdf5"
[[ -f "$SRC/CMakeLists.txt" ]] || die "no HDF5 source at $SRC"
grep -q "define H5_VERS_MINOR $(cut -d. -f2 <<<"$HDF5_VERSION")" "$SRC/src/H5public.h" \
    || die "$SRC is not HDF5 $HDF5_VERSION"

jobs="${PATIO_HDF5_JOBS:-$(nproc)}"
say "building HDF5 $HDF5_VERSION into $PREFIX ($jobs jobs; once)"
start=$SECONDS
"$CMAKE" -S "$SRC" -B "$WORK/build" -Wno-dev \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DBUILD_SHARED_LIBS=ON -DBUILD_STATIC_LIBS=OFF -DHDF5_ONLY_SHARED_LIBS=ON \
    -DBUILD_TESTING=OFF -DHDF5_BUILD_EXAMPLES=OFF -DHDF5_BUILD_TOOLS=OFF \
    -DHDF5_BUILD_UTILS=OFF -DHDF5_BUILD_HL_LIB=OFF -DHDF5_BUILD_FORTRAN=OFF \
    -DHDF5_BUILD_CPP_LIB=OFF -DHDF5_BUILD_JAVA=OFF -DHDF5_BUILD_DOC=OFF \
    -DHDF5_ENABLE_ZLIB_SUPPORT=ON -DHDF5_ENABLE_SZIP_SUPPORT=OFF \
    -DHDF5_ENABLE_PARALLEL=OFF -DHDF5_ALLOW_EXTERNAL_SUPPORT=NO \
    >"$WORK/cmake.log" 2>&1 || { tail -n 30 "$WORK/cmake.log" >&2; die "cmake configure failed"; }
"$CMAKE" --build "$WORK/build" --parallel "$jobs" >"$WORK/build.log" 2>&1 \
    || { tail -n 30 "$WORK/build.log" >&2; die "HDF5 build failed"; }
rm -rf "$PREFIX"
"$CMAKE" --install "$WORK/build" >"$WORK/install.log" 2>&1 \
    || { tail -n 30 "$WORK/install.log" >&2; die "HDF5 install failed"; }
[[ -f "$PREFIX/lib/libhdf5.so" ]] || die "no $PREFIX/lib/libhdf5.so after the install"
printf '%s %s %s\n' "$HDF5_VERSION" "$CRATE" "$CRATE_VERSION" >"$PREFIX/.complete"
say "HDF5 $HDF5_VERSION built in $((SECONDS - start)) s: $PREFIX"
