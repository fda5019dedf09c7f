#!/usr/bin/env bash
# The sweep model's report (docs/models/sweep.md): scripts/report_task_model.sh for sweep —
# fidelity per horizon beside repeating the first frame (PSNR/SSIM per camera, in-goal error,
# mass conservation, cross-view consistency) and a 2,000-step stability rollout.
#
#   scripts/report_sweep_model.sh [MODEL] [OUTDIR]     # defaults: sweep (bundled), docs/models/sweep
exec "$(dirname "$0")/report_task_model.sh" sweep "$@"
