"""summary.md and the preview's frame choice, from hand-made manifests (no Ray, no model);
tests/pipeline/generate/test_generate_job.py checks both files after a real job."""

from __future__ import annotations

from pipeline.generate.preview import PREVIEW_FRAMES, preview_steps
from pipeline.generate.summary import RunStats, summary_markdown, viz_command
from schemas import EpisodeRecord, JobSpec, RunManifest


def _spec(**overrides: object) -> JobSpec:
    job = {"name": "demo", "model": "pusht", "init": {"images": ["a.png"]}, "episodes": 3,
           "horizon": 5, "action_sources": {"walk": {"kind": "scripted"}},
           "output": {"path": "s3://bucket/runs/demo", "formats": ["zarr", "lerobot"]}}
    return JobSpec.model_validate(job | overrides)


def _records(scores: list[float | None]) -> list[EpisodeRecord]:
    return [EpisodeRecord(episode_id=f"demo-{i:06d}", index=i, uri=f"s3://bucket/e{i}", length=5,
                          checksum="c", seed=i, source="scripted:mix", model_hash="abc123",
                          score=s, success=None if s is None else s > 0.5)
            for i, s in enumerate(scores)]


def _manifest(n: int) -> RunManifest:
    return RunManifest(job_id="demo", spec_hash="h", model_hash="abc123", episodes_requested=3,
                       episodes_committed=n, episodes_in_datasets=n, started="2026-01-01T00:00:00+00:00",
                       finished="2026-01-01T00:00:09+00:00", frames=5 * n,
                       datasets={"zarr": "s3://bucket/runs/demo/dataset",
                                 "lerobot": "s3://bucket/runs/demo/lerobot"},
                       index="s3://bucket/runs/demo/dataset/index.parquet")


def test_a_resumed_run_reports_only_the_frames_it_made() -> None:
    text = summary_markdown(_spec(), _manifest(3), _records([None] * 3),
                            RunStats(wall_s=2.0, frames_made=5, resumed=2, kept=3))
    assert "| episodes | 3 of 3 requested; 2 were committed by an earlier run |" in text
    assert "| frames | 15 |" in text and "5 frames in this run, 2.5 frames/s" in text
    assert "checkpoint hash `abc123`" in text and "## Scores" not in text  # no scorer in the spec
    assert "| episode index | `s3://bucket/runs/demo/dataset/index.parquet` (Parquet, one row per episode) |" in text
    again = summary_markdown(_spec(), _manifest(3), _records([None] * 3), RunStats(1.0, 0, 3, 3))
    assert "nothing left to make" in again


def test_scores_are_summarised_when_a_scorer_ran() -> None:
    spec = _spec(filter={"scorer": "pusht", "mode": "label"})
    text = summary_markdown(spec, _manifest(3), _records([0.2, 0.9, 0.7]), RunStats(3.0, 15, 0, 3))
    assert "Scorer `pusht`, filter mode `label`: 3 of 3 episodes in the datasets." in text
    assert "| 3 | 0.6000 | 0.3606 | 0.2000 | 0.7000 | 0.9000 | 2 (67%) |" in text


def test_the_viewer_command_fetches_an_s3_copy_first() -> None:
    assert viz_command("demo", "s3://bucket/runs/demo/lerobot") == (
        "aws s3 sync s3://bucket/runs/demo/lerobot demo-lerobot && lerobot-dataset-viz "
        "--repo-id iws/demo --root demo-lerobot --episode-index 0")
    assert viz_command("demo", "out/my demo/lerobot").endswith("--root 'out/my demo/lerobot' --episode-index 0")


def test_preview_subsamples_long_episodes() -> None:
    assert list(preview_steps(4)) == [0, 1, 2, 3]
    assert len(preview_steps(PREVIEW_FRAMES)) == PREVIEW_FRAMES
    long = preview_steps(6000)
    assert len(long) <= PREVIEW_FRAMES and long.step == 120


def test_preview_and_summary_land_beside_the_manifest_on_s3(s3_env, tiny_pusht_store) -> None:
    """An s3:// output gets both files through the same storage layer as manifest.json."""
    import io

    from PIL import Image

    from pipeline.generate.preview import write_preview
    from pipeline.generate.summary import write_summary
    from sim_model.data import shards

    out = s3_env.url("runs/demo")
    records, rows = [], []
    for i in range(3):
        episode = tiny_pusht_store.episode(i)
        uri = f"{out}/episodes/demo-{i:06d}"
        records.append(EpisodeRecord(episode_id=f"demo-{i:06d}", index=i, uri=uri, length=len(episode),
                                     checksum=episode.checksum(), seed=i, source="scripted:mix"))
        rows.append(shards.IndexRow(episode_id=f"demo-{i:06d}", index=i, in_dataset=True, shard=i - i % 2,
                                    offset=i % 2,
                                    length=len(episode), seed=i, source="scripted:mix", score=None,
                                    success=None, checksum=episode.checksum()))
    for key in (0, 2):  # two shards on s3://, as two groups' replicas write them
        shards.write_shard(f"{out}/dataset", key, [tiny_pusht_store.episode(i) for i in range(key, min(key + 2, 3))],
                           tiny_pusht_store.features)
    shards.write_index(f"{out}/dataset", rows, tiny_pusht_store.features)
    manifest = _manifest(3)
    assert write_preview(out, f"{out}/dataset", "demo") == f"{out}/preview.gif"
    assert write_summary(_spec(output={"path": out}), manifest, records,
                         RunStats(1.0, 15, 0, 3)) == f"{out}/summary.md"

    client = s3_env.server.client()
    body = client.get_object(Bucket=s3_env.name, Key="runs/demo/preview.gif")["Body"].read()
    with Image.open(io.BytesIO(body)) as gif:
        assert gif.n_frames == max(r.length for r in records)
    summary = client.get_object(Bucket=s3_env.name, Key="runs/demo/summary.md")["Body"].read().decode()
    assert summary.startswith("# demo\n") and "aws s3 sync" in summary
