"""Fixtures of the workers' tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["local", "s3"])
def out(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A job output: a local directory, or a prefix in a fresh bucket of the test S3 server."""
    if request.param == "local":
        return str(tmp_path / "out")
    return request.getfixturevalue("s3_env").url("out")
