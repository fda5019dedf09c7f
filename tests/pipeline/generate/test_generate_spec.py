"""Job specs: parsing, path resolution, expansion, and every preflight error (no Ray needed)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pipeline.cli import main
from pipeline.generate import load_job
from pipeline.generate.expand import expand, groups
from pipeline.generate.outputs import claim_output
from pipeline.generate.preflight import preflight
from pipeline.pusht.features import pusht_features
from schemas import JobSpec, SpecError
from sim_model.data.store import EpisodeStore
from tests.fixtures.store import make_pusht_episode
from tests.workers.jobs import job_dict, write_job

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture
def init_images(tmp_path: Path) -> dict:
    """Three 32x32 PNG initial frames."""
    folder = tmp_path / "frames"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(folder / f"f{i}.png")
    return {"images": [str(folder / "*.png")]}


def check(tmp_path: Path, job: dict) -> None:
    preflight(load_job(write_job(tmp_path / "job.yaml", job)))


def test_example_job_validates_as_a_spec() -> None:
    spec = load_job(EXAMPLES / "pusht_generate.yaml")
    assert spec.model == "pusht"  # bundled name stays a name
    assert all(Path(p).is_absolute() for p in spec.init.images or [])
    assert len(list(Path(spec.init.images[0]).parent.glob("*.png"))) == 8


def test_a_spec_without_a_model_takes_the_first_tasks_bundled_model(tmp_path: Path) -> None:
    from pipeline.tasks.registry import default_task

    job = job_dict("unused", {"images": [str(EXAMPLES / "pusht_init" / "*.png")]}, tmp_path / "out")
    del job["model"]
    spec = load_job(write_job(tmp_path / "job.yaml", job))
    assert spec.model == default_task().bundled_model


def test_relative_paths_resolve_against_the_job_file(tmp_path: Path, tiny_checkpoint: Path) -> None:
    (tmp_path / "sub").mkdir()
    job = job_dict("model_dir/m", {"images": ["frames/*.png"]}, "out")
    spec = load_job(write_job(tmp_path / "sub" / "job.yaml", job))
    assert spec.model == str(tmp_path / "sub" / "model_dir" / "m")
    assert spec.init.images == [str(tmp_path / "sub" / "frames" / "*.png")]
    assert spec.output.path == str(tmp_path / "sub" / "out")
    assert load_job(tmp_path / "sub" / "job.yaml", output="elsewhere").output.path == str(Path.cwd() / "elsewhere")


@pytest.mark.parametrize("text, message", [
    ("name: [unclosed", "not valid YAML"),
    ("- a list", "must hold a mapping"),
])
def test_unreadable_yaml(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "job.yaml").write_text(text)
    with pytest.raises(SpecError, match=message):
        load_job(tmp_path / "job.yaml")


@pytest.mark.parametrize("change, message", [
    ({"epsiodes": 3}, "field 'epsiodes' is not a known field"),
    ({"episodes": 0}, "field 'episodes' = 0"),
    ({"init": {"images": ["a.png"], "dataset": "d.zarr"}}, "exactly one of 'dataset' or 'images'"),
    ({"action_sources": {"a": {"kind": "teleport"}}}, "action_sources.a"),
    ({"action_sources": {"a": {"kind": "replay"}}}, "field 'action_sources.a.replay.path' is required"),
    ({"device": "cuda"}, "needs resources.num_gpus > 0"),
    ({"output": {"path": "out", "lerobot_camera_keys": {"top": "image"}}},
     "output.lerobot_camera_keys"),
])
def test_invalid_fields_are_named(tmp_path: Path, change: dict, message: str) -> None:
    job = {**job_dict("m", {"images": ["x.png"]}, "out"), **change}
    with pytest.raises(SpecError, match=message.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        load_job(write_job(tmp_path / "job.yaml", job))


def test_missing_checkpoint_fails_fast(tmp_path: Path, init_images: dict) -> None:
    with pytest.raises(SpecError, match=r"model: checkpoint .*nope does not exist"):
        check(tmp_path, job_dict(tmp_path / "nope", init_images, tmp_path / "out"))


def test_mismatched_init_dataset(tmp_path: Path, tiny_checkpoint: Path) -> None:
    small = pusht_features(resolution=16)
    store = EpisodeStore.create(tmp_path / "small.zarr", small)
    store.append(make_pusht_episode(small, 0, 3))
    job = job_dict(tiny_checkpoint, {"dataset": str(tmp_path / "small.zarr")}, tmp_path / "out")
    with pytest.raises(SpecError, match=r"does not match the model's FeatureSpec:\n  - camera 'top' is 16x16"):
        check(tmp_path, job)


@pytest.mark.parametrize("init, message", [
    ({"episodes": [0, 9]}, r"init.episodes \[9\] are out of range"),
    ({"frame": 6}, r"init.frame=6 is past the end of episodes \[2\]"),
])
def test_init_dataset_selection_errors(tmp_path: Path, tiny_checkpoint: Path, tiny_pusht_store,
                                       init: dict, message: str) -> None:
    job = job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path, **init}, tmp_path / "out")
    with pytest.raises(SpecError, match=message):
        check(tmp_path, job)


def test_init_image_of_the_wrong_size(tmp_path: Path, tiny_checkpoint: Path) -> None:
    Image.fromarray(np.zeros((20, 24, 3), np.uint8)).save(tmp_path / "odd.png")
    with pytest.raises(SpecError, match="is 24x20 pixels; the model wants 32x32"):
        check(tmp_path, job_dict(tiny_checkpoint, {"images": ["odd.png"]}, tmp_path / "out"))
    with pytest.raises(SpecError, match="matches no image file"):
        check(tmp_path, job_dict(tiny_checkpoint, {"images": ["none/*.png"]}, tmp_path / "out"))


@pytest.mark.parametrize("output, message", [
    ("blocker/out", "not writable"),
    ("blocker", "exists and is not a directory"),
    ("gs://bucket/run", "gs:// locations are not supported; use a local path or an s3:// URI"),
])
def test_unwritable_output(tmp_path: Path, tiny_checkpoint: Path, init_images: dict, output: str,
                           message: str) -> None:
    (tmp_path / "blocker").write_text("a file where a directory should be")
    with pytest.raises(SpecError, match=message):
        check(tmp_path, job_dict(tiny_checkpoint, init_images, output))


def test_source_and_filter_errors_name_the_source(tmp_path: Path, tiny_checkpoint: Path,
                                                  init_images: dict) -> None:
    bad_policy = {"p": {"kind": "policy", "policy": "tests.workers.policies:missing"}}
    with pytest.raises(SpecError, match="action_sources.p: policy .* has no attribute 'missing'"):
        check(tmp_path, job_dict(tiny_checkpoint, init_images, tmp_path / "out", action_sources=bad_policy))
    with pytest.raises(SpecError, match="filter.scorer 'coverage' is unknown"):
        check(tmp_path, job_dict(tiny_checkpoint, init_images, tmp_path / "out",
                                 filter={"scorer": "coverage", "mode": "keep"}))
    for bad, message in [({}, "give filter.scorer"), ({"plausibility": {"min": 0.5}}, "give filter.scorer"),
                         ({"mode": "keep", "plausibility": {"task": "pusht"}}, "needs filter.scorer"),
                         ({"plausibility": {"task": "cloth"}}, "filter.plausibility.task 'cloth' is unknown"),
                         ({"scorer": "tests.workers.policies:even_seed_scorer", "plausibility": {"min": 0.5}},
                          "name the task whose object checks apply")]:
        with pytest.raises(SpecError, match=message):
            check(tmp_path, job_dict(tiny_checkpoint, init_images, tmp_path / "out", filter=bad))


def test_camera_keys_for_a_camera_the_model_lacks_fail_before_the_job(tmp_path: Path, tiny_checkpoint: Path,
                                                                       init_images: dict) -> None:
    job = job_dict(tiny_checkpoint, init_images, tmp_path / "out",
                   output={"path": str(tmp_path / "out"), "formats": ["zarr", "lerobot"],
                           "lerobot_camera_keys": {"front": "observation.image"}})
    with pytest.raises(SpecError, match=r"lerobot_camera_keys names \['front'\], but the model's cameras are \['top'\]"):
        check(tmp_path, job)
    assert not (tmp_path / "out").exists()  # refused before the output was created


def test_expansion_is_deterministic_and_weighted(tmp_path: Path, init_images: dict) -> None:
    job = job_dict("m", init_images, "out", episodes=10,
                   action_sources={"a": {"kind": "scripted", "weight": 2},
                                   "b": {"kind": "scripted", "weight": 1}})
    spec = JobSpec.model_validate(job)
    refs = ["r0", "r1", "r2"]
    episodes = expand(spec, refs)
    assert episodes == expand(spec, refs)
    assert [e.episode_id for e in episodes[:2]] == ["tiny-000000", "tiny-000001"]
    assert Counter(e.action_source for e in episodes) == {"a": 7, "b": 3}  # 6.67 / 3.33 rounded
    assert Counter(e.init_ref for e in episodes) == {"r0": 4, "r1": 3, "r2": 3} or \
        sorted(Counter(e.init_ref for e in episodes).values()) == [3, 3, 4]
    assert len({e.seed for e in episodes}) == 10
    other = expand(spec.model_copy(update={"seed": 8}), refs)
    assert all(a.seed != b.seed for a, b in zip(episodes, other, strict=True))
    assert [len(g) for g in groups(episodes, 4)] == [4, 4, 2]


def test_output_of_another_job_is_refused(tmp_path: Path, init_images: dict) -> None:
    spec = JobSpec.model_validate(job_dict("m", init_images, str(tmp_path / "out")))
    claim_output(spec, overwrite=False)
    claim_output(spec.model_copy(update={"replicas": 3}), overwrite=False)  # run-only change: fine
    changed = spec.model_copy(update={"horizon": 9})
    with pytest.raises(SpecError, match="different job \\(fields that differ: horizon\\)"):
        claim_output(changed, overwrite=False)
    claim_output(changed, overwrite=True)
    assert json.loads((tmp_path / "out" / "job.json").read_text())["spec"]["horizon"] == 9


def test_a_job_can_grow_but_not_shrink(tmp_path: Path, init_images: dict) -> None:
    spec = JobSpec.model_validate(job_dict("m", init_images, str(tmp_path / "out"), episodes=12,
                                           action_sources={"a": {"kind": "scripted", "weight": 2},
                                                           "b": {"kind": "scripted", "weight": 1}}))
    claim_output(spec, overwrite=False)
    grown = spec.model_copy(update={"episodes": 30})
    claim_output(grown, overwrite=False)  # more episodes: resumes
    assert expand(grown, ["r0", "r1"])[:12] == expand(spec, ["r0", "r1"])  # episode i stays episode i
    with pytest.raises(SpecError, match="can grow but not shrink to 20.*--overwrite"):
        claim_output(spec.model_copy(update={"episodes": 20}), overwrite=False)
    with pytest.raises(SpecError, match="fields that differ: episodes, horizon"):  # growth and more
        claim_output(spec.model_copy(update={"episodes": 40, "horizon": 9}), overwrite=False)


def test_output_of_another_checkpoint_is_refused(tmp_path: Path, init_images: dict) -> None:
    """`model: pusht` names whatever is bundled: a re-bundled model must not resume into (and
    relabel) a dataset its predecessor made."""
    out = tmp_path / "out"
    spec = JobSpec.model_validate(job_dict("m", init_images, str(out)))
    claim_output(spec, overwrite=False, model_hash="aaaa")
    claim_output(spec, overwrite=False, model_hash="aaaa")  # same checkpoint: resumes
    with pytest.raises(SpecError, match="made by model checkpoint aaaa.*is checkpoint bbbb.*--overwrite"):
        claim_output(spec, overwrite=False, model_hash="bbbb")
    assert json.loads((out / "job.json").read_text())["model_hash"] == "aaaa"  # nothing rewritten
    # An output whose job.json predates the field: the manifest's hash decides.
    job = json.loads((out / "job.json").read_text())
    del job["model_hash"]
    (out / "job.json").write_text(json.dumps(job))
    (out / "manifest.json").write_text(json.dumps({"model_hash": "aaaa"}))
    with pytest.raises(SpecError, match="checkpoint aaaa"):
        claim_output(spec, overwrite=False, model_hash="bbbb")
    claim_output(spec, overwrite=True, model_hash="bbbb")
    assert json.loads((out / "job.json").read_text())["model_hash"] == "bbbb"


def test_cli_reports_spec_errors_without_traceback(tmp_path: Path, init_images: dict, capsys,
                                                    tiny_checkpoint: Path) -> None:
    bad = write_job(tmp_path / "bad.yaml", job_dict(tmp_path / "nope", init_images, tmp_path / "out"))
    assert main(["generate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "iws generate: error: model: checkpoint" in err and "Traceback" not in err
    good = write_job(tmp_path / "good.yaml", job_dict(tiny_checkpoint, init_images, tmp_path / "out"))
    assert main(["generate", str(good), "--check"]) == 0
    assert "OK - 6 episodes x 4 steps" in capsys.readouterr().out


def test_command_line_overrides(tmp_path: Path, init_images: dict) -> None:
    path = write_job(tmp_path / "job.yaml", job_dict("m", init_images, "out"))
    spec = load_job(path, overrides=["episodes=12", "resources.num_gpus=0.5", "init.frame=2"],
                    model="ckpt/dir")
    assert (spec.episodes, spec.resources.num_gpus, spec.init.frame) == (12, 0.5, 2)
    assert spec.model == str(Path.cwd() / "ckpt" / "dir")
    with pytest.raises(SpecError, match="is not FIELD=VALUE"):
        load_job(path, overrides=["episodes"])
    with pytest.raises(SpecError, match="'episodes' is not a group of fields"):
        load_job(path, overrides=["episodes.x=1"])
    with pytest.raises(SpecError, match="field 'horizon' = 'long'"):
        load_job(path, overrides=["horizon=long"])
