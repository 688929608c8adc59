#!/usr/bin/env bash
# The wheel carries the built labextension: installed where no Node exists, JupyterLab lists it
# "enabled OK". Usage: check-wheel.sh PYTHON (a Python with jupyterlab installed, e.g. .venv/bin/python).
#
# Builds the wheel (hatch runs jlpm here, where Node is), installs it with --no-deps into a fresh
# venv whose PATH holds nothing but that venv's bin (no node, no npm), and borrows PYTHON's
# site-packages through a .pth for jupyterlab and the dependencies instead of downloading them.
set -euo pipefail
# Absolute, but not resolved: a venv's python is a symlink to the base interpreter.
python="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" "$root"
wheel=$(ls "$work"/dist/gpu_notebook-*.whl)

"$python" -m venv --without-pip "$work/venv"
borrowed=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# Only jupyterlab and the dependencies come from there: the borrowed folder's own .pth files (an
# editable gpu-notebook) are not run, and the venv's site-packages comes first on sys.path.
echo "$borrowed" > "$site/borrowed.pth"
"$python" -m pip --python "$work/venv/bin/python" install --quiet --no-deps --no-index "$wheel"

clean_path="$work/venv/bin"
if env PATH="$clean_path" sh -c 'command -v node || command -v npm' >/dev/null 2>&1; then
  echo "check-wheel: node or npm is on the clean PATH; the check would prove nothing" >&2
  exit 1
fi
listing=$(cd "$work" && env -i HOME="$work" PATH="$clean_path" NO_COLOR=1 \
  "$work/venv/bin/python" -m jupyterlab.labextensions list 2>&1 || true)
location=$(cd "$work" && env -i HOME="$work" PATH="$clean_path" \
  "$work/venv/bin/python" -c 'import gpu_notebook; print(gpu_notebook.__file__)' 2>&1 || true)
case "$location" in
  "$work"/venv/*) ;;
  *) echo "check-wheel: gpu_notebook came from $location, not from the wheel" >&2; exit 1 ;;
esac
line=$(printf '%s\n' "$listing" | sed 's/\x1b\[[0-9;]*m//g' | grep 'gpu-notebook' || true)
if ! printf '%s\n' "$line" | grep -Eq "gpu-notebook v[^ ]+ enabled +OK" \
  || ! printf '%s\n' "$listing" | grep -q "$work/venv/share/jupyter/labextensions"; then
  printf 'check-wheel: gpu-notebook is not listed "enabled OK" from the wheel:\n%s\n' "$listing" >&2
  exit 1
fi
echo "check-wheel: $(basename "$wheel") without Node: $line"
