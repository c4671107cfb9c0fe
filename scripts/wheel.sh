#!/usr/bin/env bash
# Builds the one patio wheel, dist/patio_io-VERSION-*.whl, that installs everything a user
# needs into any Python environment (`pip install dist/patio_io-*.whl`):
#   bin/patio                      the command-line tool (a wheel script)
#   site-packages/patio/           the Python package with the patio._native extension
#   lib/patio/libpatio_trace.so    the LD_PRELOAD tracer `patio trace` uses
#   lib/patio/libpatio_layout.so   the layout core's C ABI
#   lib/patio/libpatio_reorg.so    the C ABI of reorganized files
#   lib/patio/libpatio_prefetch.so the prefetch engine's C ABI
#   lib/patio/libpatio_mpiio.so    the MPI-IO layer (`patio run --mpiio`)
#   lib/patio/vol/libpatio_vol.so  the HDF5 VOL connector (`patio run --hdf5`)
#   lib/patio/hdf5-VERSION/        the HDF5 with VOL support it is built for (scripts/hdf5.sh),
#                                  which programs are built and run against
#   include/patio/patio_layout.h, patio_reorg.h, patio_prefetch.h   their headers
# The binary finds the interpreter, the tracer and the package relative to where it is
# installed (crates/patio-cli/src/install.rs). Run on a fresh machine: it sets up first.
#
# Usage: bash scripts/wheel.sh [OUT_DIR]        (default: dist/)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(realpath -m "${1:-$REPO/dist}")"
cd "$REPO"

bash "$REPO/scripts/setup.sh"

# shellcheck source=scripts/env.sh
. "$REPO/scripts/env.sh"

target_dir="${CARGO_TARGET_DIR:-$REPO/target}"
# The wheel's data directory ([tool.maturin] data in pyproject.toml): its scripts/ go to
# the environment's bin/, its data/ to the environment's prefix. It is filled, built from
# and emptied again under a lock that setup.sh's `maturin develop` takes too (a development
# install must see it empty).
stage="$REPO/target/wheel-data"
exec 9>"$REPO/target/wheel-data.lock"
flock 9
trap 'rm -rf "$stage" && mkdir -p "$stage"' EXIT
rm -rf "$stage"
install -d "$stage/scripts" "$stage/data/lib/patio" "$stage/data/include/patio"
objcopy --strip-debug "$target_dir/release/patio" "$stage/scripts/patio"
objcopy --strip-debug "$target_dir/release/libpatio_layout.so" "$stage/data/lib/patio/libpatio_layout.so"
objcopy --strip-debug "$target_dir/release/libpatio_reorg.so" "$stage/data/lib/patio/libpatio_reorg.so"
objcopy --strip-debug "$target_dir/release/libpatio_prefetch.so" "$stage/data/lib/patio/libpatio_prefetch.so"
install -m 0755 "$REPO/capture/libpatio_trace.so" "$stage/data/lib/patio/libpatio_trace.so"
install -m 0755 "$REPO/mpiio/libpatio_mpiio.so" "$stage/data/lib/patio/libpatio_mpiio.so"
install -d "$stage/data/lib/patio/vol"
install -m 0755 "$REPO/vol/libpatio_vol.so" "$stage/data/lib/patio/vol/libpatio_vol.so"
hdf5_dir="$(find "$VIRTUAL_ENV/lib/patio" -maxdepth 1 -name 'hdf5-*' -type d | sort | tail -n 1)"
[[ -f "$hdf5_dir/.complete" ]] || { echo "wheel.sh: error: no complete HDF5 build in $VIRTUAL_ENV/lib/patio" >&2; exit 1; }
cp -a "$hdf5_dir" "$stage/data/lib/patio/"
install -m 0644 "$REPO/crates/patio-layout/include/patio_layout.h" \
    "$REPO/crates/patio-reorg/include/patio_reorg.h" \
    "$REPO/crates/patio-prefetch/include/patio_prefetch.h" "$stage/data/include/patio/"
chmod 0755 "$stage/scripts/patio"

install -d "$OUT"
rm -f "$OUT"/patio_io-*.whl
maturin build --release --strip --out "$OUT"
ls -l "$OUT"/patio_io-*.whl
