"""The scorer calibration picks a scorer on some families and judges it on the others."""

import json
import subprocess
import sys

import numpy as np

from experiments.ranking_calibration import report


def _scores(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    rows = []
    for family in ("scripted", "act", "diffusion"):
        for level in (0.2, 0.5, 0.8):
            real = np.clip(level + rng.normal(0, 0.05, 8), 0, 1)
            rows.append({"name": f"{family}-{level}", "family": family, "real": real.tolist(),
                         "model": {"tracks": (0.5 * real + 0.1).tolist(), "inverted": (1 - real).tolist()}})
    return {"starts": [], "policies": rows}


def test_the_scorer_that_tracks_is_chosen_and_judged_on_held_out_families():
    text, data = report(_scores(), {"scripted", "act"}, {"diffusion"}, seed=0, resamples=200)
    assert data["chosen"] == "tracks"
    held = data["scorers"]["tracks"]["held_out"]
    assert held["policies"] == 3 and held["spearman"]["value"] == 1.0 and held["regret"]["value"] == 0.0
    assert data["scorers"]["inverted"]["tune"]["spearman"]["value"] < 0
    assert "| scripted-0.8 | scripted |" in text


def test_overlapping_halves_are_refused(tmp_path):
    path = tmp_path / "scores.json"
    path.write_text(json.dumps(_scores()))
    run = subprocess.run([sys.executable, "-m", "experiments.ranking_calibration", str(path), "--tune", "act",
                          "--held-out", "act,diffusion"], capture_output=True, text=True)
    assert run.returncode == 2 and "share ['act']" in run.stderr
