#!/usr/bin/env bash
# `make demo`: install whatever is missing, then the README's main job (32 synthetic PushT
# demonstrations from the bundled model, local Ray, CPU). Arguments go to `iws generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/iws generate examples/pusht_generate.yaml "$@"
