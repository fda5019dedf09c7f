"""The task registry (pipeline.tasks.registry): every entry complete and consistent, choices and
errors drawn from it, and no task named below the pipeline."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipeline.cli import build_parser
from pipeline.tasks.registry import TASKS, default_task, get_task, resolve_scorer
from schemas import SpecError
from sim_model.checkpoint import bundled_names

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", list(TASKS))
def test_each_task_is_complete(name: str) -> None:
    task = TASKS[name]
    assert task.name == name
    assert task.features().cameras and task.features().action_dim > 0
    assert callable(task.scorer()) and resolve_scorer(task.scorer_name) is task.scorer()
    assert task.object_analyzer().object_mask is not None
    assert task.bundled_model is None or task.bundled_model in bundled_names()
    module, _, attr = task.demonstrator.partition(":")
    assert attr and (ROOT / (module.replace(".", "/") + ".py")).is_file()


def test_pusht_is_the_first_entry_and_gives_the_defaults() -> None:
    assert default_task() is TASKS["pusht"]
    args = build_parser().parse_args(["eval", "policy", "--model", "m", "--policy", "p", "--init", "i"])
    assert args.scorer == "pusht_coverage" and args.ground_truth is None


def test_unknown_names_list_the_choices() -> None:
    with pytest.raises(SpecError, match="'cloth' is unknown; the tasks are pusht, sweep, rope, mug"):
        get_task("cloth", "--ground-truth")
    with pytest.raises(SpecError, match="built-in scorers: pusht_coverage, sweep_in_goal, rope_inserted, mug_held .* a task's name: pusht, sweep, rope, mug"):
        resolve_scorer("coverage")


def test_no_layer_below_the_pipeline_names_a_pipeline_module() -> None:
    """Neither an import nor a 'pipeline.x:attr' string (the old BUILTIN_SCORERS indirection)."""
    offenders = []
    for package in ("schemas", "sim_model", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom)
                         else [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str)
                         and ":" in node.value and " " not in node.value else [])
                offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names
                              if n == "pipeline" or n.startswith("pipeline.")]
    assert offenders == []


def test_ground_truth_refuses_a_store_of_another_task(tmp_path) -> None:
    from pipeline.pusht.truth import initial_states as pusht_starts
    from pipeline.sweep.collect import CollectConfig, collect, open_output
    from pipeline.sweep.truth import initial_states as sweep_starts
    from schemas import EpisodeSpec

    config = CollectConfig(episodes=1, steps=2, seed=3, resolution=16)
    store = open_output(config, str(tmp_path / "sweep.zarr"))
    collect(config, store)
    spec = EpisodeSpec(job_id="j", index=0, episode_id="j-0", seed=0, init_ref=f"{store.path}#0:1",
                       action_source="p", horizon=2)
    start = sweep_starts([spec])[0]  # frame 1 as recorded: the pushers and every disc
    assert start.pushers.shape == (2, 2) and start.particles.shape[0] == int(store.episode(0).extras["particle_count"][1])
    with pytest.raises(SpecError, match=r"--ground-truth pusht: .*sweep.zarr lacks the agent position .*`iws collect pusht`"):
        pusht_starts([spec])
    (tmp_path / "lerobot" / "meta").mkdir(parents=True)  # a LeRobot dataset records no discs
    (tmp_path / "lerobot" / "meta" / "info.json").write_text("{}")
    with pytest.raises(SpecError, match="--ground-truth sweep needs a Zarr episode store"):
        sweep_starts([spec.model_copy(update={"init_ref": str(tmp_path / "lerobot")})])


def test_a_task_without_its_extra_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from pipeline.cli import main

    monkeypatch.setitem(sys.modules, "pymunk", None)  # import pymunk now raises ImportError
    out = tmp_path / "rope.zarr"
    assert main(["collect", "rope", "--episodes", "1", "--steps", "2", "--workers", "1",
                 "--out", str(out), "--no-progress"]) == 2
    assert "pip install 'iws[rope]'" in capsys.readouterr().err
