"""`iws schema {job,train,features,episode,record,manifest}`: print a JSON Schema."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from pydantic import BaseModel

from schemas import EpisodeRecord, EpisodeSpec, FeatureSpec, JobSpec, RunManifest


def _train_config() -> type[BaseModel]:
    from sim_model.train.config import TrainConfig  # sim_model.train imports torch: only when asked

    return TrainConfig


# The model behind each name; schemas.errors.SCHEMA_NAMES is the same table, by model, for the
# validation errors that point here.
MODELS: dict[str, Callable[[], type[BaseModel]]] = {
    "job": lambda: JobSpec,
    "train": _train_config,
    "features": lambda: FeatureSpec,
    "episode": lambda: EpisodeSpec,
    "record": lambda: EpisodeRecord,
    "manifest": lambda: RunManifest,
}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("schema", help="print the JSON Schema of a spec")
    parser.add_argument("name", choices=sorted(MODELS),
                        help="which schema: job (`iws generate`'s spec), train (`iws train --config`), "
                        "features, episode, record (an episode's record, as a group's part record carries it) or manifest")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(json.dumps(MODELS[args.name]().model_json_schema(), indent=2))
    return 0
