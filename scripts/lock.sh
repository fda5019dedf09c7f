#!/usr/bin/env bash
# Refresh requirements/constraints.txt, the lock that scripts/setup.sh (so `make demo`, `make
# test` and .ci/run) and infra/docker/Dockerfile install with. `make lock` runs it.
#
#   scripts/lock.sh         resolve afresh: the newest versions pyproject.toml admits, installed
#                           into a throwaway venv (needs PyPI, ~5 minutes), checked, then frozen
#   scripts/lock.sh VENV    freeze the environment VENV as it is (e.g. .venv after a pip install)
#
# Then run `make test`: set-up sees the new lock and brings .venv to it before the tests run.
# The lock pins every distribution in iws[test]'s dependency tree for CPython 3.11 on Linux
# x86_64 (where torch pulls in the nvidia-* CUDA wheels). It leaves out iws itself and
# opencv-python, which requirements/opencv-python stands in for.
set -euo pipefail
cd "$(dirname "$0")/.."
LOCK=requirements/constraints.txt

if [ $# -ge 1 ]; then
    venv="$1"
else
    PYTHON="${PYTHON:-python3.11}"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    venv="$work/venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q ./requirements/opencv-python -e ".[test,rope,sweep,mug]"
fi
"$venv/bin/pip" check
"$venv/bin/python" scripts/check_env.py
{
    echo "# The lock: every distribution iws[test] and the task extras install, pinned. Refresh with \`make lock\`"
    echo "# (scripts/lock.sh says how). Used as pip constraints (-c) by scripts/setup.sh and"
    echo "# infra/docker/Dockerfile. CPython 3.11, Linux x86_64."
    "$venv/bin/pip" freeze --all --exclude-editable | grep -v -i -E '^(iws|opencv-python)( |=|@)'
} > "$LOCK.tmp"
mv "$LOCK.tmp" "$LOCK"
echo "lock: wrote $LOCK ($(grep -c '==' "$LOCK") pins)"
