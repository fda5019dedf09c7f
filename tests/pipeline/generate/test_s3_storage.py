"""s3:// job storage against a real S3 server (SeaweedFS, tests/fixtures/s3.py), without Ray:
racing conditional creates, injected transient and permanent faults, fail-fast preflight, checkpoints
fetched by ETag, and exports/imports from and to s3://.

Faults are injected into botocore's real request path (a `before-send` hook answering in the
server's place for chosen requests); every other request reaches the server.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from pipeline.cli import main
from pipeline.pusht.features import pusht_features
from schemas import SpecError
from sim_model import storage
from sim_model.data.formats import import_dataset, open_dataset
from sim_model.data.formats.zarr_dp_writer import export_zarr_dp
from sim_model.data.store import EpisodeStore
from sim_model.storage import s3
from tests.fixtures.s3 import S3Bucket, forget_s3_clients, free_ports
from tests.fixtures.store import TINY_LENGTHS, make_pusht_episode
from tests.workers.jobs import job_dict, write_job
from workers.writer import episode_record

FEATURES = pusht_features(resolution=16)
FAST_S = 10.0  # a setup error must surface well within this, not after minutes of retries


class _Body:
    """The raw body of an injected response (what botocore reads from urllib3)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, *args: object, **kwargs: object) -> Iterator[bytes]:
        yield self.data


@contextmanager
def inject(operation: str, fault: Callable[[object], tuple[int, bytes] | None]) -> Iterator[None]:
    """Answer `operation` requests with fault(request) -> (status, XML body) instead of the
    server, whenever it returns one."""
    from botocore.awsrequest import AWSResponse

    def handler(request: object, **kwargs: object) -> AWSResponse | None:
        answer = fault(request)
        if answer is None:
            return None
        return AWSResponse(request.url, answer[0], {}, _Body(answer[1]))  # type: ignore[attr-defined]

    events = s3.client().meta.events
    events.register(f"before-send.s3.{operation}", handler)
    try:
        yield
    finally:
        events.unregister(f"before-send.s3.{operation}", handler)


def _error(code: str) -> bytes:
    return f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()


def test_of_two_conditional_puts_exactly_one_creates_the_object(s3_env: S3Bucket) -> None:
    """The primitive a group's commit rests on (the race itself: tests/workers/test_commit.py)."""
    uri = s3_env.url("job/parts/00000000.json")
    assert storage.write_new(uri, "a") and not storage.write_new(uri, "b")
    assert storage.read_text(uri) == "a"


def test_transient_errors_are_retried_with_backoff(s3_env: S3Bucket) -> None:
    attempts: list[int] = []

    def slow_down(request: object) -> tuple[int, bytes] | None:
        attempts.append(1)
        return (503, _error("SlowDown")) if len(attempts) <= 2 else None

    uri = s3_env.url("job/parts/t.json")
    with inject("PutObject", slow_down):
        assert storage.write_new(uri, "{}")  # fault: 503 SlowDown twice, then the server answers
    assert len(attempts) == 3 and storage.read_text(uri) == "{}"
    assert s3.client().meta.config.retries["mode"] == "standard"


def test_preflight_fails_fast_with_a_clear_message(s3_env: S3Bucket, tmp_path: Path, monkeypatch,
                                                   capsys) -> None:
    def check(output: str, *expected: str) -> None:
        job = write_job(tmp_path / "job.yaml", job_dict("models/none", {"images": ["x.png"]}, output))
        s3.forget_clients()
        forget_s3_clients()
        start = time.monotonic()
        assert main(["generate", str(job), "--no-progress"]) == 2
        elapsed = time.monotonic() - start
        err = capsys.readouterr().err
        assert elapsed < FAST_S, f"took {elapsed:.1f}s: {err}"
        for text in expected:
            assert text in err, err
        assert s3_env.server.secret_key not in err

    check("s3://no-such-bucket-iws/run", "bucket 'no-such-bucket-iws' does not exist", "aws s3 mb")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-0123456789")
    check(s3_env.url("run"), "refused access", "SignatureDoesNotMatch", "AWS_ACCESS_KEY_ID")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "unknownaccesskey")
    check(s3_env.url("run"), "refused access", "InvalidAccessKeyId")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    check(s3_env.url("run"), "no AWS credentials were found")
    for name, value in s3_env.server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_ports(1)[0]}")  # nothing listens
    check(s3_env.url("run"), "cannot reach the S3 endpoint", "AWS_ENDPOINT_URL")
    check("gs://bucket/run", "gs:// locations are not supported")


