"""Concatenate episode stores of the same features into a new one, in the order given.

Training takes one store (`iws train --data`); an arm that adds episodes of another generator to
the training set (docs/models/pusht.md, round 16) trains on the union:

    .venv/bin/python scripts/merge_stores.py data/pusht_train.zarr data/pusht_demo.zarr \
        --out data/pusht_train_demo.zarr
"""

from __future__ import annotations

import argparse

from sim_model.data.store import EpisodeStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", help="episode stores to concatenate")
    parser.add_argument("--out", required=True, help="new store (must not exist)")
    args = parser.parse_args()
    stores = [EpisodeStore.open(path) for path in args.sources]
    for path, store in zip(args.sources[1:], stores[1:], strict=True):
        if store.features != stores[0].features:
            raise SystemExit(f"{path} holds other features than {args.sources[0]}; "
                             "only stores of one task and resolution can be merged.")
    out = EpisodeStore.create(args.out, stores[0].features)
    for path, store in zip(args.sources, stores, strict=True):
        for episode in store:
            out.append(episode)
        print(f"{path}: {len(store)} episodes", flush=True)


if __name__ == "__main__":
    main()
