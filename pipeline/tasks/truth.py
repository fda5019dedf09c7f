"""What every task's ground truth (`iws eval ... --ground-truth TASK`, pipeline/<task>/truth.py)
shares: reading each episode's start from the Zarr store its spec points at, and running the
task's simulator over the specs batch by batch."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pipeline.tasks.base import SideScore
from schemas import EpisodeSpec, FeatureSpec, SpecError
from workers.init_frames import parse_ref

# One batch in the task's simulator: (specs, their first index) -> a score per spec, and the
# first-camera frames (T+1, H, W, 3) of the specs whose index is below `videos`.
BatchRoll = Callable[[Sequence[EpisodeSpec], int], tuple[list[SideScore], list[np.ndarray]]]


def table_resolution(features: FeatureSpec, task: str, cameras: Sequence[str], action_dim: int) -> int:
    """The frame size of a model whose cameras are the task table's (named `cameras`, in that
    order, square) and whose actions are `action_dim`-D; SpecError naming the mismatch otherwise."""
    cam = features.cameras[0]
    if list(features.camera_names) != list(cameras) or cam.height != cam.width or features.action_dim != action_dim:
        views = (f"one square camera '{cameras[0]}'" if len(cameras) == 1
                 else "square cameras " + ", ".join(cameras[:-1]) + f" and {cameras[-1]}")
        raise SpecError(f"--ground-truth {task} needs a {task}-like model: {views} and {action_dim}-D "
                        f"actions; this model has cameras {list(features.camera_names)} and action_dim "
                        f"{features.action_dim}.")
    return cam.height


def recorded_starts(specs: Sequence[EpisodeSpec], task: str, state_dim: int, extras: Sequence[str],
                    what: str) -> list[dict[str, np.ndarray]]:
    """Each spec's initial frame as its store recorded it: 'state' and the `extras`, one row
    each. SpecError (naming `what` the store lacks) unless the spec's --init is a Zarr store
    written by `iws collect TASK` with that state size and those extras."""
    from sim_model.data.formats import dataset_kind
    from sim_model.data.store import EpisodeStore

    starts: list[dict[str, np.ndarray]] = []
    stores: dict[str, EpisodeStore] = {}
    for spec in specs:
        path, episode, frame = parse_ref(spec.init_ref) or (spec.init_ref, 0, 0)
        if path not in stores:
            if dataset_kind(path) != "zarr":
                raise SpecError(f"--ground-truth {task} needs a Zarr episode store as --init (got "
                                f"{path}): it reads each start's recorded {what}.")
            store = EpisodeStore.open(path, "r")
            names = {e.name for e in store.features.extras}
            if store.features.state_dim != state_dim or not set(extras) <= names:
                raise SpecError(f"--ground-truth {task}: {path} lacks {what} (state of {state_dim} "
                                f"values, extras {', '.join(extras)}); use a store recorded with "
                                f"`iws collect {task}`.")
            stores[path] = store
        step = stores[path].window(episode, frame, frame + 1, keys=["state", *extras])
        starts.append({key: value[0] for key, value in step.items()})
    return starts


def in_batches(specs: Sequence[EpisodeSpec], batch_size: int, roll: BatchRoll,
               ) -> tuple[list[SideScore], list[np.ndarray]]:
    """`roll` over the specs `batch_size` at a time: every score, in spec order, and the kept
    frames."""
    scores: list[SideScore] = []
    kept: list[np.ndarray] = []
    for first in range(0, len(specs), batch_size):
        batch_scores, batch_frames = roll(specs[first:first + batch_size], first)
        scores.extend(batch_scores)
        kept.extend(batch_frames)
    return scores, kept
