"""Policy action source (closed loop): a policy sees the generated frames and predicted state.

Two kinds of policy:
  - 'package.module:function' - called as fn(step, observation) -> (B, A); if the name is a class it
    is built once as cls(features) and its `actions(step, observation)` (and `reset(episodes,
    observation)` if present) are used, so it can keep per-episode memory.
  - a LeRobot pretrained-policy directory (config.json + model.safetensors [+ processor JSONs]),
    loaded with lerobot's own factory; its saved pre/post-processors normalise inputs and outputs.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from schemas import EpisodeSpec, FeatureSpec, SpecError
from schemas.job import PolicySource
from workers.actions.base import Observation, check_actions

log = logging.getLogger(__name__)


def import_object(ref: str, what: str) -> Any:
    """Resolve 'package.module:attr' (attr may be dotted); SpecError naming what failed."""
    module_name, _, attr = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise SpecError(f"{what} '{ref}': cannot import module '{module_name}' ({error}); check the "
                        "name and that the module is on the Python path of every Ray worker.") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise SpecError(f"{what} '{ref}': module '{module_name}' has no attribute '{attr}'.")
        obj = getattr(obj, part)
    if not callable(obj):
        raise SpecError(f"{what} '{ref}' is not callable.")
    return obj


class CallablePolicy:
    """Adapter for a user function or class named 'module:function'."""

    def __init__(self, ref: str, features: FeatureSpec) -> None:
        target = import_object(ref, "policy")
        self.ref, self.features = ref, features
        self._obj = target(features) if isinstance(target, type) else None
        self._fn: Callable[[int, Observation], Any] = self._obj.actions if self._obj is not None else target

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        if self._obj is not None and hasattr(self._obj, "reset"):
            self._obj.reset(episodes, observation)

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        out = self._fn(step, observation)
        return check_actions(out, len(observation), self.features.action_dim, f"policy {self.ref}")

    def describe(self, row: int) -> str:
        return f"policy:{self.ref}"


class LeRobotPolicy:
    """A LeRobot pretrained policy driven in lockstep over the batch."""

    def __init__(self, directory: str, features: FeatureSpec, device: str = "cpu") -> None:
        import torch  # noqa: F401  (lerobot needs it; imported here to keep module import light)
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors

        path = Path(directory)
        if not (path / "config.json").is_file():
            raise SpecError(f"policy directory {path} has no config.json; give a LeRobot "
                            "save_pretrained directory or a 'module:function' callable.")
        config = PreTrainedConfig.from_pretrained(path)
        config.device = device
        self.policy = get_policy_class(config.type).from_pretrained(path, config=config)
        self.features, self.name, self.device = features, path.name, device
        self.preprocess = self.postprocess = None
        if (path / "policy_preprocessor.json").is_file():
            self.preprocess, self.postprocess = make_pre_post_processors(config, pretrained_path=str(path))
        wanted = set(config.input_features)
        self.image_keys = [f"observation.images.{c}" for c in features.camera_names]
        if len(self.image_keys) == 1 and "observation.image" in wanted:
            # Trained on an export with `--camera-key observation.image` (gym-pusht's key in
            # lerobot-eval): the one camera is that input.
            self.image_keys = ["observation.image"]
        missing = [k for k in wanted if k not in self.image_keys and k != "observation.state"]
        if missing:
            raise SpecError(f"policy {path} expects inputs {missing} that the world model does not produce "
                            f"(it produces {self.image_keys + ['observation.state']}).")
        self.use_state = "observation.state" in wanted

    def _batch(self, observation: Observation) -> dict[str, Any]:
        import torch

        # frames (B, V, H, W, 3) uint8 -> per camera (B, 3, H, W) float in [0, 1], as LeRobot loads them.
        frames = torch.from_numpy(np.ascontiguousarray(observation.frames)).permute(1, 0, 4, 2, 3)
        batch: dict[str, Any] = {k: f.float().div(255) for k, f in zip(self.image_keys, frames, strict=True)}
        if self.use_state:
            if observation.state is None:
                raise SpecError(f"policy {self.name} needs observation.state, but the world model "
                                "predicts no state (features.state_dim is 0).")
            batch["observation.state"] = torch.from_numpy(np.asarray(observation.state, np.float32))
        return batch

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        import torch

        # Diffusion-style policies draw noise from torch's global generator: seed it from the batch so
        # that a retried batch makes identical actions. This runs inside a replica's own process.
        torch.manual_seed(episodes[0].seed if episodes else 0)
        self.policy.reset()

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        import torch

        batch = self._batch(observation)
        with torch.inference_mode():
            if self.preprocess is not None:
                batch = self.preprocess(batch)
            action = self.policy.select_action(batch)
            if self.postprocess is not None:
                action = self.postprocess(action)
        return check_actions(action.detach().cpu().numpy(), len(observation), self.features.action_dim,
                             f"policy {self.name}")

    def describe(self, row: int) -> str:
        return f"policy:{self.name}"


def make_policy_source(cfg: PolicySource, features: FeatureSpec, device: str = "cpu") -> Any:
    if cfg.is_callable_ref():
        return CallablePolicy(cfg.policy, features)
    if not Path(cfg.policy).is_dir():
        raise SpecError(f"policy '{cfg.policy}' is neither 'package.module:function' nor an existing "
                        "LeRobot policy directory.")
    return LeRobotPolicy(cfg.policy, features, device)
