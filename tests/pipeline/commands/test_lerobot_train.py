"""lerobot-train (offline, CPU, subprocess) trains ACT and Diffusion Policy on an iws export,
ACT on a two-camera, two-arm export of sweep play and on a three-camera (wrist included) export
of mug play, and lerobot-eval runs such a policy in gym-pusht (the round trip of docs/lerobot.md).

Tiny on purpose: 3 episodes x 20 steps at 32x32 (96x96, gym-pusht's size, for the round trip),
batch 2, 10 steps, small networks. Each run is ~10 s of training after ~30 s of lerobot start-up
on the 2-core CI machine.
"""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.pusht.features import pusht_features
from sim_model.data.formats.lerobot_writer import export_lerobot
from sim_model.data.store import EpisodeStore
from tests.fixtures.store import make_pusht_episode

pytestmark = pytest.mark.slow
REPO = "iws/train_tiny"
REPO_ENV = "iws/pusht_env_tiny"
REPO_SWEEP = "iws/sweep_tiny"
REPO_MUG = "iws/mug_tiny"
COMMON = ["--steps=10", "--batch_size=2", "--num_workers=0", "--log_freq=5", "--eval_freq=0",
          "--save_checkpoint=false", "--wandb.enable=false", "--policy.device=cpu",
          "--policy.push_to_hub=false"]
POLICIES = {
    # ACT's ResNet-18 would download ImageNet weights: lerobot 0.4.4's field is
    # `pretrained_backbone_weights` (default "ResNet18_Weights.IMAGENET1K_V1"); null disables it.
    "act": ["--policy.pretrained_backbone_weights=null", "--policy.dim_model=64",
            "--policy.n_heads=2", "--policy.dim_feedforward=128", "--policy.n_encoder_layers=1",
            "--policy.n_decoder_layers=1", "--policy.chunk_size=8", "--policy.n_action_steps=8"],
    # Diffusion requires observation.state (the export writes it); horizon divisible by 2^2.
    "diffusion": ["--policy.horizon=8", "--policy.n_action_steps=4",
                  "--policy.drop_n_last_frames=3", "--policy.down_dims=[32,64]",
                  "--policy.diffusion_step_embed_dim=32",
                  "--policy.spatial_softmax_num_keypoints=8"],
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    features = pusht_features(resolution=32)
    store = EpisodeStore.create(tmp_path_factory.mktemp("src") / "store.zarr", features)
    for index in range(3):
        store.append(make_pusht_episode(features, index, 20))
    return export_lerobot(store, tmp_path_factory.mktemp("lr") / "train_tiny", repo_id=REPO)


@pytest.fixture(scope="module")
def pusht_env_dataset(tmp_path_factory) -> Path:
    """96x96 frames as gym-pusht renders them, the camera under lerobot-eval's pusht key."""
    features = pusht_features(resolution=96)
    store = EpisodeStore.create(tmp_path_factory.mktemp("src96") / "store.zarr", features)
    for index in range(3):
        store.append(make_pusht_episode(features, index, 20))
    return export_lerobot(store, tmp_path_factory.mktemp("lr96") / "pusht_env", repo_id=REPO_ENV,
                          camera_keys={"top": "observation.image"})


@pytest.fixture(scope="module")
def sweep_dataset(tmp_path_factory) -> Path:
    """Real sweep play (`iws collect sweep`) at 32x32: cameras top and side, 4-D action and state."""
    store = tmp_path_factory.mktemp("sweep") / "play.zarr"
    assert main(["collect", "sweep", "--episodes", "3", "--steps", "20", "--resolution", "32",
                 "--workers", "1", "--out", str(store), "--no-progress"]) == 0
    return export_lerobot(store, tmp_path_factory.mktemp("lr_sweep") / "sweep", repo_id=REPO_SWEEP)


@pytest.fixture(scope="module")
def mug_dataset(tmp_path_factory) -> Path:
    """Real mug play (`iws collect mug`) at 32x32: cameras front, side and wrist, 4-D action and state."""
    store = tmp_path_factory.mktemp("mug") / "play.zarr"
    assert main(["collect", "mug", "--episodes", "3", "--steps", "20", "--resolution", "32",
                 "--workers", "1", "--out", str(store), "--no-progress"]) == 0
    return export_lerobot(store, tmp_path_factory.mktemp("lr_mug") / "mug", repo_id=REPO_MUG)


def _with_checkpoint(args: list[str]) -> list[str]:
    """COMMON-style arguments that save the final checkpoint (its config names the inputs)."""
    return ["--save_checkpoint=true" if a == "--save_checkpoint=false" else a for a in args]


def _lerobot(script: str, *args: str) -> str:
    """Run a lerobot console script offline; its log, after asserting it succeeded."""
    command = [str(Path(sys.executable).with_name(script)), *args]
    # One intra-op thread unless told otherwise: these nets are tiny, and spinning OpenMP
    # threads on a busy 2-core machine cost more than they bring.
    env = {"OMP_NUM_THREADS": "1", **os.environ, "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "SVT_LOG": "1", "WANDB_MODE": "disabled"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    return log


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_lerobot_train_runs(dataset, tmp_path, policy):
    log = _lerobot("lerobot-train", f"--dataset.repo_id={REPO}", f"--dataset.root={dataset}",
                   f"--policy.type={policy}", f"--output_dir={tmp_path / 'run'}",
                   *COMMON, *POLICIES[policy])
    assert "End of training" in log
    losses = [float(x) for x in re.findall(r"step:\d+ .*?loss:([-\d.e+na]+)", log)]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses), losses


def test_act_trains_on_the_two_camera_sweep_export(sweep_dataset, tmp_path):
    """Both views are image inputs of the policy, and it predicts the two arms' 4-D action."""
    log = _lerobot("lerobot-train", f"--dataset.repo_id={REPO_SWEEP}",
                   f"--dataset.root={sweep_dataset}", "--policy.type=act",
                   f"--output_dir={tmp_path / 'run'}", *_with_checkpoint(COMMON), *POLICIES["act"])
    losses = [float(x) for x in re.findall(r"step:\d+ .*?loss:([-\d.e+na]+)", log)]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses), losses
    config = json.loads((tmp_path / "run/checkpoints/last/pretrained_model/config.json").read_text())
    inputs = config["input_features"]
    assert set(inputs) == {"observation.images.top", "observation.images.side", "observation.state"}
    assert inputs["observation.images.side"]["shape"] == [3, 32, 32]
    assert inputs["observation.state"]["shape"] == [4]
    assert config["output_features"]["action"]["shape"] == [4]


