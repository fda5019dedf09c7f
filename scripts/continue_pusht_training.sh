#!/usr/bin/env bash
# Continue training the bundled PushT world model and write the result back (or to DEST).
#
# The same script serves a CPU session and a GPU burst: the dynamics stage starts from every
# weight of the bundled checkpoint (`iws train --init-from pusht`) and trains on its own fed-back
# samples from the first step, then the decoder is fine-tuned on the new dynamics' latents; each
# stage stops at its time budget (learning rate annealed to fit) and exports. Rerunning with the
# same RUN directory resumes where it stopped. Training data is collected first if missing.
#
#   scripts/continue_pusht_training.sh                                   # CPU, ~35 min
#   DEVICE=cuda BATCH=64 DYN_MIN=8 FT_MIN=2 scripts/continue_pusht_training.sh   # GPU burst
#   RECIPE=experiments/recipes/control.json scripts/continue_pusht_training.sh   # another recipe
#   FROM=runs/some_run/model scripts/continue_pusht_training.sh runs/out   # continue another checkpoint
#
# Then measure it: scripts/report_pusht_model.sh, and update docs/models/pusht.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
DEVICE="${DEVICE:-cpu}"
THREADS="${THREADS:-1}"          # torch CPU threads (1 is steadiest on a shared 2-core box)
BATCH="${BATCH:-4}"              # dynamics windows per step (4 on CPU; 32-64 on a GPU)
DYN_STEPS="${DYN_STEPS:-6000}"   # schedule length of the continued dynamics stage
DYN_MIN="${DYN_MIN:-30}"         # time budgets, minutes
FT_STEPS="${FT_STEPS:-1000}"
FT_MIN="${FT_MIN:-5}"
DATA="${DATA:-data/pusht_train.zarr}"
RUN="${RUN:-runs/pusht_continue}"
RECIPE="${RECIPE:-experiments/recipes/recipeA_lowlr.json}"  # "" = the checkpoint's own recipe
FROM="${FROM:-pusht}"            # the checkpoint to continue: a bundled name or a directory
DEST="${1:-sim_model/bundled/pusht}"

if [ ! -e "$DATA" ]; then
    "$PY" -m pipeline.cli collect pusht --episodes 360 --steps 200 --out "$DATA" --seed 0 \
        --workers "${WORKERS:-2}"
fi
mkdir -p "$RUN"
# The recipe (experiments/recipes/*.json, chosen by the ablations in docs/models/pusht.md) under
# this script's schedule, batch and budget.
"$PY" scripts/recipe_config.py "$RECIPE" --dyn-steps "$DYN_STEPS" --batch "$BATCH" \
    --ft-steps "$FT_STEPS" > "$RUN/continue.json"
common=(--data "$DATA" --out "$RUN" --device "$DEVICE" --threads "$THREADS" --no-progress)
"$PY" -m pipeline.cli train --stage dynamics --init-from "$FROM" --config "$RUN/continue.json" \
    --time-limit "$DYN_MIN" "${common[@]}"
"$PY" -m pipeline.cli train --stage decoder-finetune --config "$RUN/continue.json" \
    --time-limit "$FT_MIN" "${common[@]}"
mkdir -p "$DEST"
# Weights first, config last: a reader never sees a new config beside old weights.
cp "$RUN/model/model.safetensors" "$DEST/model.safetensors.tmp" && mv "$DEST/model.safetensors.tmp" "$DEST/model.safetensors"
cp "$RUN/model/config.json" "$DEST/config.json.tmp" && mv "$DEST/config.json.tmp" "$DEST/config.json"
echo "continued model written to $DEST"
