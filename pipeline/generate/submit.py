"""A generation job as a submission to a running Ray cluster (sent through Ray's Jobs API by
pipeline/ray_jobs.py).

What travels: the working directory (the job file's directory unless --working-dir says
otherwise), uploaded by Ray as the job's runtime_env `working_dir`, and an entrypoint
`iws generate <job file relative to it> --no-progress` plus the command line's overrides
(--output, --model, --set, --overwrite, --take-over). The job then runs on the head as a Ray
driver, exactly as `iws generate` would there, and resumes like it.

What does not travel: credentials. Nodes reach S3 with their own (Kubernetes Secret, instance
profile; docs/cluster.md), never through the runtime_env, which the dashboard shows to anyone.

Checked before anything is uploaded: the spec validates, and every relative path in it stays
inside the working directory (a file outside it would not exist on the cluster). A relative
output path is refused: it would land in the job's temporary copy of the working directory on
the head node and be lost; give an s3:// URI or a path every node shares.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from pipeline.generate.spec import apply_overrides, load_yaml_mapping
from pipeline.ray_jobs import EXCLUDES, Submission
from schemas import JobSpec, SpecError
from schemas.errors import validate
from schemas.job import PolicySource, ReplaySource
from sim_model import storage


def _local_paths(spec: JobSpec) -> dict[str, str]:
    """Field -> value of every location in the spec that names a local file or directory."""
    places = {"init.dataset": spec.init.dataset}
    places.update({f"init.images[{i}]": p for i, p in enumerate(spec.init.images or [])})
    for name, source in spec.action_sources.items():
        if isinstance(source, ReplaySource):
            places[f"action_sources.{name}.path"] = source.path
        elif isinstance(source, PolicySource) and not source.is_callable_ref():
            places[f"action_sources.{name}.policy"] = source.policy
    if "/" in spec.model or "\\" in spec.model:  # a bare name is a bundled model
        places["model"] = spec.model
    return {k: v for k, v in places.items() if v is not None and not storage.is_remote(v)}


def check_paths(spec: JobSpec, job_dir: Path, working_dir: Path, output: str) -> list[str]:
    """SpecError for relative paths the upload would not carry; returns the output's exclude
    pattern if the output lies inside the working directory (earlier local runs stay home)."""
    for field, value in _local_paths(spec).items():
        if Path(value).is_absolute():
            continue  # must exist on the cluster's nodes (e.g. inside the image); cannot check here
        resolved = (job_dir / value).resolve()
        if not resolved.is_relative_to(working_dir):
            raise SpecError(f"{field} '{value}' resolves to {resolved}, outside the working directory "
                            f"{working_dir} that is uploaded; move it inside, pass a larger "
                            "--working-dir, or use an absolute path that exists on the cluster or an "
                            "s3:// URI.")
    if storage.is_remote(output):
        return []
    if not Path(output).is_absolute():
        raise SpecError(f"output '{output}' is a relative path: on the cluster it would be written into "
                        "the job's temporary copy of the working directory on the head node and lost. "
                        "Use an s3:// URI (or an absolute path every node shares) in output.path or "
                        "--output.")
    inside = Path(output).resolve()
    return [inside.relative_to(working_dir).as_posix()] if inside.is_relative_to(working_dir) else []


def prepare(job: str | Path, *, working_dir: str | Path | None = None, output: str | None = None,
            model: str | None = None, overrides: list[str] | None = None,
            overwrite: bool = False, take_over: bool = False) -> Submission:
    """Validate the job file and build the submission; SpecError naming the problem otherwise."""
    path = Path(job).expanduser().resolve()
    data = apply_overrides(load_yaml_mapping(path), overrides or [])
    spec = validate(JobSpec, data, source=str(path))
    root = Path(working_dir).expanduser().resolve() if working_dir is not None else path.parent
    if not root.is_dir():
        raise SpecError(f"--working-dir {root} is not a directory.")
    if not path.is_relative_to(root):
        raise SpecError(f"the job file {path} is not inside the working directory {root}; it must be "
                        "uploaded with it. Pass a --working-dir that contains it.")
    if model is not None:
        spec.model = model
    excludes = check_paths(spec, path.parent, root, output or spec.output.path)
    argv = ["iws", "generate", path.relative_to(root).as_posix(), "--no-progress"]
    argv += ["--output", output] if output else []
    argv += ["--model", model] if model else []
    for item in overrides or []:
        argv += ["--set", item]
    argv += ["--overwrite"] if overwrite else []
    argv += ["--take-over"] if take_over else []
    return Submission(job_name=spec.name, entrypoint=shlex.join(argv), working_dir=root,
                      excludes=EXCLUDES + excludes)
