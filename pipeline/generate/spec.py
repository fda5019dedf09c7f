"""Reading a job file: validation, relative paths, and the job's identity hashes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from schemas import JobSpec, SpecError
from schemas.errors import read_yaml_mapping, validate
from schemas.job import PolicySource, ReplaySource
from sim_model import storage


def load_yaml_mapping(path: Path) -> dict[str, Any]:
    """The mapping a YAML job file holds; SpecError for a missing, unparsable or non-mapping file."""
    return read_yaml_mapping(path, kind="job file", expected="a YAML job spec")


def _resolve(value: str, base: Path) -> str:
    if storage.is_remote(value) or Path(value).is_absolute():
        return value
    return str((base / value).resolve())


def _resolve_model(value: str, base: Path) -> str:
    """A bare name ('pusht') stays a bundled-model name unless a directory of that name is beside
    the job file; anything with a path separator is a path."""
    candidate = base / value
    if "/" not in value and "\\" not in value and not candidate.exists():
        return value
    return _resolve(value, base)


def resolve_paths(spec: JobSpec, base: Path, output: str | None = None) -> JobSpec:
    """A copy of `spec` whose relative paths are resolved against `base` (the job file's directory).

    `output` (from the command line) replaces output.path and resolves against the working
    directory, as command-line paths do.
    """
    data = spec.model_copy(deep=True)
    if data.model:  # left out: load_job fills in the registry's default
        data.model = _resolve_model(data.model, base)
    if data.init.dataset is not None:
        data.init.dataset = _resolve(data.init.dataset, base)
    if data.init.images is not None:
        data.init.images = [_resolve(p, base) for p in data.init.images]
    for source in data.action_sources.values():
        if isinstance(source, ReplaySource):
            source.path = _resolve(source.path, base)
        elif isinstance(source, PolicySource) and not source.is_callable_ref():
            source.policy = _resolve(source.policy, base)
    data.output.path = _resolve(output, Path.cwd()) if output else _resolve(data.output.path, base)
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply command-line 'dotted.field=value' settings (values parsed as YAML) to a job dict."""
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise SpecError(f"--set '{item}' is not FIELD=VALUE (e.g. --set episodes=100).")
        target = data
        *parents, leaf = key.split(".")
        for part in parents:
            child = target.setdefault(part, {})
            if not isinstance(child, dict):
                raise SpecError(f"--set '{item}': '{part}' is not a group of fields.")
            target = child
        target[leaf] = yaml.safe_load(text)
    return data


def load_job(path: str | Path, output: str | None = None, model: str | None = None,
             overrides: list[str] | None = None) -> JobSpec:
    """Validate a YAML job file (SpecError naming the field otherwise) and resolve its paths.

    `output` and `model` (command-line paths, relative to the working directory) and `overrides`
    ('field=value') replace what the file says.
    """
    path = Path(path)
    data = load_yaml_mapping(path)
    data = apply_overrides(data, overrides or [])
    spec = validate(JobSpec, data, source=str(path))
    spec = resolve_paths(spec, path.resolve().parent, output)
    if model is not None:
        spec.model = _resolve_model(model, Path.cwd())
    if not spec.model:
        spec.model = _default_model()
    return spec


def _default_model() -> str:
    """The bundled model of the registry's first task: what a spec without `model` runs."""
    from pipeline.tasks.registry import default_task

    model = default_task().bundled_model
    if model is None:
        raise SpecError("model: the job names no model and the first task of the registry ships "
                        "none; name a checkpoint directory or a bundled model.")
    return model


def spec_hash(spec: JobSpec) -> str:
    """sha256 of the whole validated spec (canonical JSON)."""
    return hashlib.sha256(json.dumps(spec.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


# Fields that change how a job runs or what it exports, never the episodes it makes; a rerun may
# change them and still resume.
RUN_ONLY_FIELDS = {"replicas", "resources", "output", "device"}


def content_hash(spec: JobSpec) -> str:
    """sha256 of everything that determines the episodes' bytes; equal hashes may resume."""
    data = spec.model_dump(mode="json", exclude=RUN_ONLY_FIELDS)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def content_diff(old: dict, new: dict) -> list[str]:
    """Top-level fields whose values differ between two content dumps."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
