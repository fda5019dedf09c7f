#!/usr/bin/env bash
# Install whatever iws needs and is missing on a Debian/Ubuntu machine: system packages (ffmpeg
# for video decoding, chromium for the teleop browser test) and a Python 3.11 virtual
# environment at .venv holding the package and its test tools at the versions of the lock,
# requirements/constraints.txt. `make demo` and `make test` (and so .ci/run) call it first.
#
# Idempotent and quick when nothing changed: the venv is (re)synced only when pyproject.toml, the
# lock, the OpenCV stand-in or this script differ from what the last successful run installed
# (hash in .venv/.iws-setup). IWS_SETUP_FORCE=1 resyncs anyway.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
missing=""
command -v ffmpeg >/dev/null 2>&1 || missing="$missing ffmpeg"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
# OSMesa: MuJoCo's offscreen rendering for the mug task (iws[mug]).
compgen -G "/usr/lib/*/libOSMesa.so*" >/dev/null || missing="$missing libosmesa6"
if [ -n "$missing" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing system packages:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
elif [ -n "$missing" ]; then
    echo "setup: no apt-get here; install$missing yourself (chromium only for the teleop test, libosmesa6 for the mug task)" >&2
fi

LOCK=requirements/constraints.txt
STAMP=.venv/.iws-setup
digest="$(cat pyproject.toml "$LOCK" requirements/opencv-python/pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ -z "${IWS_SETUP_FORCE:-}" ] && [ -x .venv/bin/iws ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$digest" ]; then
    exit 0  # .venv already holds exactly this
fi

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), "iws needs Python 3.11 (lerobot 0.4.4)"'
if [ ! -x .venv/bin/python ]; then
    if ! "$PYTHON" -c 'import ensurepip' 2>/dev/null && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing python3.11-venv"  # Debian/Ubuntu ship venv's pip separately
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3.11-venv >/dev/null
    fi
    "$PYTHON" -m venv .venv
fi
echo "setup: installing into .venv the versions in $LOCK (a few minutes the first time)"
.venv/bin/pip install -q -c "$LOCK" --upgrade pip
# requirements/opencv-python stands in for gym-pusht's opencv-python, so that the only cv2 is
# lerobot's opencv-python-headless (the file says why).
.venv/bin/pip install -q -c "$LOCK" ./requirements/opencv-python -e ".[test,rope,sweep,mug]"
# A venv made before the stand-in held the real opencv-python; replacing it just now deleted
# cv2/ files that opencv-python-headless shares with it. Put them back.
.venv/bin/python -c "import cv2" 2>/dev/null \
    || .venv/bin/pip install -q -c "$LOCK" --force-reinstall --no-deps opencv-python-headless
.venv/bin/python scripts/check_env.py
echo "$digest" > "$STAMP"
echo "setup: done. Activate with: source .venv/bin/activate"
