"""The `iws` entry point itself: version, and help written for users."""

from __future__ import annotations

import importlib.metadata

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
