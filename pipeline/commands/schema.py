"""`iws schema {job,features,episode,manifest}`: print a JSON Schema."""

from __future__ import annotations

import argparse
import json

from pydantic import BaseModel

from schemas import EpisodeRecord, EpisodeSpec, FeatureSpec, JobSpec, RunManifest

MODELS: dict[str, type[BaseModel]] = {
    "job": JobSpec,
    "features": FeatureSpec,
    "episode": EpisodeSpec,
    "record": EpisodeRecord,
    "manifest": RunManifest,
}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("schema", help="print the JSON Schema of a spec")
    parser.add_argument("name", choices=sorted(MODELS), help="which schema")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(json.dumps(MODELS[args.name].model_json_schema(), indent=2))
    return 0
