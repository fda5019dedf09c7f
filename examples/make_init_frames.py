"""Render the initial frames that ship with the examples: gym-pusht reset states as 96x96 PNGs.

Run once from the repository root (the PNGs are committed, so users never need gym-pusht):

    python examples/make_init_frames.py --count 8 --out examples/pusht_init

Each reset draws a random agent and block pose from its seed; `index.json` beside the images
records the seed, agent position and block pose of every frame.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import gym_pusht  # noqa: F401  (registers gym_pusht/PushT-v0)
import gymnasium as gym
from PIL import Image

log = logging.getLogger("make_init_frames")


def render_initial_frames(count: int, out: Path, first_seed: int = 1000) -> list[dict]:
    """Reset PushT `count` times with consecutive seeds and save the first observation as PNG."""
    env = gym.make("gym_pusht/PushT-v0", obs_type="pixels_agent_pos", render_mode="rgb_array")
    out.mkdir(parents=True, exist_ok=True)
    index = []
    for i in range(count):
        seed = first_seed + i
        obs, info = env.reset(seed=seed)
        name = f"init_{i:02d}.png"
        Image.fromarray(obs["pixels"]).save(out / name, optimize=True)  # (96, 96, 3) uint8
        index.append({"image": name, "seed": seed,
                      "agent_pos": [float(v) for v in obs["agent_pos"]],
                      "block_pose": [float(v) for v in info["block_pose"]]})
    env.close()
    (out / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    return index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=8, help="number of frames")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "pusht_init")
    parser.add_argument("--first-seed", type=int, default=1000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    index = render_initial_frames(args.count, args.out, args.first_seed)
    log.info("wrote %d frames to %s", len(index), args.out)


if __name__ == "__main__":
    main()
