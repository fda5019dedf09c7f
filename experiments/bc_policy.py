"""A small image-based behaviour-cloning policy for PushT: the documented stand-in for ACT or
Diffusion Policy, which take hours per run on 2 CPU cores.

Input: the 96 x 96 frame and the agent position; output: the next `CHUNK` agent targets
(canvas units, normalised to [-1, 1]), executed open loop for `EXECUTE` steps before the policy
looks again (action chunking, as ACT and Diffusion Policy do). Trained with an L1 loss and
random-shift augmentation on a LeRobot v3.0 dataset, read with lerobot's own `LeRobotDataset`
(frames decoded from its videos, as lerobot-train sees them), or on an iws Zarr store.
Checkpoints are safetensors weights plus a JSON config, like the world model's; nothing is
pickled.

    iws export lerobot demos.zarr demos_lerobot
    python -m experiments.bc_policy --data demos_lerobot --out runs/bc_real --steps 3000 \
        --save-at 500,1500,3000
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from schemas import EpisodeSpec, FeatureSpec, SpecError
from sim_model.data.formats.lerobot_reader import is_lerobot_root
from sim_model.data.store import EpisodeStore
from workers.actions.base import Observation

log = logging.getLogger("bc_policy")

CANVAS = 512.0  # PushT actions and agent positions are canvas coordinates in [0, 512]
CHUNK = 8  # targets predicted per look
EXECUTE = 4  # targets executed before the next look
SHIFT = 4  # random-shift augmentation, pixels
WEIGHTS, CONFIG = "policy.safetensors", "policy.json"


def to_unit(x: torch.Tensor | np.ndarray) -> torch.Tensor:
    return torch.as_tensor(x, dtype=torch.float32) / (CANVAS / 2) - 1


def from_unit(x: torch.Tensor) -> np.ndarray:
    return ((x.clamp(-1, 1) + 1) * (CANVAS / 2)).numpy()


class BCNet(nn.Module):
    """Conv encoder (4 stride-2 stages, GroupNorm) + agent position -> MLP -> CHUNK targets."""

    def __init__(self, resolution: int = 96, width: int = 32) -> None:
        super().__init__()
        self.resolution = resolution
        layers: list[nn.Module] = []
        channels = [3, width, 2 * width, 4 * width, 4 * width]
        for c_in, c_out in zip(channels[:-1], channels[1:], strict=True):
            layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1), nn.GroupNorm(8, c_out), nn.SiLU()]
        self.encoder = nn.Sequential(*layers)
        side = resolution // 16
        self.head = nn.Sequential(nn.Linear(channels[-1] * side * side + 2, 256), nn.SiLU(),
                                  nn.Linear(256, 256), nn.SiLU(), nn.Linear(256, CHUNK * 2))

    def forward(self, images: torch.Tensor, agent: torch.Tensor) -> torch.Tensor:
        """images (B, 3, H, W) in [0, 1], agent (B, 2) in [-1, 1] -> (B, CHUNK, 2) in [-1, 1]."""
        features = self.encoder(images * 2 - 1).flatten(1)
        return self.head(torch.cat([features, agent], 1)).view(-1, CHUNK, 2)


Demos = tuple[torch.Tensor, torch.Tensor, torch.Tensor, np.ndarray]


def load_demos(path: str) -> Demos:
    """Frames (N, 3, H, W) uint8, agent (N, 2) and action (N, 2) in [-1, 1], episode ends, from
    a LeRobot dataset root or an iws episode store."""
    return load_lerobot_demos(path) if is_lerobot_root(path) else load_store_demos(path)


def load_lerobot_demos(root: str) -> Demos:
    """The demos of a LeRobot dataset, read with `LeRobotDataset` as lerobot-train reads them:
    its first camera, `observation.state` and `action`."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from sim_model.data.formats.lerobot_reader import video_backend

    dataset = LeRobotDataset(f"local/{Path(root).name}", root=root, video_backend=video_backend())
    features = dataset.features
    cameras = [k for k, f in features.items() if f["dtype"] in ("video", "image")]
    shapes = {k: tuple(features[k]["shape"]) if k in features else None
              for k in ("observation.state", "action")}
    if not cameras or set(shapes.values()) != {(2,)} or dataset.num_episodes == 0:
        raise SpecError(f"{root}: the BC policy trains on PushT episodes (a camera, 2-D "
                        f"observation.state and action); this dataset has cameras {cameras}, "
                        f"shapes {shapes} and {dataset.num_episodes} episodes.")
    frames, agent, actions = [], [], []
    for batch in torch.utils.data.DataLoader(dataset, batch_size=64, num_workers=0):
        frames.append((batch[cameras[0]] * 255).round().to(torch.uint8))  # (B, 3, H, W)
        agent.append(batch["observation.state"])
        actions.append(batch["action"])
    ends = np.asarray(dataset.meta.episodes["dataset_to_index"], np.int64)
    return torch.cat(frames), to_unit(torch.cat(agent)), to_unit(torch.cat(actions)), ends


