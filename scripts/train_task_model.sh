#!/usr/bin/env bash
# Train a task's world model from scratch on a modest budget: PushT's chosen recipe
# (experiments/recipes/recipeA.json: regression head, recency input, 3-deep fed-back context) on
# the task's scripted play from `iws collect TASK`, each stage stopped at its time limit (learning
# rate annealed to fit). Rerunning with the same RUN resumes. About an hour at one thread.
#
#   scripts/train_task_model.sh rope                    # -> runs/rope/model
#   AE_MIN=5 DYN_MIN=10 FT_MIN=2 scripts/train_task_model.sh rope   # a quicker look
#   CONFIG=experiments/recipes/recipeA_mug.json scripts/train_task_model.sh mug   # another recipe
set -euo pipefail
cd "$(dirname "$0")/.."
TASK="${1:?usage: scripts/train_task_model.sh TASK (e.g. sweep, rope)}"
PY="${PYTHON:-.venv/bin/python}"
DATA="${DATA:-data/${TASK}_train.zarr}"
RUN="${RUN:-runs/${TASK}}"
AE_MIN="${AE_MIN:-15}"
DYN_MIN="${DYN_MIN:-40}"
FT_MIN="${FT_MIN:-5}"
THREADS="${THREADS:-1}"
CONFIG="${CONFIG:-experiments/recipes/recipeA.json}"
EPISODES="${EPISODES:-200}"
if [ ! -e "$DATA" ]; then
    "$PY" -m pipeline.cli collect "$TASK" --episodes "$EPISODES" --steps 200 --out "$DATA" --seed 0 --no-progress
fi
mkdir -p "$RUN"
common=(--data "$DATA" --out "$RUN" --threads "$THREADS" --no-progress)
"$PY" -m pipeline.cli train --stage autoencoder --preset small --config "$CONFIG" \
    --steps 4000 --time-limit "$AE_MIN" "${common[@]}"
"$PY" -m pipeline.cli train --stage dynamics --time-limit "$DYN_MIN" "${common[@]}"
"$PY" -m pipeline.cli train --stage decoder-finetune --time-limit "$FT_MIN" "${common[@]}"
echo "$TASK model: $RUN/model"
