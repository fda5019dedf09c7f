#!/usr/bin/env bash
# Train the sweep world model (issue 18) from scratch on a modest budget: scripts/train_task_model.sh
# for the sweep task (its data and time limits: DATA, RUN, AE_MIN, DYN_MIN, FT_MIN, THREADS).
#
#   scripts/train_sweep_model.sh                       # -> runs/sweep/model
#   AE_MIN=5 DYN_MIN=10 FT_MIN=2 scripts/train_sweep_model.sh   # a quicker look
exec "$(dirname "$0")/train_task_model.sh" sweep
