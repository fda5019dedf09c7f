"""Checkpoint directories: model.safetensors + config.json. Nothing is ever unpickled.

Every way a user can hand us a bad checkpoint (missing, truncated, from another config, a
pickle) ends in a SpecError that names the file and says what to do.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from schemas.errors import SpecError, validate
from sim_model.config import FORMAT_VERSION, CheckpointConfig
from sim_model.storage.atomic import replace_dir
from sim_model.storage.uri import is_s3

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
BUNDLED_DIR = Path(__file__).parent / "bundled"
PICKLE_SUFFIXES = {".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".bin", ".tar"}
# pickle protocols 2-5 (b"\x80" then the protocol number); the zip container of torch.save
_PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05", b"PK\x03\x04")


def _pickle_error(path: Path) -> SpecError:
    return SpecError(
        f"{path} looks like a pickle / torch.save file. iws never unpickles checkpoints (a pickle "
        "can run arbitrary code). Pass a checkpoint directory holding model.safetensors and "
        "config.json, as written by `iws train` or WorldModel.save().")


def bundled_names() -> tuple[str, ...]:
    """The bundled checkpoints' short names: the folders of sim_model/bundled/ that hold a
    checkpoint's config or weights. Shipping a task's model is adding its folder; nothing else
    lists them (a task names its own in `Task.bundled_model`)."""
    if not BUNDLED_DIR.is_dir():
        return ()
    return tuple(sorted(p.name for p in BUNDLED_DIR.iterdir()
                        if p.is_dir() and ((p / CONFIG).is_file() or (p / WEIGHTS).is_file())))


def resolve(path_or_name: str | os.PathLike[str]) -> Path:
    """A checkpoint directory, or a bundled short name such as 'pusht'.

    An s3:// checkpoint is downloaded once into the local cache (keyed by its objects' ETags,
    see sim_model.storage.s3.fetch) and loaded from there as usual."""
    text = os.fspath(path_or_name)
    if is_s3(text):
        return _fetch_s3(text)
    if text in bundled_names():
        path = BUNDLED_DIR / text
        if not (path / WEIGHTS).is_file():
            raise SpecError(f"the bundled checkpoint '{text}' is not installed (expected {path}/). "
                            f"Train one with `iws train ... --out DIR` and pass DIR/model, or copy a "
                            f"trained checkpoint directory to {path}.")
        return path
    path = Path(text)
    if path.is_file():
        if path.suffix in PICKLE_SUFFIXES or _looks_pickled(path):
            raise _pickle_error(path)
        if path.name in (WEIGHTS, CONFIG):
            return path.parent
        raise SpecError(f"{path} is a file; pass the checkpoint directory that holds {WEIGHTS} "
                        f"and {CONFIG}.")
    if not path.exists():
        names = ", ".join(bundled_names()) or "none"
        bare = "/" not in text and os.sep not in text
        raise SpecError(f"checkpoint {path} does not exist" + (
            f", and no bundled checkpoint '{text}' is installed (bundled: {names})" if bare else "")
            + ". Pass a directory written by `iws train` (its 'model' subfolder) or WorldModel.save(), "
            f"or a bundled name ({names}).")
    return path


def _fetch_s3(uri: str) -> Path:
    from sim_model.storage import s3

    try:
        return s3.fetch(uri.rstrip("/"), names=(CONFIG, WEIGHTS), kind="checkpoints")
    except SpecError as error:
        raise SpecError(f"cannot fetch checkpoint {uri}: {error} An s3:// checkpoint is a prefix "
                        f"holding {WEIGHTS} and {CONFIG}, as WorldModel.save() writes them.") from None


def _looks_pickled(path: Path) -> bool:
    """True for a pickle or torch.save file. A safetensors file starts with its header's length
    (8 bytes, little-endian) and then the JSON header itself; whatever the length's first bytes
    happen to be (a 640-byte header starts 0x80 0x02, as a protocol-2 pickle does), such a file
    is not a pickle."""
    with open(path, "rb") as handle:
        head = handle.read(9)
    if head[8:9] == b"{" and int.from_bytes(head[:8], "little") < path.stat().st_size:
        return False
    return any(head.startswith(magic) for magic in _PICKLE_MAGIC)


def read_config(directory: Path) -> CheckpointConfig:
    path = directory / CONFIG
    if not path.is_file():
        raise SpecError(f"{path} is missing; a checkpoint directory needs {CONFIG} beside {WEIGHTS}. "
                        "Re-save the model with WorldModel.save() or `iws train`.")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SpecError(f"{path} is not valid JSON ({error}); the file is damaged. Re-save the model.") from None
    if isinstance(data, dict) and data.get("format_version", FORMAT_VERSION) > FORMAT_VERSION:
        raise SpecError(f"{path} has format_version {data['format_version']}, newer than this iws "
                        f"understands ({FORMAT_VERSION}); upgrade iws.")
    return validate(CheckpointConfig, data, source=str(path))


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    path = directory / WEIGHTS
    if not path.is_file():
        pickles = sorted(p.name for p in directory.glob("*") if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            raise _pickle_error(directory / pickles[0])
        raise SpecError(f"{path} is missing; the checkpoint directory {directory} holds no weights. "
                        "Point at a complete checkpoint (e.g. the 'model' folder of a training run).")
    if _looks_pickled(path):
        raise _pickle_error(path)
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as error:
        raise SpecError(f"{path} cannot be read as safetensors ({error}); the file is truncated or "
                        "damaged (an interrupted copy?). Copy it again or re-save the model.") from None


def check_shapes(directory: Path, expected: dict[str, torch.Tensor], found: dict[str, torch.Tensor]) -> None:
    """Weights must match the architecture config.json describes, name for name, shape for shape."""
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    wrong = [f"{k}: file {tuple(found[k].shape)} vs config {tuple(v.shape)}"
             for k, v in expected.items() if k in found and found[k].shape != v.shape]
    if not (missing or extra or wrong):
        return
    details = "; ".join(filter(None, [
        f"missing {missing[:3]}{' ...' if len(missing) > 3 else ''}" if missing else "",
        f"unexpected {extra[:3]}{' ...' if len(extra) > 3 else ''}" if extra else "",
        f"shape mismatch {wrong[:3]}{' ...' if len(wrong) > 3 else ''}" if wrong else "",
    ]))
    raise SpecError(f"{directory / WEIGHTS} does not match the architecture in {directory / CONFIG} "
                    f"({details}). The two files come from different models: keep the config.json "
                    "that was saved with these weights, or re-save the model.")


def write_checkpoint(directory: str | os.PathLike[str], config: CheckpointConfig,
                     tensors: dict[str, torch.Tensor]) -> Path:
    """Write weights and config into a temporary sibling, then swap it in: a crash leaves the old
    checkpoint or the new one, never a half-written mix."""

    def write(tmp: Path) -> None:
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, tmp / WEIGHTS,
                  metadata={"format": "pt"})
        (tmp / CONFIG).write_text(config.model_dump_json(indent=2))

    return replace_dir(directory, write)
