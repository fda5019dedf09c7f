#!/usr/bin/env bash
# Carry an unfinished training arm across machines: a session's runs/ does not survive, so an
# arm that needs more than one session commits its resumable state (weights, AdamW moments,
# step, RNG: safetensors + JSON) and the next session restores it and reruns the same
# `iws train` command, which resumes exactly where the state left off.
#
#   scripts/arm_state.sh save    runs/r18c experiments/checkpoints/round18_r18c   # before stopping
#   scripts/arm_state.sh restore experiments/checkpoints/round18_r18c runs/r18c   # on the next machine
#
# Stop the arm before saving (a running trainer swaps its state folder at every checkpoint); what
# is saved is its last checkpoint (every checkpoint_every steps): stop it just after one.
# STAGE (default dynamics) picks the stage folder. Restoring refuses to overwrite a run folder
# that already has state (that state would be newer or another run's).
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE="${STAGE:-dynamics}"
case "${1:-}" in
save)
    run="$2"; dest="$3"
    [ -f "$run/$STAGE/state/trainer.json" ] || { echo "no training state in $run/$STAGE/state" >&2; exit 2; }
    rm -rf "$dest.tmp"; mkdir -p "$dest.tmp/$STAGE"
    cp "$run/train_config.json" "$dest.tmp/"
    cp -r "$run/$STAGE/state" "$dest.tmp/$STAGE/"
    cp "$run/$STAGE/metrics.jsonl" "$dest.tmp/$STAGE/" 2>/dev/null || true
    rm -rf "$dest"; mv "$dest.tmp" "$dest"
    echo "saved $run ($STAGE at step $(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['step'])" "$dest/$STAGE/state/trainer.json")) to $dest"
    ;;
restore)
    src="$2"; run="$3"
    [ -f "$src/$STAGE/state/trainer.json" ] || { echo "no saved state in $src/$STAGE/state" >&2; exit 2; }
    if [ -e "$run/$STAGE/state" ]; then
        echo "$run/$STAGE/state exists: resume that run as it is, or move it aside first" >&2; exit 2
    fi
    mkdir -p "$run/$STAGE"
    cp "$src/train_config.json" "$run/"
    cp -r "$src/$STAGE/state" "$run/$STAGE/"
    cp "$src/$STAGE/metrics.jsonl" "$run/$STAGE/" 2>/dev/null || true
    echo "restored $src into $run: rerun its iws train command to resume"
    ;;
*)
    echo "usage: scripts/arm_state.sh save RUN DEST | restore SRC RUN" >&2; exit 2
    ;;
esac
