"""Writer process for the kill test: appends deterministic episodes to a store until killed.

Usage: python -m tests.sim_model.data.store_writer STORE_PATH
Prints "ready <n>" once the store is open (after repair), then "done <i>" after each append.
"""

from __future__ import annotations

import sys

from sim_model.data.store import EpisodeStore
from tests.fixtures.store import make_pusht_episode


def episode_length(index: int) -> int:
    """Deterministic length of episode `index` (4..28 steps)."""
    return 4 + (index * 7) % 25


def main(path: str) -> None:
    store = EpisodeStore.open(path, mode="a")
    print(f"ready {len(store)}", flush=True)
    while True:
        index = len(store)
        store.append(make_pusht_episode(store.features, index, episode_length(index)))
        print(f"done {index}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
