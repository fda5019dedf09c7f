"""The `iws` entry point itself: version, and help written for users."""

from __future__ import annotations

import importlib.metadata
import json

import pytest

from pipeline.cli import build_parser, main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"iws {importlib.metadata.version('iws')}"


def test_eval_help_is_for_users() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["eval"]
    text = sub.format_help()
    assert "iws eval fidelity" in text and "_register_" not in text and "EVALUATIONS" not in text


def test_every_schema_a_validation_error_points_at_exists(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34: a bad `iws train --config` said "run `iws schema trainconfig`", which did not
    exist. Each model whose errors name `iws schema NAME` is printed by that command."""
    import schemas
    from pipeline.commands.schema import MODELS
    from schemas.errors import SCHEMA_NAMES
    from sim_model.train.config import TrainConfig  # imports torch

    models = [schemas.JobSpec, schemas.FeatureSpec, schemas.EpisodeSpec, schemas.EpisodeRecord,
              schemas.RunManifest, TrainConfig]
    for model in models:
        with pytest.raises(schemas.SpecError) as info:
            schemas.validate(model, {"not_a_field": 1}, source="x.yaml")
        hint = str(info.value).splitlines()[-1]
        assert hint.startswith("Run `iws schema "), hint
        name = hint.removeprefix("Run `iws schema ").split("`")[0]
        assert main(["schema", name]) == 0
        assert json.loads(capsys.readouterr().out)["title"] == model.__name__
    assert sorted(SCHEMA_NAMES.values()) == sorted(MODELS)


@pytest.mark.parametrize("args", [["schema", "job"], ["schema", "episode"]])  # over a buffer's worth, and under
def test_a_closed_pipe_ends_the_output_quietly(args: list[str]) -> None:
    """Issue 34: `iws schema job | head` ended in a BrokenPipeError traceback. Like a Unix tool the
    command stops without a word, with the status of one that SIGPIPE ended."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write, as `head` is once it has its lines
    try:
        done = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert done.stderr == "" and done.returncode == 141, done.stderr
