"""`iws submit` against a real Ray head with the Jobs API (`ray_head`, tests/fixtures/ray_head.py),
on a job whose locations are s3:// (checkpoint, replayed actions, output, LeRobot export):
submitted, stopped mid-run, damaged, submitted again and followed to SUCCEEDED, which resumes it.
Also the mistakes a user can make, refused before anything is uploaded.

The head's processes hold the S3 credentials in their own environment, as cluster nodes do
(docs/cluster.md); none travel with the submission. The head has Ray's token authentication on,
as the clusters in infra/ do: `iws submit` reaches it only with the token (RAY_AUTH_TOKEN or
RAY_AUTH_TOKEN_PATH), which it sends as a header and never shows.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pipeline.cli import main
from pipeline.generate import load_job
from schemas import RunManifest
from sim_model import storage
from sim_model.data.formats import open_dataset
from sim_model.data.store import EpisodeStore
from tests.fixtures.ray_head import RayHead
from tests.fixtures.s3 import S3Bucket, free_ports
from tests.pipeline.generate.rerun import rerolled_checksums
from tests.workers.jobs import job_dict, write_job
from workers import parts
from workers.parts import committed_records

EPISODES = 24
WAIT_S = 180.0


def _upload_inputs(bucket: S3Bucket, checkpoint: Path, recording: EpisodeStore) -> dict[str, str]:
    """The checkpoint and a JSONL of recorded action streams, on s3://."""
    client = bucket.server.client()
    for name in ("config.json", "model.safetensors"):
        client.upload_file(str(checkpoint / name), bucket.name, f"models/tiny/{name}")
    lines = [json.dumps({"action": e.action.tolist()}) for e in recording]
    client.put_object(Bucket=bucket.name, Key="inputs/actions.jsonl", Body="\n".join(lines).encode())
    return {"model": bucket.url("models/tiny"), "replay": bucket.url("inputs/actions.jsonl")}


def _job_dir(root: Path, model: str, out: str, **overrides: object) -> Path:
    """A directory to upload: job.yaml and the initial frames it names by relative path."""
    (root / "init").mkdir(parents=True)
    rng = np.random.default_rng(3)
    for i in range(2):
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(root / "init" / f"{i}.png")
    job = job_dict(model, {"images": ["init/*.png"]}, out, **overrides)
    return write_job(root / "job.yaml", job)


