"""What GR00T and openpi read beside a LeRobot v2.1 dataset: GR00T's meta/modality.json and
openpi's norm_stats.json, from the dataset's own features and statistics.

GR00T (NVIDIA/Isaac-GR00T, `gr00t/data/`; N1.5's `schema.py` LeRobotModalityMetadata, N1.6's
`dataset/lerobot_episode_loader.py`) reads `meta/modality.json`:

    {"state":  {group: {"start", "end", "original_key", "dtype", "absolute"}},   start/end slice
     "action": {group: {...}},                                                 the column
     "video":  {name: {"original_key": "observation.images.<camera>"}},
     "annotation": {"human.task_description": {"original_key": "task_index"}}}

State groups are the bodies the state's names describe (`agent_x, agent_y` -> agent [0, 2);
`pusher0_x ... pusher1_y` -> pusher0 [0, 2), pusher1 [2, 4)). iws's actions are position
targets of those bodies, so an action as wide as the state gets the same groups; any other
action is one group `action`. The annotation reads the task text through task_index, so no
extra column is needed. GR00T also wants `meta/stats.json` with min/max/mean/std/q01/q99 of
every float column (else it recomputes and overwrites it); the v2.1 export writes that.

openpi (`src/openpi/shared/normalize.py`) reads `norm_stats.json` as
`{"norm_stats": {"state": {"mean", "std", "q01", "q99"}, "actions": {...}}}` from
`assets/<config>/<repo_id>/`; `openpi_norm_stats` writes it from the same statistics.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from schemas import FeatureSpec
from sim_model.data.formats.lerobot_features import ACTION_KEY, STATE_KEY

MODALITY_FILE = "meta/modality.json"
NORM_STATS_FILE = "meta/openpi/norm_stats.json"
TASK_ANNOTATION = "human.task_description"


def body_groups(names: tuple[str, ...], width: int, fallback: str) -> dict[str, tuple[int, int]]:
    """Contiguous index ranges of the bodies `names` describe, by the prefix before the last
    '_' ('agent_x', 'agent_y' -> {'agent': (0, 2)}); one group `fallback` when names are missing,
    unprefixed or a prefix comes back after another."""
    if len(names) != width or not names or any("_" not in n for n in names):
        return {fallback: (0, width)}
    groups: dict[str, tuple[int, int]] = {}
    for i, name in enumerate(names):
        body = name.rsplit("_", 1)[0]
        if body in groups and groups[body][1] != i:
            return {fallback: (0, width)}
        groups[body] = (groups.get(body, (i, i))[0], i + 1)
    return groups


def modality(features: FeatureSpec, mapping: dict[str, str]) -> dict:
    """GR00T's modality description of a dataset with these features (`mapping`: iws key ->
    LeRobot key, as exported)."""
    if features.state_dim:
        state = body_groups(features.state_names, features.state_dim, "state")
    else:
        state = {}
    action = state if state and features.action_dim == features.state_dim else \
        body_groups(features.action_names, features.action_dim, "action")

    def entries(groups: dict[str, tuple[int, int]], key: str) -> dict:
        return {name: {"start": a, "end": b, "original_key": key, "dtype": "float32", "absolute": True}
                for name, (a, b) in groups.items()}

    return {
        "state": entries(state, STATE_KEY),
        "action": entries(action, ACTION_KEY),
        "video": {camera: {"original_key": mapping[camera]} for camera in features.camera_names},
        "annotation": {TASK_ANNOTATION: {"original_key": "task_index"}},
    }


def write_modality(root: Path, features: FeatureSpec, mapping: dict[str, str]) -> Path:
    path = root / MODALITY_FILE
    path.write_text(json.dumps(modality(features, mapping), indent=4))
    return path


def openpi_norm_stats(stats: dict[str, dict[str, np.ndarray]], has_state: bool) -> dict:
    """openpi's norm_stats.json from a dataset's stats (lerobot layout): state and actions per
    dimension, as openpi computes them for a config whose transforms keep both as recorded."""
    wanted = {"actions": ACTION_KEY, **({"state": STATE_KEY} if has_state else {})}
    return {"norm_stats": {name: {key: np.asarray(stats[column][key], dtype=np.float64).ravel().tolist()
                                  for key in ("mean", "std", "q01", "q99")}
                           for name, column in wanted.items()}}
