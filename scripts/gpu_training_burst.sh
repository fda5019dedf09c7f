#!/usr/bin/env bash
# A world-model training burst on a lent GPU machine: continue the bundled PushT checkpoint with
# the chosen recipe for a fixed number of minutes, copying each stage's model out as soon as it
# exists (a run cut short still returns the dynamics model). Run from the repository root.
#
#   DEST=$OUT bash scripts/gpu_training_burst.sh
#
# The device machine has torch but not zarr or pydantic: install the project's wheels first
# (docs/models/pusht.md, "Training on a lent GPU"). The training data travels as a recompressed
# copy of data/pusht_train.zarr (zstd 19, one episode per chunk: 12 MB instead of 38 MB; the
# frames are identical and so is the data hash the checkpoint records).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
FROM="${FROM:-pusht}"            # the bundled model, or a checkpoint directory
DATA="${DATA:-.gpudata/pusht_train.zarr}"
RUN="${RUN:-runs/gpu_burst}"
DEST="${DEST:?DEST= the folder the models are copied to}"
DYN_MIN="${DYN_MIN:-5.5}"        # minutes of dynamics training (learning rate annealed to fit)
FT_MIN="${FT_MIN:-1.5}"          # minutes of decoder fine-tuning on the new dynamics' latents
BATCH="${BATCH:-64}"
DEVICE="${DEVICE:-cuda}"        # cpu: a dry run of this script on a machine without one
RECIPE="${RECIPE:-experiments/recipes/recipeA_lowlr.json}"
mkdir -p "$RUN" "$DEST"
if [ "$DEVICE" = cuda ]; then
    "$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name())" || exit 1
fi
# The recipe with a schedule long enough that the time limit, not the step count, ends each stage.
"$PY" scripts/recipe_config.py "$RECIPE" --dyn-steps 200000 --batch "$BATCH" --ft-steps 200000 \
    > "$RUN/burst.json" || exit 1
common=(--data "$DATA" --out "$RUN" --device "$DEVICE" --threads "${THREADS:-8}" --no-progress)
"$PY" -m pipeline.cli train --stage dynamics --init-from "$FROM" --config "$RUN/burst.json" \
    --time-limit "$DYN_MIN" "${common[@]}" || exit 1
mkdir -p "$DEST/dyn" && cp "$RUN/model/model.safetensors" "$RUN/model/config.json" "$DEST/dyn/"
cp "$RUN/dynamics/metrics.jsonl" "$DEST/dyn_metrics.jsonl"
"$PY" -m pipeline.cli train --stage decoder-finetune --config "$RUN/burst.json" \
    --time-limit "$FT_MIN" "${common[@]}" || exit 1
mkdir -p "$DEST/model" && cp "$RUN/model/model.safetensors" "$RUN/model/config.json" "$DEST/model/"
cp "$RUN/decoder-finetune/metrics.jsonl" "$DEST/ft_metrics.jsonl"
echo "burst done: $DEST/dyn (dynamics only), $DEST/model (with the fine-tuned decoder)"
