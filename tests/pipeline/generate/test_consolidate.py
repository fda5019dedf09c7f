"""Consolidation and the job's LeRobot export without Ray: both follow the committed episodes'
checksums, not only their ids, so a regenerated episode reaches dataset.zarr and OUT/lerobot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from pipeline.generate.consolidate import consolidate, export_lerobot
from pipeline.pusht.features import pusht_features
from schemas import EpisodeRecord, JobSpec
from sim_model.data.store import EpisodeStore
from tests.fixtures.store import make_pusht_episode
from tests.workers.jobs import job_dict
from workers.writer import commit, commit_uri, stage_episode

FEATURES = pusht_features(resolution=32)


def _commit(out: str, index: int, variant: int | None = None) -> EpisodeRecord:
    """Commit episode `index`; `variant` makes other content under the same id."""
    episode = make_pusht_episode(FEATURES, index if variant is None else variant, 5,
                                 episode_id=f"tiny-{index:06d}")
    return commit(out, stage_episode(out, episode, index, FEATURES))


def _exported_actions(root: Path, episode: int) -> np.ndarray:
    table = pq.read_table(sorted((root / "data").rglob("*.parquet"))).to_pandas()
    rows = table[table["episode_index"] == episode]
    return np.stack(rows["action"].to_numpy())


def test_a_regenerated_episode_refreshes_dataset_zarr_and_the_export(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    spec = JobSpec.model_validate(job_dict("model", {"images": ["x.png"]}, out,
                                           output={"path": out, "formats": ["zarr", "lerobot"]}))
    records = [_commit(out, i) for i in range(3)]
    zarr_uri, changed = consolidate(out, records, FEATURES)
    assert changed and consolidate(out, records, FEATURES) == (zarr_uri, False)
    lerobot = Path(export_lerobot(spec, zarr_uri, refresh=changed))
    info_mtime = (lerobot / "meta" / "info.json").stat().st_mtime_ns
    export_lerobot(spec, zarr_uri, refresh=False)  # nothing changed: left alone
    assert (lerobot / "meta" / "info.json").stat().st_mtime_ns == info_mtime

    # Episode 1 made again with other frames under the same id (its marker deleted and the
    # checkpoint at the model path replaced, say): same ids, same count, a new checksum.
    Path(commit_uri(out, "tiny-000001")).unlink()
    records[1] = _commit(out, 1, variant=7)
    zarr_uri, changed = consolidate(out, records, FEATURES)
    assert changed, "dataset.zarr still holds the old episode 1"
    assert EpisodeStore.open(zarr_uri).episode(1).checksum() == records[1].checksum
    # The run died before exporting; its rerun finds dataset.zarr up to date, the export not.
    assert consolidate(out, records, FEATURES) == (zarr_uri, False)
    export_lerobot(spec, zarr_uri, refresh=False)
    expected = make_pusht_episode(FEATURES, 7, 5).action
    np.testing.assert_array_equal(_exported_actions(lerobot, 1), expected)


def test_camera_keys_of_the_spec_reach_the_export_and_a_change_redoes_it(tmp_path: Path) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    out = str(tmp_path / "out")
    output = {"path": out, "formats": ["zarr", "lerobot"]}
    plain = JobSpec.model_validate(job_dict("model", {"images": ["x.png"]}, out, output=output))
    pusht_env = JobSpec.model_validate(job_dict("model", {"images": ["x.png"]}, out, output={
        **output, "lerobot_camera_keys": {"top": "observation.image"}}))
    zarr_uri, _ = consolidate(out, [_commit(out, i) for i in range(2)], FEATURES)
    lerobot = Path(export_lerobot(plain, zarr_uri))
    assert "observation.images.top" in LeRobotDatasetMetadata("iws/tiny", root=lerobot).features
    export_lerobot(pusht_env, zarr_uri)  # same episodes, other keys: not up to date
    features = LeRobotDatasetMetadata("iws/tiny", root=lerobot).features
    assert "observation.image" in features and "observation.images.top" not in features
