#!/usr/bin/env bash
# The Python package: builds the extension with maturin into a wheel, installs it in a venv
# (.venv-python, made on first use) with NumPy, scikit-image and pytest from PyPI, and runs
# python/tests, which compare every function with scikit-image on the real images.
#
#   scripts/test-python.sh [pytest args]
#
# The wheel is built with Cargo's dev profile (opt-level 1, dependencies at 2) into target/:
# after `cargo test` only the extension crate and the library without the viewer are compiled.
# The video tests compare morphoscope.open with `morphoscope run`: the binary is built the same
# way (no viewer, so it links the library the wheel was built with) and passed as
# MORPHOSCOPE_BIN.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
venv="$root/.venv-python"
py="$venv/bin/python"
if [ ! -x "$py" ]; then
  python3 -m venv "$venv"
fi
"$py" -m pip install -q --upgrade pip
"$py" -m pip install -q "maturin>=1.9.4,<2" numpy scikit-image pytest
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
echo "== Python package: maturin build (dev profile)"
"$venv/bin/maturin" build --profile dev \
  --interpreter "$py" --out "$wheels"
"$py" -m pip install -q --force-reinstall --no-deps "$wheels"/morphoscope-*.whl
echo "== morphoscope binary (dev profile, no viewer) for the video tests"
cargo build -q --no-default-features --bin morphoscope
target=$(cargo metadata --format-version 1 --no-deps | "$py" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
export MORPHOSCOPE_BIN="$target/debug/morphoscope"
echo "== Python package: pytest against scikit-image and morphoscope run"
set +e
"$py" -m pytest -q -p no:cacheprovider python/tests "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test-python: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
