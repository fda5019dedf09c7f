"""A LeRobot v2.1 dataset (openpi's, GR00T's, or `iws export lerobot --codebase v2.1`) made
readable as v3.0 by lerobot 0.4.4's own converter, which only lerobot defines the meaning of:
`lerobot/datasets/v30/convert_dataset_v21_to_v30.py`. `open_dataset` reads v2.1 through a
cached conversion (`v30_copy`), so `iws import` and every reader take v2.1 as they take v3.0.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

from schemas import SpecError
from sim_model.storage import atomic

V21 = "v2.1"


def is_v21(root: str | os.PathLike[str]) -> bool:
    """Whether the LeRobot dataset at `root` says it is codebase v2.x."""
    try:
        info = json.loads((Path(root) / "meta" / "info.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and str(info.get("codebase_version", "")).startswith("v2")


def convert_to_v30(root: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Path:
    """A v3.0 copy at `dest` of the v2.1 dataset at `root`, made by lerobot 0.4.4's own
    converter (`lerobot/datasets/v30/convert_dataset_v21_to_v30.py`). `root` is not changed:
    the converter works in place, so it runs on a tree that links to root's data and videos."""
    from lerobot.datasets.v30 import convert_dataset_v21_to_v30 as converter

    root, dest = Path(root).absolute(), Path(dest).absolute()
    info = json.loads((root / "meta" / "info.json").read_text())
    if info.get("codebase_version") != V21:
        raise SpecError(f"{root} is LeRobot {info.get('codebase_version')!r}; only v2.1 converts to v3.0 "
                        "(an older v2.0 dataset: convert it to v2.1 with lerobot 0.3.x first).")
    with tempfile.TemporaryDirectory(prefix=".v21-", dir=dest.parent) as tmp:
        staged = Path(tmp) / "dataset"
        staged.mkdir()
        shutil.copytree(root / "meta", staged / "meta")
        for name in ("data", "videos"):
            if (root / name).is_dir():
                (staged / name).symlink_to(root / name, target_is_directory=True)
        try:  # the converter prints and draws progress bars: kept off the user's terminal
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                converter.convert_dataset(repo_id="dataset", root=tmp, push_to_hub=False)
        except Exception as error:  # whatever lerobot's converter raises on a damaged dataset
            cause = f"{error!r}" + (f" from {error.__cause__!r}" if error.__cause__ else "")
            raise SpecError(f"lerobot's v2.1 -> v3.0 converter cannot read {root}: {cause}. Check "
                            "meta/episodes.jsonl, meta/episodes_stats.jsonl and that every episode's "
                            "parquet file and video is present.") from None
        atomic.move_dir_into_place(staged, dest)
    return dest


def v30_copy(root: str | os.PathLike[str]) -> Path:
    """A cached v3.0 conversion of the v2.1 dataset at `root` (keyed by its files' names, sizes
    and times), for reading it as any LeRobot dataset is read."""
    from sim_model.storage.s3 import cache_root

    root = Path(root).absolute()
    digest = hashlib.sha256(str(root).encode())
    for path in sorted(root.rglob("*")):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    home = cache_root() / "lerobot-v21" / digest.hexdigest()[:24]
    if not (home / "meta" / "info.json").is_file():
        home.parent.mkdir(parents=True, exist_ok=True)
        convert_to_v30(root, home)
    return home
