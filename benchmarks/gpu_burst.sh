#!/usr/bin/env bash
# The GPU measurements, in one short run on a lent GPU machine (a few minutes in all).
#
#   bash benchmarks/gpu_burst.sh            # from the repository root; PYTHON=... to pick an interpreter,
#                                           # PRESET_S=... seconds per preset (default 240)
#
# Inference (issue 17): WorldModel.step on CUDA, presets small and paper, batch 1/8/64/256,
# eager vs torch.compile vs CUDA graphs, each row with its fraction of the bf16 matmul rate
# measured in the same process -> benchmarks/results/gpu.md. Each preset runs on its own
# with a time limit, so a slow compile loses one table, not the run; rows also go to the
# terminal as they are measured.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
RESULTS=benchmarks/results
mkdir -p "$RESULTS"

"$PYTHON" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name())" || exit 1

for preset in small paper; do
  timeout "${PRESET_S:-240}" "$PYTHON" benchmarks/bench_model.py --device cuda --presets "$preset" \
    --batches 1 8 64 256 --precisions bf16 --compile off on cudagraphs --seconds 2 --max-step 5 \
    --write "$RESULTS/gpu_model_$preset.md" \
    || echo "bench_model $preset stopped early (exit $?); rows above are what was measured"
done
{ echo "# GPU measurements (benchmarks/gpu_burst.sh)"; echo
  for preset in small paper; do
    [ -f "$RESULTS/gpu_model_$preset.md" ] && { sed 's/^# /## /' "$RESULTS/gpu_model_$preset.md"; echo; }
  done
} > "$RESULTS/gpu.md"
rm -f "$RESULTS"/gpu_model_*.md
echo "wrote $RESULTS/gpu.md"
