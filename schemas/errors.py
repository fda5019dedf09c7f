"""Turn pydantic validation errors into one paragraph a user can act on."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


# What `iws schema NAME` prints (pipeline/commands/schema.py), by model: an error in one of these
# points at its NAME.
SCHEMA_NAMES = {"JobSpec": "job", "FeatureSpec": "features", "EpisodeSpec": "episode",
                "EpisodeRecord": "record", "RunManifest": "manifest", "TrainConfig": "train"}


class SpecError(ValueError):
    """A user-supplied spec, argument or file is invalid; the message says what and how to fix it."""


class UserError(Exception):
    """An error the user can fix that is not about a spec (a busy port, a missing output name);
    the CLI prints its message without a traceback, as it does a SpecError's."""


def _location(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "<root>"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_validation_error(error: ValidationError, model: type[BaseModel], source: str) -> str:
    """One line per problem: field, offending value, what pydantic says, and where to look."""
    lines = [f"{source} is not a valid {model.__name__}:"]
    for item in error.errors():
        where = _location(item["loc"])
        msg = item["msg"]
        if item["type"] == "missing":
            lines.append(f"  - field '{where}' is required but missing; add it.")
        elif item["type"] == "extra_forbidden":
            lines.append(
                f"  - field '{where}' is not a known field (value {_short(item.get('input'))}); "
                "check its spelling or remove it."
            )
        else:
            lines.append(f"  - field '{where}' = {_short(item.get('input'))}: {msg}.")
    name = SCHEMA_NAMES.get(model.__name__)
    if name is not None:
        lines.append(f"Run `iws schema {name}` to see every field.")
    return "\n".join(lines)


def validate(model: type[M], data: Any, source: str = "input") -> M:
    """Validate `data` as `model`, raising SpecError with a readable message."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise SpecError(describe_validation_error(error, model, source)) from None


def parse_record(model: type[M], text: str, source: str, fix: str) -> M:
    """`text`, read from a file iws wrote (`source`: a part record, a lease), as `model`.
    SpecError naming the file, what is wrong with it and `fix` when it is empty, not JSON or not
    a `model` (a disk that filled up, a hand edit, a file copied in from elsewhere)."""
    try:
        return model.model_validate_json(text)
    except ValidationError as error:
        first = error.errors()[0]
        where = "" if first["type"] == "json_invalid" else f"field '{_location(first['loc'])}': "
        what = "is empty" if not text.strip() else f"is not a valid {model.__name__} ({where}{first['msg']})"
        raise SpecError(f"{source} {what}; it is damaged, or not a file iws wrote. {fix}") from None


def read_yaml_mapping(path: str | Path, kind: str = "spec file", expected: str = "a YAML file") -> dict[str, Any]:
    """The mapping a YAML (or JSON) file holds; SpecError for a missing, unparsable or non-mapping file."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{kind} {path} does not exist; pass the path of {expected}.")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise SpecError(f"{path} is not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path} must hold a mapping of fields, found {type(data).__name__}.")
    return data


def load_yaml(model: type[M], path: str | Path) -> M:
    """Read a YAML (or JSON) file and validate it as `model`."""
    return validate(model, read_yaml_mapping(path), source=str(path))