def test_checkpoint_is_fetched_once_per_version(s3_env: S3Bucket, tiny_checkpoint: Path,
                                                tiny_features, tmp_path: Path, monkeypatch) -> None:
    from sim_model.world_model import WorldModel

    monkeypatch.setenv("IWS_CACHE_DIR", str(tmp_path / "cache"))
    client, uri = s3_env.server.client(), s3_env.url("models/tiny")

    def upload(directory: Path) -> None:
        for name in ("config.json", "model.safetensors"):
            client.upload_file(str(directory / name), s3_env.name, f"models/tiny/{name}")

    upload(tiny_checkpoint)
    assert WorldModel.load(uri).checkpoint_hash == WorldModel.load(tiny_checkpoint).checkpoint_hash
    cached = list((tmp_path / "cache" / "checkpoints").iterdir())
    weights = cached[0] / "tiny" / "model.safetensors"
    mtime = weights.stat().st_mtime_ns
    WorldModel.load(uri)
    assert list((tmp_path / "cache" / "checkpoints").iterdir()) == cached
    assert weights.stat().st_mtime_ns == mtime, "an unchanged checkpoint is not downloaded again"

    other = WorldModel.random(tiny_features, preset="tiny", seed=1).save(tmp_path / "other")
    upload(other)  # a new version under the same URI: new ETags, a new cache entry
    assert WorldModel.load(uri).checkpoint_hash == WorldModel.load(other).checkpoint_hash
    assert len(list((tmp_path / "cache" / "checkpoints").iterdir())) == 2
    with pytest.raises(SpecError, match="cannot fetch checkpoint .*config.json does not exist"):
        WorldModel.load(s3_env.url("models/missing"))


def test_job_inputs_are_read_from_s3(s3_env: S3Bucket, tiny_pusht_store, tmp_path: Path,
                                     monkeypatch) -> None:
    from PIL import Image

    from schemas.job import InitSpec
    from workers.actions.streams import ActionStreams
    from workers.init_frames import list_init_refs, load_init

    monkeypatch.setenv("IWS_CACHE_DIR", str(tmp_path / "cache"))
    features, client = tiny_pusht_store.features, s3_env.server.client()
    url = s3_env.url("inputs/init.zarr")  # an episode store, read in place
    store = EpisodeStore.create(url, features)
    for episode in tiny_pusht_store:
        store.append(episode)
    refs = list_init_refs(InitSpec(dataset=url, episodes=[2], frame=1), features)
    frames, state = load_init(refs, features)
    expected = tiny_pusht_store.window(2, 1, 2)
    np.testing.assert_array_equal(frames[0, 0], expected["top"][0])
    np.testing.assert_array_equal(state[0], expected["state"][0])  # type: ignore[index]
    for i in range(2):  # image files, fetched once into the cache
        Image.fromarray(expected["top"][0]).save(tmp_path / f"{i}.png")
        client.upload_file(str(tmp_path / f"{i}.png"), s3_env.name, f"inputs/frames/{i}.png")
    refs = list_init_refs(InitSpec(images=[s3_env.url("inputs/frames/*.png")]), features)
    assert refs == [s3_env.url(f"inputs/frames/{i}.png") for i in range(2)]
    np.testing.assert_array_equal(load_init(refs, features)[0][:, 0], np.stack([expected["top"][0]] * 2))

    action = tiny_pusht_store.episode(1).action
    np.testing.assert_array_equal(ActionStreams(url).stream(1), action)
    client.put_object(Bucket=s3_env.name, Key="inputs/a.jsonl",
                      Body=json.dumps({"action": action.tolist()}).encode())
    np.testing.assert_array_equal(ActionStreams(s3_env.url("inputs/a.jsonl")).stream(0), action)
    with pytest.raises(SpecError, match="does not exist"):
        ActionStreams(s3_env.url("inputs/nothing.zarr"))


def test_export_reads_an_s3_dataset(s3_env: S3Bucket, tmp_path: Path) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    features = pusht_features(resolution=32)
    url = s3_env.url("run/dataset.zarr")
    store = EpisodeStore.create(url, features)
    episodes = [make_pusht_episode(features, i, n) for i, n in enumerate(TINY_LENGTHS)]
    for episode in episodes:
        store.append(episode)
    assert main(["export", "lerobot", url, str(tmp_path / "lr")]) == 0
    dataset = LeRobotDataset("iws/lr", root=tmp_path / "lr", video_backend="pyav")
    assert dataset.meta.total_episodes == 3 and dataset.meta.total_frames == sum(TINY_LENGTHS)
    assert main(["export", "zarr-dp", url, str(tmp_path / "dp.zarr")]) == 0
    dp = open_dataset(tmp_path / "dp.zarr")
    assert [e.checksum() for e in dp] == [e.checksum() for e in episodes]