def load_store_demos(path: str) -> Demos:
    """The demos of an iws episode store: its first camera, state and action."""
    store = EpisodeStore.open(path, "r")
    if store.features.state_dim != 2 or store.features.action_dim != 2 or len(store) == 0:
        raise SpecError(f"{path}: the BC policy trains on PushT episodes (2-D state and action); "
                        f"this store has state_dim {store.features.state_dim}, action_dim "
                        f"{store.features.action_dim} and {len(store)} episodes.")
    camera = store.features.camera_names[0]
    data, ends = store.load_all([camera, "state", "action"])
    frames = torch.from_numpy(data[camera]).permute(0, 3, 1, 2).contiguous()
    return frames, to_unit(data["state"]), to_unit(data["action"]), ends


def chunk_targets(actions: torch.Tensor, ends: np.ndarray) -> torch.Tensor:
    """(N, CHUNK, 2): the actions from each step on, the episode's last repeated past its end."""
    starts = np.concatenate([[0], ends[:-1]])
    index = np.arange(len(actions))[:, None] + np.arange(CHUNK)[None]
    last = np.repeat(ends - 1, ends - starts)[:, None]
    return actions[torch.from_numpy(np.minimum(index, last))]


def shift(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Random-shift augmentation: replicate-pad by SHIFT and crop back at a random offset."""
    b, _, h, w = images.shape
    padded = F.pad(images, (SHIFT,) * 4, mode="replicate")
    dy, dx = torch.randint(0, 2 * SHIFT + 1, (2, b), generator=generator).tolist()
    return torch.stack([padded[i, :, y:y + h, x:x + w] for i, (y, x) in enumerate(zip(dy, dx, strict=True))])


def train(data: str, out: Path, steps: int, save_at: Sequence[int], batch_size: int = 64,
          lr: float = 1e-3, seed: int = 0) -> list[Path]:
    """Train on the LeRobot dataset (or iws store) at `data`; write a checkpoint at each step in
    `save_at` (out/step-N)."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    frames, agent, actions, ends = load_demos(data)
    kind = "lerobot" if is_lerobot_root(data) else "iws"
    targets = chunk_targets(actions, ends)
    net = BCNet(frames.shape[-1])
    optimizer = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5
                                                 * (1 + np.cos(np.pi * min(1.0, s / steps))))
    written, started = [], time.perf_counter()
    for step in range(1, steps + 1):
        idx = torch.randint(0, len(frames), (batch_size,), generator=generator)
        images = shift(frames[idx].float() / 255, generator)
        loss = F.l1_loss(net(images, agent[idx]), targets[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 250 == 0:
            log.info("step %d/%d: L1 %.4f (%.0f s)", step, steps, loss.item(), time.perf_counter() - started)
        if step in save_at:
            written.append(save(net, out / f"step-{step}", {"data": Path(data).name, "format": kind,
                                                            "steps": step,
                                                            "frames": len(frames), "episodes": len(ends),
                                                            "seconds": time.perf_counter() - started}))
    return written


def save(net: BCNet, directory: Path, info: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(directory / WEIGHTS))
    (directory / CONFIG).write_text(json.dumps({"resolution": net.resolution, "chunk": CHUNK, **info},
                                               indent=2))
    return directory


class BCPolicy:
    """A trained BCNet as a batched action source (`reset` / `actions` / `describe`)."""

    def __init__(self, directory: str | Path, features: FeatureSpec | None = None) -> None:
        path = Path(directory)
        if not (path / WEIGHTS).is_file() or not (path / CONFIG).is_file():
            raise SpecError(f"{path} is not a BC policy checkpoint (needs {WEIGHTS} and {CONFIG}); "
                            "train one with `python -m experiments.bc_policy`.")
        self.config = json.loads((path / CONFIG).read_text())
        self.name = f"bc:{path.parent.name}/{path.name}"
        self.net = BCNet(int(self.config["resolution"]))
        self.net.load_state_dict(load_file(str(path / WEIGHTS)))
        self.net.eval()
        self.queue: np.ndarray | None = None

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        self.queue = None

    @torch.no_grad()
    def actions(self, step: int, observation: Observation) -> np.ndarray:
        if self.queue is None or step % EXECUTE == 0:
            if observation.state is None:
                raise SpecError("the BC policy needs the agent position (state) in its observation.")
            images = torch.from_numpy(observation.frames[:, 0]).permute(0, 3, 1, 2).float() / 255
            self.queue = from_unit(self.net(images, to_unit(observation.state[:, :2])))
        return self.queue[:, step % EXECUTE].astype(np.float32)

    def describe(self, row: int) -> str:
        return self.name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="LeRobot dataset root (or iws Zarr store) "
                        "of PushT demonstrations")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--save-at", default="", help="comma-separated steps (the last is always saved)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    save_at = {int(s) for s in args.save_at.split(",") if s} | {args.steps}
    for path in train(args.data, args.out, args.steps, sorted(save_at), seed=args.seed):
        print(path)


if __name__ == "__main__":
    main()
