"""The bundled PushT model ships with the repository and loads by its short name."""

from pathlib import Path

import numpy as np
from PIL import Image

from sim_model.world_model import WorldModel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_bundled_pusht_model_loads_and_steps():
    wm = WorldModel.load("pusht")
    assert wm.features.camera_names == ("top",) and wm.has_state
    frame = np.asarray(Image.open(sorted((EXAMPLES / "pusht_init").glob("*.png"))[0]).convert("RGB"))
    wm.reset(frame[None], seeds=[0])
    out = wm.step(np.array([[256.0, 256.0]], np.float32))
    assert out.frames.shape == (1, 96, 96, 3) and out.frames.dtype == np.uint8
    assert out.state is not None and np.isfinite(out.state).all()


def test_example_job_validates_against_the_bundled_model():
    from pipeline.cli import main

    assert main(["generate", str(EXAMPLES / "pusht_generate.yaml"), "--check"]) == 0
