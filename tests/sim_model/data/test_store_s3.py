"""EpisodeStore on s3:// against a real S3 server (SeaweedFS, tests/fixtures/s3.py): round trip,
resume, and a fast, clear failure for every setup mistake a user can make."""

from __future__ import annotations

import copy
import logging
import time

import numpy as np
import pytest

from pipeline.pusht.features import pusht_features
from schemas import SpecError
from sim_model.data.store import EpisodeStore
from sim_model.storage.s3_zarr import s3_storage_options
from tests.fixtures.s3 import S3Bucket, forget_s3_clients, free_ports
from tests.fixtures.store import make_pusht_episode

FEATURES = pusht_features(resolution=16)
FAST_S = 10.0  # a setup error must surface well within this (not after minutes of retries)


def _fill(url: str, lengths: tuple[int, ...]) -> EpisodeStore:
    store = EpisodeStore.create(url, FEATURES)
    for i, length in enumerate(lengths):
        store.append(make_pusht_episode(FEATURES, i, length))
    return store


def test_round_trip_through_s3_is_byte_identical(s3_env: S3Bucket) -> None:
    url = s3_env.url("runs/demo/store.zarr")
    lengths = (5, 9, 3)
    _fill(url, lengths)
    keys = s3_env.server.client().list_objects_v2(Bucket=s3_env.name)["Contents"]
    assert any(k["Key"] == "runs/demo/store.zarr/meta/episode_ends/.zarray" for k in keys)

    store = EpisodeStore.open(url)
    assert (len(store), store.n_frames, store.features) == (3, 17, FEATURES)
    for i, (episode, length) in enumerate(zip(store, lengths, strict=True)):
        expected = make_pusht_episode(FEATURES, i, length)
        assert episode.checksum() == expected.checksum()
        assert episode.meta == expected.meta
    window = store.window(1, 2, 6, keys=["top", "action"])
    np.testing.assert_array_equal(window["top"],
                                  make_pusht_episode(FEATURES, 1, 9).frames["top"][2:6])
    # A copied/transported store (DataLoader workers, Ray tasks) reopens by URI, read-only.
    clone = copy.deepcopy(store)  # the same __reduce__ path pickling takes
    assert clone.path == url and len(clone) == 3 and clone.mode == "r"


def test_reopen_for_append_continues_the_store(s3_env: S3Bucket) -> None:
    url = s3_env.url("store.zarr")
    _fill(url, (4, 6))
    store = EpisodeStore.open(url, mode="a")
    assert store.append(make_pusht_episode(FEATURES, 2, 7)) == 2
    reread = EpisodeStore.open(url)
    assert reread.episode_ends.tolist() == [4, 10, 17]
    assert reread.episode(2).checksum() == make_pusht_episode(FEATURES, 2, 7).checksum()
    with pytest.raises(SpecError, match="already exists"):
        EpisodeStore.create(url, FEATURES)
    fresh = EpisodeStore.create(url, FEATURES, overwrite=True)
    assert len(fresh) == 0 and len(EpisodeStore.open(url)) == 0


def test_create_refuses_a_prefix_holding_other_data(s3_env: S3Bucket) -> None:
    client = s3_env.server.client()
    client.put_object(Bucket=s3_env.name, Key="results/report.csv", Body=b"a,b\n")
    with pytest.raises(SpecError, match="non-empty prefix"):
        EpisodeStore.create(s3_env.url("results"), FEATURES)
    assert client.get_object(Bucket=s3_env.name, Key="results/report.csv")["Body"].read() == b"a,b\n"


def test_open_missing_store_in_existing_bucket(s3_env: S3Bucket) -> None:
    with pytest.raises(SpecError, match="^no episode store at s3://"):  # missing, not "damaged"
        EpisodeStore.open(s3_env.url("nothing/here.zarr"))


@pytest.mark.parametrize("op", ["create", "open"])
def test_missing_bucket_fails_fast_naming_it(s3_env: S3Bucket, op: str) -> None:
    url = "s3://no-such-bucket-iws/x.zarr"
    started = time.monotonic()
    with pytest.raises(SpecError) as caught:
        EpisodeStore.create(url, FEATURES) if op == "create" else EpisodeStore.open(url)
    assert time.monotonic() - started < FAST_S
    message = str(caught.value)
    assert "bucket 'no-such-bucket-iws' does not exist" in message
    assert url in message and "aws s3 mb s3://no-such-bucket-iws" in message
    assert caught.value.__cause__ is None  # no deep traceback chained under it


def test_bad_credentials_fail_fast_without_leaking_them(
        s3_env: S3Bucket, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    url = s3_env.url("store.zarr")
    _fill(url, (3,))
    secret = "wrong-secret-must-not-appear-1234"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    forget_s3_clients()
    caplog.set_level(logging.DEBUG, logger="sim_model")
    attempts = (lambda: EpisodeStore.open(url),
                lambda: EpisodeStore.create(s3_env.url("other.zarr"), FEATURES))
    for attempt in attempts:
        started = time.monotonic()
        with pytest.raises(SpecError) as caught:
            attempt()
        assert time.monotonic() - started < FAST_S
        message = str(caught.value)
        assert f"refused access to bucket '{s3_env.name}'" in message
        assert s3_env.url() in message and "AWS_SECRET_ACCESS_KEY" in message
        assert secret not in message
    assert secret not in caplog.text


def test_missing_credentials_say_how_to_provide_them(
        s3_env: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    forget_s3_clients()
    with pytest.raises(SpecError, match="no AWS credentials were found for s3://"):
        EpisodeStore.open(s3_env.url("store.zarr"))


def test_unreachable_endpoint_fails_fast(s3_env: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{free_ports(1)[0]}"  # nothing listens there
    monkeypatch.setenv("AWS_ENDPOINT_URL", dead)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # the standard AWS knob; botocore's default is 5
    forget_s3_clients()
    started = time.monotonic()
    with pytest.raises(SpecError, match=f"cannot reach the S3 endpoint {dead}") as caught:
        EpisodeStore.open(s3_env.url("store.zarr"))
    assert time.monotonic() - started < FAST_S
    assert "AWS_ENDPOINT_URL" in str(caught.value)


def test_explicit_storage_options_override_the_environment(
        s3_env: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    server = s3_env.server
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_ports(1)[0]}")
    options = {"endpoint_url": server.endpoint_url}
    url = s3_env.url("opts.zarr")
    store = EpisodeStore.create(url, FEATURES, storage_options=options)
    store.append(make_pusht_episode(FEATURES, 0, 4))
    assert len(EpisodeStore.open(url, storage_options=options)) == 1


def test_path_style_only_for_custom_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    assert s3_storage_options(None) == {}  # AWS proper: botocore's own addressing
    custom = s3_storage_options({"endpoint_url": "http://minio:9000",
                                 "config_kwargs": {"s3": {"addressing_style": "virtual"}}})
    assert custom["config_kwargs"]["s3"]["addressing_style"] == "virtual"  # the caller's wins
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://seaweed:8333")
    assert s3_storage_options(None)["config_kwargs"] == {"s3": {"addressing_style": "path"}}
