#!/usr/bin/env bash
# `make test` and CI (.ci/run): install whatever is missing, then run the tests. Arguments go to
# pytest (e.g. scripts/test.sh tests/pipeline -k export).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/pytest -q "$@"
