#!/usr/bin/env bash
# Install everything iws needs on a fresh Debian/Ubuntu machine: system packages
# (ffmpeg for video decoding, chromium for the teleop browser test) and a Python 3.11
# virtual environment at .venv with the package and its test tools.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if command -v apt-get >/dev/null 2>&1; then
    missing=""
    command -v ffmpeg >/dev/null 2>&1 || missing="$missing ffmpeg"
    command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
    if [ -n "$missing" ]; then
        echo "setup: installing system packages:$missing"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
    fi
else
    echo "setup: no apt-get here; install ffmpeg (and chromium for the teleop test) yourself" >&2
fi

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), "iws needs Python 3.11 (lerobot 0.4.4)"'
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e ".[test]"
echo "setup: done. Activate with: source .venv/bin/activate"