def test_act_trains_on_the_three_camera_mug_export(mug_dataset, tmp_path):
    """The LeRobot copy holds three observation.images.* keys that LeRobotDataset serves, and
    ACT takes all three views (the wrist camera among them) as image inputs."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    frame = LeRobotDataset(REPO_MUG, root=mug_dataset)[0]
    cameras = ("front", "side", "wrist")
    assert all(tuple(frame[f"observation.images.{c}"].shape) == (3, 32, 32) for c in cameras)
    log = _lerobot("lerobot-train", f"--dataset.repo_id={REPO_MUG}",
                   f"--dataset.root={mug_dataset}", "--policy.type=act",
                   f"--output_dir={tmp_path / 'run'}", *_with_checkpoint(COMMON), *POLICIES["act"])
    losses = [float(x) for x in re.findall(r"step:\d+ .*?loss:([-\d.e+na]+)", log)]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses), losses
    config = json.loads((tmp_path / "run/checkpoints/last/pretrained_model/config.json").read_text())
    assert set(config["input_features"]) == {*(f"observation.images.{c}" for c in cameras), "observation.state"}
    assert config["output_features"]["action"]["shape"] == [4]


def test_policy_trained_on_the_export_runs_in_lerobot_eval_pusht(pusht_env_dataset, tmp_path):
    """collect -> export --camera-key observation.image -> lerobot-train -> lerobot-eval in
    gym-pusht, with no rename: the policy's image input is the key the environment feeds."""
    train = _with_checkpoint([*COMMON, "--steps=4"])
    _lerobot("lerobot-train", f"--dataset.repo_id={REPO_ENV}", f"--dataset.root={pusht_env_dataset}",
             "--policy.type=act", f"--output_dir={tmp_path / 'run'}", *train, *POLICIES["act"])
    policy = tmp_path / "run/checkpoints/last/pretrained_model"
    assert "observation.image" in json.loads((policy / "config.json").read_text())["input_features"]
    log = _lerobot("lerobot-eval", f"--policy.path={policy}", "--env.type=pusht",
                   "--env.episode_length=10", "--eval.n_episodes=1", "--eval.batch_size=1",
                   "--policy.device=cpu", f"--output_dir={tmp_path / 'eval'}")
    assert "End of eval" in log
    overall = json.loads((tmp_path / "eval/eval_info.json").read_text())["overall"]
    assert overall["n_episodes"] == 1 and math.isfinite(overall["avg_sum_reward"])
