"""The learning curve takes its points from ablation reports and checkpoint provenance."""

from __future__ import annotations

import json
from pathlib import Path

from experiments import learning_curve as lc


def _report(path: Path, checkpoint: Path) -> Path:
    arm = {"name": "a", "checkpoint": str(checkpoint), "checkpoint_hash": "h1",
           "horizons": [{"horizon": 50, "t_iou": {"mean": 0.4, "low": 0.3, "high": 0.5, "n": 3}}],
           "long": {"shape": {"mean": 0.55, "low": 0.5, "high": 0.6, "n": 3}}}
    path.write_text(json.dumps({"arms": [arm]}))
    return path


def test_points_accumulate_and_replace_by_checkpoint(tmp_path: Path, tiny_checkpoint: Path) -> None:
    report, curve = _report(tmp_path / "r.json", tiny_checkpoint), tmp_path / "curve.json"
    args = ["--curve", str(curve), "add", "--report", str(report), "--arm", "a", "--recipe", "A",
            "--checkpoint", str(tiny_checkpoint)]
    assert lc.main(args) == 0 and lc.main(args) == 0  # the same checkpoint twice: one point
    points = lc.load(curve)
    assert len(points) == 1 and points[0].t_iou_50 == 0.4 and points[0].long_shape == 0.55
    assert points[0].hours == 0.0  # a random checkpoint has no training stages
    assert (tmp_path / "curve.png").stat().st_size > 1000


def test_gpu_minutes_stay_off_the_cpu_axis_and_a_checkpoint_can_start_a_second_line(
        tmp_path: Path, tiny_checkpoint: Path) -> None:
    report, curve = _report(tmp_path / "r.json", tiny_checkpoint), tmp_path / "curve.json"
    base = ["--curve", str(curve), "add", "--report", str(report), "--arm", "a",
            "--checkpoint", str(tiny_checkpoint)]
    assert lc.main([*base, "--recipe", "CPU"]) == 0
    assert lc.main([*base, "--recipe", "GPU", "--gpu-minutes", "6"]) == 0
    points = {p.recipe: p for p in lc.load(curve)}
    assert set(points) == {"CPU", "GPU"}  # same checkpoint, two lines
    assert points["CPU"].gpu_minutes == 0.0 and points["GPU"].gpu_minutes == 6.0
    assert points["GPU"].hours == points["CPU"].hours - 0.1  # 6 GPU-minutes are not CPU-hours


def test_a_checkpoint_scored_on_both_held_out_sets_has_a_point_on_each(
        tmp_path: Path, tiny_checkpoint: Path) -> None:
    curve = tmp_path / "curve.json"
    for name, data in (("dev.json", "data/pusht_ablation.zarr"), ("contact.json", "data/pusht_contact_heldout.zarr")):
        report = _report(tmp_path / name, tiny_checkpoint)
        report.write_text(json.dumps({**json.loads(report.read_text()), "data": data}))
        assert lc.main(["--curve", str(curve), "add", "--report", str(report), "--arm", "a",
                        "--recipe", "A", "--checkpoint", str(tiny_checkpoint)]) == 0
    assert sorted(p.heldout for p in lc.load(curve)) == ["ablation", "contact"]
