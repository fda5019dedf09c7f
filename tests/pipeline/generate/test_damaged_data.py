"""`iws train` and `iws export` on a damaged episode store: the file is named, with what to do,
exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli import main
from tests.fixtures.store import build_tiny_pusht_store


@pytest.fixture
def restore_torch_threads():
    """`iws train --threads` sets torch's process-wide thread count; give it back."""
    import torch

    saved = torch.get_num_threads()
    yield
    torch.set_num_threads(saved)


@pytest.mark.parametrize("damaged", [".zgroup", "data/top/0.0.0.0"])
def test_train_and_export_name_the_damaged_file(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                restore_torch_threads, damaged: str) -> None:
    store = Path(build_tiny_pusht_store(tmp_path).path)
    (store / damaged).write_bytes(b"{\x00 torn" * 4)
    commands = {
        "train": ["train", "--stage", "autoencoder", "--data", str(store), "--out", str(tmp_path / "run"),
                  "--preset", "tiny", "--steps", "1", "--threads", "1", "--no-progress"],
        "export": ["export", "lerobot", str(store), str(tmp_path / "lerobot"), "--vcodec", "h264"],
    }
    for name, argv in commands.items():
        assert main(argv) == 2, name
        err = capsys.readouterr().err
        assert f"iws {name}: error:" in err and str(store / damaged) in err, err
        assert "Restore the file from a copy" in err and "Traceback" not in err, err
    assert not (tmp_path / "lerobot").exists()
