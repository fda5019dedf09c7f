"""Whether one location lies inside another: local paths resolved ('..', symlinks), s3:// URIs
by prefix once their '..' segments are collapsed."""

from __future__ import annotations

from pathlib import Path

from sim_model import storage


def test_local_paths_are_resolved(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "episodes").mkdir(parents=True)
    (out / "episodes" / "away").symlink_to(tmp_path)
    assert storage.is_inside(str(out / "episodes"), str(out / "episodes" / "ep-1"))
    assert not storage.is_inside(str(out / "episodes"), str(out / "episodes" / ".."))
    assert not storage.is_inside(str(out / "episodes"), str(out / "episodes" / "."))
    assert not storage.is_inside(str(out / "episodes"), str(out / "episodes" / "away"))
    assert not storage.is_inside(str(out), str(tmp_path / "out-2"))  # a name's prefix is not a parent
    assert storage.overlap(str(out / "dataset"), str(out)) and storage.overlap(str(out), str(out / "dataset"))
    assert storage.overlap(str(out), str(tmp_path / "x" / ".." / "out"))
    assert not storage.overlap(str(out / "dataset"), str(out / "dp.zarr"))


def test_s3_uris_compare_by_prefix() -> None:
    assert storage.is_inside("s3://b/out/episodes", "s3://b/out/episodes/ep-1.0123")
    assert not storage.is_inside("s3://b/out/episodes", "s3://b/out/episodes/..")
    assert not storage.is_inside("s3://b/out", "s3://b/out-2/x")
    assert storage.overlap("s3://b/out/dataset", "s3a://b/out/")
    assert not storage.overlap("s3://b/out/dataset", "s3://b/out/dp.zarr")
    assert not storage.overlap("s3://b/out", "/b/out")  # a local path is never inside a bucket