def test_export_to_s3_is_never_half_visible(s3_env: S3Bucket, tiny_pusht_store) -> None:
    dest = s3_env.url("exports/dp.zarr")

    def deny_root_marker(request: object) -> tuple[int, bytes] | None:
        url = str(request.url)  # type: ignore[attr-defined]
        return (403, _error("AccessDenied")) if url.endswith("/exports/dp.zarr/.zgroup") else None

    with inject("PutObject", deny_root_marker), pytest.raises(SpecError, match="refused access"):
        export_zarr_dp(tiny_pusht_store, dest)  # fault: the upload dies before its root marker
    assert storage.exists(dest), "the data objects were uploaded"
    with pytest.raises(SpecError, match="neither a Zarr store"):
        open_dataset(dest)  # ... but no reader trusts them
    with pytest.raises(SpecError, match="already exists"):
        export_zarr_dp(tiny_pusht_store, dest)
    assert export_zarr_dp(tiny_pusht_store, dest, overwrite=True) == dest
    expected = [e.checksum() for e in tiny_pusht_store]
    assert [e.checksum() for e in open_dataset(dest)] == expected
    imported = import_dataset(dest, s3_env.url("imported.zarr"))  # DP on s3:// -> iws store on s3://
    assert [e.checksum() for e in EpisodeStore.open(imported)] == expected
    np.testing.assert_array_equal(EpisodeStore.open(imported).episode(1).action,
                                  tiny_pusht_store.episode(1).action)


def test_lerobot_parts_on_s3_and_a_partial_assembly_is_redone(s3_env: S3Bucket, tmp_path: Path,
                                                               monkeypatch) -> None:
    """Replicas write their parts straight to s3:// (the Zarr shard, the LeRobot part) and commit
    them; the Zarr index reads back over the shards, a part made again reads its episodes from
    the shard; a LeRobot assembly that died before its last object
    (meta/info.json) leaves no completion marker, and the rerun assembles again."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from pipeline.generate.consolidate import assemble_lerobot, assemble_zarr
    from schemas import EpisodeSpec, JobSpec
    from workers import parts

    monkeypatch.setenv("IWS_CACHE_DIR", str(tmp_path / "cache"))
    out, features = s3_env.url("run"), pusht_features(resolution=32)
    episodes = [make_pusht_episode(features, i, 5, episode_id=f"tiny-{i:06d}") for i in range(3)]
    records = [episode_record(e, i, storage.join(out, "dataset", "shards", f"{i:08d}.zarr"))
               for i, e in enumerate(episodes)]
    spec = JobSpec.model_validate(job_dict("model", {"images": ["x.png"]}, out,
                                           output={"path": out, "formats": ["zarr", "lerobot"]}))
    groups = [[EpisodeSpec(job_id="tiny", index=i, episode_id=r.episode_id, seed=i, init_ref="x.png",
                           action_source="scripted", horizon=5) for i, r in enumerate(records)][a:b]
              for a, b in ((0, 2), (2, 3))]
    for group in groups:
        rows = [records[e.index] for e in group]
        parts.write_part(out, spec, group[0].index, [episodes[e.index] for e in group], rows, features)
    assert not storage.exists(storage.join(out, "episodes")), "each episode stored once, in its part"
    assert sorted(parts.committed_records(out)) == [r.episode_id for r in records]
    by_id = {r.episode_id: r for r in records}
    sharded = open_dataset(assemble_zarr(spec, groups, by_id, features))  # the index over the s3:// shards
    assert [e.checksum() for e in sharded] == [r.checksum for r in records]
    keyed = spec.model_copy(update={"output": spec.output.model_copy(
        update={"lerobot_camera_keys": {"top": "observation.image"}})})
    again = parts.stored_episodes(out, keyed, records[:2], parts.read_parts_of(out, 0))  # from the shard
    assert again is not None and [e.checksum() for e in again if e is not None] == [r.checksum for r in records[:2]]

    def deny_info_json(request: object) -> tuple[int, bytes] | None:
        url = str(request.url)  # type: ignore[attr-defined]
        return (403, _error("AccessDenied")) if url.endswith("/run/lerobot/meta/info.json") else None

    with inject("PutObject", deny_info_json), pytest.raises(SpecError, match="refused access"):
        assemble_lerobot(spec, groups, by_id)  # fault: dies before its last object
    assert not storage.exists(storage.join(out, "lerobot.done.json"))
    # Assembly lists the dataset's files in one listing each (no request per file); local and
    # s3:// give the same answer.
    listed = storage.list_files(storage.join(out, "lerobot", "data"))
    assert listed == [storage.join(out, "lerobot", "data", "chunk-000", f"file-00{k}.parquet") for k in (0, 2)]
    lerobot = assemble_lerobot(spec, groups, by_id)
    assert lerobot == storage.join(out, "lerobot") and storage.exists(storage.join(out, "lerobot.done.json"))
    dataset = LeRobotDataset("iws/tiny", root=storage.fetch(lerobot), video_backend="pyav")
    assert dataset.meta.total_episodes == 3 and dataset.meta.total_frames == 15
    assert int(dataset[14]["episode_index"]) == 2 and int(dataset[14]["index"]) == 14
    np.testing.assert_allclose(dataset[7]["action"].numpy(), make_pusht_episode(features, 1, 5).action[2],
                               rtol=1e-6)
