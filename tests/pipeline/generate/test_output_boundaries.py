"""A job deletes only what a job wrote, in its own output (issue 34): a commit marker naming a
path outside its episode's store is refused, and so is a non-empty directory that is not a
job's output, --overwrite or not. Both are refused before Ray starts: exit 2, the file or
directory named, nothing deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.generate import load_job
from pipeline.generate.outputs import JOB_FILE, claim_output
from schemas import EpisodeRecord, JobSpec, PartRecord, SpecError
from tests.workers.jobs import job_dict, write_job


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run here must be refused before it rolls anything."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the run went on to generate episodes")

    monkeypatch.setattr("pipeline.generate.ray_exec.execute", refuse)


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if not p.name.startswith(".")}


def test_a_part_record_pointing_outside_the_datasets_is_refused(
        tmp_path: Path, tiny_checkpoint: Path, tiny_pusht_store, capsys: pytest.CaptureFixture, no_ray) -> None:
    """Issue 34: a resume acts on the paths a record names; one leading out of the datasets (a
    commit whose `uri` ended in '/..' once had a resume delete the whole output) is refused with
    the record named, and nothing is deleted."""
    out = tmp_path / "out"
    job = write_job(tmp_path / "job.yaml", job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out))
    claim_output(load_job(job), overwrite=False)
    (out / "notes.txt").write_text("mine")
    record = EpisodeRecord(episode_id="tiny-000000", index=0, uri=f"{out}/dataset/..", length=4,
                           checksum="0" * 64, seed=1, source="scripted:mix")
    marker = out / "parts" / "00000000.json"
    marker.parent.mkdir()
    marker.write_text(PartRecord(key=0, episodes=[(record.episode_id, record.checksum)], records=[record],
                                 formats=["zarr"], files={"dataset/../notes.txt": 4}).model_dump_json())
    before = _files(out)
    assert main(["generate", str(job), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert str(marker) in err and "dataset/../notes.txt" in err and "Traceback" not in err, err
    assert _files(out) == before and (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_directory_that_is_not_a_job_output_is_refused(tmp_path: Path, tiny_checkpoint: Path, tiny_pusht_store,
                                                         capsys: pytest.CaptureFixture, no_ray,
                                                         overwrite: bool) -> None:
    out = tmp_path / "mine"
    (out / "episodes" / "old_run").mkdir(parents=True)
    (out / "episodes" / "old_run" / "ep.npz").write_bytes(b"data")
    (out / "dataset").mkdir()
    (out / "summary.md").write_text("my notes")
    job = write_job(tmp_path / "job.yaml", job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out))
    before = _files(out)
    assert main(["generate", str(job), "--no-progress", *(["--overwrite"] if overwrite else [])]) == 2
    err = capsys.readouterr().err
    for text in (f"output path {out} is not empty", "dataset, episodes, summary.md", "has no job.json",
                 f"--output {out}/tiny"):
        assert text in err, err
    assert _files(out) == before and (out / "summary.md").read_text() == "my notes"


def test_overwrite_clears_only_what_a_job_wrote(tmp_path: Path, tiny_pusht_store) -> None:
    out = tmp_path / "out"
    spec = JobSpec.model_validate(job_dict("m", {"dataset": tiny_pusht_store.path}, out))
    claim_output(spec, overwrite=False)  # an empty directory becomes the job's output
    (out / "episodes" / "tiny-000000").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    claim_output(spec, overwrite=False)  # a job's output with a user's file in it resumes
    claim_output(spec, overwrite=True)
    assert _files(out) == {Path(JOB_FILE), Path("notes.txt")}
    (out / JOB_FILE).unlink()
    with pytest.raises(SpecError, match="not empty \\(notes.txt\\)"):
        claim_output(spec, overwrite=True)
    assert (out / "notes.txt").read_text() == "mine"



@pytest.mark.parametrize("damage", [b"", b"{not json", b"\xff\xfe\x00", b"[1, 2]", b'{"key": 8}'])
@pytest.mark.parametrize("name", [JOB_FILE, "parts/00000000.json"])
def test_a_garbled_record_is_refused_with_the_file_named(tmp_path: Path, tiny_checkpoint: Path, tiny_pusht_store,
                                                         capsys: pytest.CaptureFixture, no_ray, name: str,
                                                         damage: bytes) -> None:
    """Issue 34: an empty or garbled job.json or part record (a group's commit; a disk that filled up,
    a hand edit) ended a resume in a JSONDecodeError or ValidationError traceback. Exit 2, the file
    named with what to do, nothing deleted."""
    out = tmp_path / "out"
    job = write_job(tmp_path / "job.yaml", job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out))
    claim_output(load_job(job), overwrite=False)
    damaged = out / name
    damaged.parent.mkdir(exist_ok=True)
    damaged.write_bytes(damage)
    before = _files(out)
    assert main(["generate", str(job), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert str(damaged) in err and "Traceback" not in err, err
    assert ("--overwrite" if name == JOB_FILE else "delete it") in err.lower(), err
    assert _files(out) == before
