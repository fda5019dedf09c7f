"""Shared fixtures live in tests/fixtures/<topic>.py, one owner each; they are loaded here."""

import os

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

pytest_plugins = [
    "tests.fixtures.gpu",
    "tests.fixtures.store",
    "tests.fixtures.ray_cluster",
    "tests.fixtures.model",
    "tests.fixtures.s3",
    "tests.fixtures.ray_head",
    "tests.fixtures.threads",
]
