#!/usr/bin/env bash
# pip_install.sh: the Python package installed as docs/python.md says (CTest python_pip_install, label
# python): a virtual environment with --system-site-packages, `pip install --no-build-isolation .` from a
# copy of the checkout, then, from another folder, `import itertime` (its __version__ the command's, its
# docstrings), a prediction, and `python -m itertime --version`. The build reuses BUILD_DIR (setup.py's
# ITERTIME_BUILD_DIR), so it costs an install, not a build. Skipped (77, with the reason) where python3's
# venv or pip is missing (launcher/scripts/setup-debian.sh installs python3-venv and python3-pip).
#
#   pip_install.sh PYTHON3 SOURCE_DIR BUILD_DIR ITERTIME
set -euo pipefail
PYTHON3="$1" SOURCE_DIR="$2" BUILD_DIR="$3" ITERTIME="$4"
"$PYTHON3" -c 'import venv, ensurepip' 2>/dev/null ||
  { echo "skipped: $PYTHON3 has no venv/ensurepip (apt-get install python3-venv)"; exit 77; }
"$PYTHON3" -c 'import setuptools, wheel' 2>/dev/null ||
  { echo "skipped: $PYTHON3 has no setuptools/wheel (apt-get install python3-setuptools python3-wheel)"; exit 77; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PYTHON3" -m venv --system-site-packages "$WORK/venv"
[[ -x "$WORK/venv/bin/pip" ]] || { echo "skipped: the venv has no pip (apt-get install python3-pip)"; exit 77; }
# A copy of the tracked sources (pip builds in place: the checkout gets no build-pip/ of this test's).
mkdir "$WORK/src"
if ! (cd "$SOURCE_DIR" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$WORK/src") 2>/dev/null; then
  # Not a git checkout: everything but build folders.
  tar -C "$SOURCE_DIR" --exclude='./build' --exclude='./build-*' -cf - . | tar -C "$WORK/src" -xf -
fi
ITERTIME_BUILD_DIR="$BUILD_DIR" "$WORK/venv/bin/pip" install --no-build-isolation --no-index --quiet "$WORK/src" \
  >"$WORK/pip.log" 2>&1 || { cat "$WORK/pip.log"; echo "FAIL: pip install --no-build-isolation ."; exit 1; }
cd "$WORK"
want="$("$ITERTIME" --version)"
"$WORK/venv/bin/python" - "$want" "$SOURCE_DIR" <<'PY'
import sys
import itertime
want, source_dir = sys.argv[1:3]
assert itertime.__file__.startswith(sys.prefix), f"imported from {itertime.__file__}, not the venv {sys.prefix}"
assert itertime.__version__ and itertime.__version__ in want, (itertime.__version__, want)
assert "gbs (int)" in itertime.predict.__doc__ and "itertime predict --json" in itertime.predict.__doc__
p = itertime.predict(model=f"{source_dir}/data/models/llama3.1-8b.json", hardware="h100-sxm", framework="megatron-te",
                     dp=8, gbs=64, seq=4096, allow_implausible=True)  # over the memory: flagged, not refused
assert p["iteration_us"] > 0, p
print(f"installed itertime {itertime.__version__} at {itertime.__file__}")
PY
got="$("$WORK/venv/bin/python" -m itertime --version)"
[[ "$got" == "$want" ]] || { echo "FAIL: python -m itertime --version: '$got', the command: '$want'"; exit 1; }
echo "ok: pip install --no-build-isolation ., import itertime, python -m itertime"
