#!/usr/bin/env bash
# Collect every PushT store the model card's tables use (gym-pusht, 96x96, 200 steps at 10 Hz),
# skipping those already there. Which generator made which store, and who may train on it:
#
#   data/pusht_train.zarr           scripted play, seed 0        training (v1 .. v1.5)
#   data/pusht_demo.zarr            the demonstrator's pushes    training (round 16's arm)
#   data/pusht_heldout.zarr         scripted play, seed 1000     report set (development)
#   data/pusht_ablation.zarr        scripted play, seed 2000     ablation set (development)
#   data/pusht_contact_heldout.zarr aimed strikes and levers     held out: never trained on
#
# The contact-heavy held-out set comes from a generator no training set uses
# (pipeline/pusht/aimed.py: `aimed`), on seeds no other store uses.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
WORKERS="${WORKERS:-2}"
collect() {  # OUT EPISODES SEED [MIX]
    [ -e "$1" ] && return 0
    "$PY" -m pipeline.cli collect pusht --episodes "$2" --steps 200 --seed "$3" --out "$1" \
        --workers "$WORKERS" ${4:+--mix "$4"}
}
collect data/pusht_contact_heldout.zarr 30 3000 aimed=1
collect data/pusht_ablation.zarr 24 2000
collect data/pusht_heldout.zarr 40 1000
collect data/pusht_train.zarr 360 0
collect data/pusht_demo.zarr 120 4000 demo=1
