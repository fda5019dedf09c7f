"""Package docstrings that map their folder ('world_model.py   WorldModel ...') name only paths
that exist: a map that lists a moved or deleted module misleads the next reader."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sim_model", "pipeline", "workers", "schemas")
# A map line: indentation, then one or more paths ('x.py', 'dir/', 'a/b.py'), comma-separated,
# then two spaces or the end of the line.
ENTRY = re.compile(r"^\s*((?:[\w/]+(?:\.py|/),?\s?)+?)(?:\s{2,}|$)")
PATH = re.compile(r"[\w/]+(?:\.py|/)")


def named_paths(docstring: str) -> list[str]:
    names: list[str] = []
    for line in docstring.splitlines():
        match = ENTRY.match(line)
        if match:
            names += PATH.findall(match.group(1))
    return names


def test_the_map_reader_finds_the_entries() -> None:
    doc = ("Title.\n\n    cli.py, commands/   the CLI\n    tasks/base.py,      the interface\n"
           "      tasks/collecting.py\nworld_model.py   WorldModel\nnot a map line.py here\n")
    assert named_paths(doc) == ["cli.py", "commands/", "tasks/base.py", "tasks/collecting.py", "world_model.py"]


def test_every_path_a_package_map_names_exists() -> None:
    missing, checked = [], 0
    for init in sorted(p for package in PACKAGES for p in (ROOT / package).rglob("__init__.py")):
        docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
        for name in named_paths(docstring):
            checked += 1
            if not (init.parent / name).exists():
                missing.append(f"{init.relative_to(ROOT)} names {name}")
    assert checked > 60, checked  # the maps are read at all
    assert not missing, missing