def _submit(head: RayHead, capsys, *args: str) -> tuple[int, str]:
    """`iws submit ... --address HEAD` as a user with the cluster's token in RAY_AUTH_TOKEN."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_AUTH_TOKEN", head.token)
        env.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
        code = main(["submit", *args, "--address", head.dashboard_url])
    captured = capsys.readouterr()
    assert head.token not in captured.out + captured.err
    return code, captured.out


def _markers(bucket: S3Bucket) -> dict[str, str]:
    """The part records (each the commit of a group) by key, with their ETags."""
    listed = bucket.server.client().list_objects_v2(Bucket=bucket.name, Prefix="run/parts/")
    return {k["Key"]: k["ETag"] for k in listed.get("Contents", []) if re.fullmatch(r"run/parts/\d{8}\.json", k["Key"])}


def test_stop_then_resubmit_resumes_on_s3(ray_head: RayHead, s3_env: S3Bucket, tmp_path: Path,
                                          tiny_checkpoint: Path, tiny_pusht_store, capsys,
                                          monkeypatch) -> None:
    from ray.job_submission import JobSubmissionClient

    monkeypatch.setenv("IWS_CACHE_DIR", str(tmp_path / "cache"))
    inputs = _upload_inputs(s3_env, tiny_checkpoint, tiny_pusht_store)
    out = s3_env.url("run")
    job = _job_dir(tmp_path / "job", inputs["model"], out, episodes=EPISODES,
                   action_sources={"walk": {"kind": "scripted"},
                                   "rep": {"kind": "replay", "path": inputs["replay"]}},
                   output={"path": out, "formats": ["zarr", "lerobot"]})

    code, printed = _submit(ray_head, capsys, str(job), "--no-follow")
    assert code == 0 and "iws generate job.yaml --no-progress" in printed
    job_id = re.search(r"submitted tiny as (\S+) to", printed)[1]  # type: ignore[index]
    deadline = time.monotonic() + WAIT_S
    while len(_markers(s3_env)) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    code, printed = _submit(ray_head, capsys, "--stop", job_id)  # fault: the job is stopped mid-run
    assert code == 0 and f"job {job_id}: STOPPED" in printed
    client = JobSubmissionClient(ray_head.dashboard_url, headers=ray_head.auth_headers)
    assert ray_head.token not in json.dumps(client.get_job_info(job_id).dict(), default=str)
    logs = client.get_job_logs(job_id)
    assert "interrupted; committed work is kept" in logs, logs[-3000:]
    before = committed_records(out)
    assert 1 <= len(before) < EPISODES
    part_of = {episode_id: p for p in parts.read_parts(out).values() for episode_id, _ in p.episodes}
    for record in before.values():  # every committed episode is complete and matches its record
        episode = parts.read_committed(out, record, part_of.get(record.episode_id))  # from the shard
        assert not isinstance(episode, str) and episode.checksum() == record.checksum, episode
    manifest = RunManifest.model_validate_json(storage.read_text(f"{out}/manifest.json"))
    assert manifest.finished is None and manifest.episodes_committed <= len(before)

    client, etags = s3_env.server.client(), _markers(s3_env)
    lost = sorted(etags)[-1]  # fault: a crash between a group's upload and its record
    client.delete_object(Bucket=s3_env.name, Key=lost)
    del etags[lost]
    orphan = f"run/dataset/shards/{EPISODES - 1:08d}.zarr"  # fault: a writer killed mid-upload
    client.put_object(Bucket=s3_env.name, Key=f"{orphan}/data/top/c/0/0/0/0", Body=b"partial")

    code, printed = _submit(ray_head, capsys, str(job))  # the same job again, followed: it resumes
    assert code == 0 and f"progress: {EPISODES}/{EPISODES} episodes" in printed, printed[-3000:]
    assert "SUCCEEDED" in printed
    records = committed_records(out)
    assert sorted(r.index for r in records.values()) == list(range(EPISODES))  # none lost, none twice
    assert all(records[k].checksum == r.checksum for k, r in before.items())  # byte-identical
    assert {k: v for k, v in _markers(s3_env).items() if k in etags} == etags, "a commit was rewritten"
    # The orphan upload is gone (no part record names it), and nothing is stored per episode.
    assert f"{EPISODES - 1:08d}.zarr" not in storage.list_names(f"{out}/dataset/shards")
    assert storage.list_names(f"{out}/episodes") == [] and storage.list_names(f"{out}/commits") == []

    manifest = RunManifest.model_validate_json(storage.read_text(f"{out}/manifest.json"))
    assert manifest.finished is not None and manifest.episodes_committed == EPISODES
    dataset = open_dataset(manifest.datasets["zarr"])
    assert [e.checksum() for e in dataset] == [records[f"tiny-{i:06d}"].checksum for i in range(EPISODES)]
    assert {dataset.meta(i).source.split(":")[0] for i in range(EPISODES)} == {"scripted", "replay"}
    info = json.loads(storage.read_text(f"{manifest.datasets['lerobot']}/meta/info.json"))
    assert info["total_episodes"] == EPISODES and info["total_frames"] == EPISODES * 4
    assert rerolled_checksums(load_job(job), tmp_path / "again") == \
        {k: r.checksum for k, r in records.items()}  # what a fresh replica makes, from the same inputs


def test_submit_refuses_what_would_fail_on_the_cluster(tmp_path: Path, tiny_checkpoint: Path,
                                                       capsys, monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS", raising=False)

    def refused(*args: str) -> str:
        assert main(["submit", *args]) == 2
        return capsys.readouterr().err

    job = _job_dir(tmp_path / "job", str(tiny_checkpoint), "s3://bucket/run")
    assert "no cluster given: pass --address" in refused(str(job))
    unreachable = f"http://127.0.0.1:{free_ports(1)[0]}"
    assert "cannot reach the Ray Jobs API" in refused(str(job), "--address", unreachable)
    assert "is a relative path" in refused(str(job), "--output", "out", "--address", unreachable)
    outside = write_job(tmp_path / "job" / "outside.yaml", job_dict(
        tiny_checkpoint, {"dataset": "../data.zarr"}, "s3://bucket/run"))
    assert "outside the working directory" in refused(str(outside), "--address", unreachable)
    assert "is not inside the working directory" in refused(
        str(job), "--working-dir", str(tmp_path / "job" / "init"), "--address", unreachable)
    assert "episodes" in refused(str(job), "--set", "episodes=0", "--address", unreachable)
    assert "either a job file to submit or --stop" in refused(str(job), "--stop", "raysubmit_x")
    # Issue 34: without a scheme, Ray's client took HOST:PORT for a cluster and hung ~35 s.
    for args in ([str(job)], ["--stop", "raysubmit_x"]):
        started = time.monotonic()
        err = refused(*args, "--address", "127.0.0.1:8265")
        assert "--address http://127.0.0.1:8265" in err and time.monotonic() - started < 5, err


def test_stopping_an_unknown_job_is_a_clear_error(ray_head: RayHead, capsys, monkeypatch) -> None:
    monkeypatch.setenv("RAY_AUTH_TOKEN", ray_head.token)
    assert main(["submit", "--stop", "raysubmit_missing", "--address", ray_head.dashboard_url]) == 2
    assert "cannot stop job raysubmit_missing" in capsys.readouterr().err


def test_a_head_with_token_auth_takes_jobs_only_with_its_token(
        ray_head: RayHead, tmp_path: Path, tiny_checkpoint: Path, capsys, monkeypatch) -> None:
    for headers in ({}, {"Authorization": "Bearer not-the-token"}):  # the head enforces its token
        request = urllib.request.Request(f"{ray_head.dashboard_url}/api/jobs/", headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == (403 if headers else 401)
    job = _job_dir(tmp_path / "job", str(tiny_checkpoint), "s3://bucket/run")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)

    def submit(*args: str) -> tuple[int, str]:
        code = main(["submit", *args, "--address", ray_head.dashboard_url])
        captured = capsys.readouterr()
        assert ray_head.token not in captured.out + captured.err  # never shown
        return code, captured.err

    code, err = submit(str(job), "--no-follow")
    assert code == 2 and "requires token authentication: set RAY_AUTH_TOKEN" in err, err
    monkeypatch.setenv("RAY_AUTH_TOKEN", "x" + ray_head.token[1:])
    code, err = submit(str(job), "--no-follow")
    assert code == 2 and "refused the token from RAY_AUTH_TOKEN" in err and "x" + ray_head.token[1:] not in err
    monkeypatch.delenv("RAY_AUTH_TOKEN")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "missing-token"))
    code, err = submit(str(job), "--no-follow")
    assert code == 2 and "cannot read the Ray auth token file" in err
    token_file = tmp_path / "token"
    token_file.write_text(ray_head.token + "\n")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token_file))
    code, err = submit("--stop", "raysubmit_missing")  # through to the Jobs API, which answers
    assert code == 2 and "cannot stop job raysubmit_missing" in err, err


def test_submit_command_lines_parse_as_manifests_write_them() -> None:
    from tests.infra import manifest_tools as mt

    for command in ("iws submit job.yaml --address http://127.0.0.1:8265 --no-follow",
                    "iws submit job.yaml --working-dir . --output s3://b/run --set replicas=8",
                    "iws submit --stop raysubmit_1 --address http://head:8265"):
        assert mt.check_iws_command(command) is None, command
    assert "--frobnicate" in (mt.check_iws_command("iws submit job.yaml --frobnicate") or "")
