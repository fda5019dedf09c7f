"""What a user sees: `iws generate` (embedded Ray, a progress bar) and `iws export lerobot` print
the bar, warnings that ask for action and the result, nothing from Ray's, FFmpeg's or the
libraries' internals.

The generate runs are real processes on an embedded Ray, as `make demo` runs, in a new HOME and
without RAY_AUTH_MODE: first as a new user (no ~/.ray/auth_token yet), then with the token the
first run left. They also check that the episodes the driver rolled while Ray started (its lead
replica) are the bytes a fresh replica makes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.generate import load_job
from tests.fixtures.ray_cluster import REPO_ROOT
from tests.pipeline.generate.rerun import rerolled_checksums
from tests.workers.jobs import job_dict, write_job
from workers.parts import committed_records

NOISE = ("Token authentication", "core_worker", "constructor arguments", "Progress bars disabled",
         "streaming_executor", "INFO ", "[mp4 @", "[libx264 @", "[mov,mp4", "Svt[", "SVT [")


def _noise(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(n in line for n in NOISE)]


def _generate(job: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "generate", str(job), "--overwrite"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path) -> Path:
    """A tiny job's output, made twice by `iws generate` as a new and as a returning user."""
    import numpy as np
    from PIL import Image

    tmp = tmp_path_factory.mktemp("quiet")
    rng = np.random.default_rng(5)
    images = [tmp / f"init{i}.png" for i in range(2)]
    for p in images:
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(p)
    job = write_job(tmp / "job.yaml", job_dict(
        tiny_checkpoint, {"images": [str(p) for p in images]}, tmp / "out", episodes=8, horizon=6,
        batch_size=4, replicas=2, action_sources={"walk": {"kind": "scripted", "motion": "mix"}},
        output={"path": str(tmp / "out"), "formats": ["zarr", "lerobot"]}))  # replicas encode parts
    home = tmp / "home"
    home.mkdir()
    for run in ("new user", "token present"):
        done = _generate(job, home)
        assert done.returncode == 0, done.stderr
        assert _noise(done.stderr + done.stdout) == [], f"{run}:\n{done.stderr}"
        assert "tiny: 8 episodes, 48 frames" in done.stdout and "8/8" in done.stderr, done.stderr
        assert (home / ".ray" / "auth_token").exists()  # token auth, chosen without a warning
    spec = load_job(job)
    made = {k: r.checksum for k, r in committed_records(spec.output.path).items()}
    assert made == rerolled_checksums(spec, tmp / "fresh")
    return Path(spec.output.path)


@pytest.mark.parametrize("vcodec", ["libsvtav1", "h264"])
def test_export_prints_only_the_bar_and_the_result(generated: Path, tmp_path: Path, vcodec: str,
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "lerobot"
    assert main(["export", "lerobot", str(generated / "dataset"), str(dest), "--vcodec", vcodec]) == 0
    out, err = capfd.readouterr()
    assert _noise(out + err) == [], err
    assert f"wrote 8 episodes (48 frames) to {dest}" in out and "48/48" in err

    assert main(["export", "lerobot", str(generated / "dataset"), str(dest)]) == 2
    out, err = capfd.readouterr()
    assert "already exists" in err and "%|" not in err, err  # the error alone, no empty bar
