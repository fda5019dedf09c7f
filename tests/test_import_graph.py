"""The import graph of the whole tree: no circle, and every import points down the layers
`pipeline -> workers -> sim_model -> schemas`, with the storage and data floors at the bottom of
sim_model, and down pipeline's own ranks (PIPELINE). Above the product sit its two clients,
experiments/ and benchmarks/: each may import anything in the product, nothing imports either,
and neither imports the other. Every import counts: top-level, inside a function, or under
TYPE_CHECKING; and importing `a.b.c` counts as importing the package `a.b` too, since it runs
`a/b/__init__.py` first.

Pipeline's ranks, top first, as the code imports today. The CLI calls the jobs; the jobs
(generation, evaluation, teleop, training on Ray) look tasks up in the registry; the registry
imports each task folder; the task folders build on what tasks/ shares. So the registry
(tasks/registry.py) sits above the task folders and the Task interface (tasks/base.py, with
SideScore, the score a task's ground truth returns) below them, and tasks/__init__.py imports
nothing, so that reaching tasks/base.py never runs the registry. The jobs hand each other
nothing; what two of them share lives at the bottom: joining Ray (ray_connect.py: generation and
Ray Train) and Ray's Jobs API (ray_jobs.py: `iws submit` of a generation job or a training
stage). train/submit.py checks `iws train` arguments with the parser the CLI hands it
(commands/train.py `submission_parser`) rather than importing the CLI above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_package_maps import named_paths

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("schemas", "sim_model", "workers", "pipeline", "experiments", "benchmarks")  # bottom first
CLIENTS = ("experiments", "benchmarks")  # above the product, side by side
# What each floor may import from iws, besides itself.
FLOORS = {
    "sim_model.storage": ("schemas",),
    "sim_model.data.formats": ("schemas", "sim_model.storage", "sim_model.data"),
}
# Pipeline's parts, top first: a part may import the parts of lower ranks, never one of its own
# rank or above. A module belongs to the longest part naming it (tasks.registry, not tasks).
PIPELINE = (
    ("pipeline.cli",),
    ("pipeline.commands",),
    ("pipeline.generate", "pipeline.evaluation", "pipeline.teleop", "pipeline.train"),
    ("pipeline.tasks.registry",),
    ("pipeline.pusht", "pipeline.sweep", "pipeline.rope", "pipeline.mug"),
    ("pipeline.tasks", "pipeline.ray_connect", "pipeline.ray_reaper", "pipeline.ray_jobs"),  # import nothing of pipeline
)


def _modules() -> dict[str, Path]:
    found = {}
    for layer in LAYERS:
        for path in (ROOT / layer).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports() -> dict[str, set[str]]:
    """module -> the tree's modules it imports (`from a import b` counts as a.b where that is one),
    with the packages an import runs on the way (not the importer's own: those have run)."""
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {resolve(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets |= {resolve(f"{base}.{a.name}") if f"{base}.{a.name}" in modules
                            else resolve(base) for a in node.names}
        own = _packages(name) | {name}
        targets |= {p for t in targets if t for p in _packages(t) if p in modules and p not in own}
        graph[name] = {t for t in targets if t and t != name}
    return graph


def _packages(name: str) -> set[str]:
    """The packages above a module: a.b.c -> {a, a.b}."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_no_import_circle() -> None:
    assert _circles(_imports()) == []


def test_every_import_points_down_the_layers() -> None:
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    rank.update({client: len(LAYERS) for client in CLIENTS})
    upward = [f"{m} -> {t}" for m, targets in _imports().items() for t in sorted(targets)
              if t.split(".")[0] != m.split(".")[0] and rank[t.split(".")[0]] >= rank[m.split(".")[0]]]
    assert upward == []


def _part(module: str) -> tuple[int, str] | None:
    """(rank, part) of a pipeline module; None for the package `pipeline` itself or an unranked one."""
    named = [(len(part), rank, part) for rank, parts in enumerate(PIPELINE) for part in parts
             if _within(module, part)]
    return max(named)[1:] if named else None


def test_every_pipeline_module_has_a_rank() -> None:
    unranked = [m for m in _modules() if _within(m, "pipeline") and m != "pipeline" and _part(m) is None]
    assert unranked == []


def test_pipeline_imports_point_down_its_ranks() -> None:
    """Top rank first in PIPELINE: an import across parts must reach a lower rank."""
    offenders = []
    for module, targets in _imports().items():
        here = _part(module)
        if here is None:
            continue
        for target in sorted(targets):
            there = _part(target)
            if there is not None and there[1] != here[1] and there[0] <= here[0]:
                offenders.append(f"{module} ({here[1]}) -> {target} ({there[1]})")
    assert offenders == []


def test_the_floors_import_only_what_lies_below_them() -> None:
    offenders = []
    for module, targets in _imports().items():
        for floor, allowed in FLOORS.items():
            if _within(module, floor):
                offenders += [f"{module} -> {t}" for t in sorted(targets) if not _within(t, floor)
                              and not any(_within(t, a) for a in allowed)]
    assert offenders == []


def test_the_graph_sees_a_circle_and_an_upward_import() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = _imports()
    assert "sim_model.storage.atomic" in graph["sim_model.checkpoint"]  # from a import b: a.b
    assert "sim_model.data.formats.lerobot_repair" in graph["sim_model.data.formats.lerobot_writer"]
    assert "pipeline.train.cluster" in graph["pipeline.commands.train"]  # inside a function
    assert "pipeline.tasks.base" in graph["pipeline.evaluation.policy"]  # under TYPE_CHECKING
    assert "pipeline.tasks" in graph["pipeline.pusht.collect"]  # the package an import runs
    assert "pipeline.tasks" not in graph["pipeline.tasks.registry"]  # not its own package
    assert _part("pipeline.tasks.registry") == (3, "pipeline.tasks.registry")
    assert _part("pipeline.tasks.base") == (5, "pipeline.tasks")
    assert any(m.startswith("benchmarks.") for m in graph)


PRODUCT = ("schemas", "sim_model", "workers", "pipeline")
CLI = ("pipeline.cli", "pipeline.commands")


def _documented() -> set[str]:
    """Every package of the product, and each module or package its parent's map names."""
    found = set()
    for package in PRODUCT:
        for init in (ROOT / package).rglob("__init__.py"):
            here = init.parent.relative_to(ROOT)
            found.add(".".join(here.parts))
            for name in named_paths(ast.get_docstring(ast.parse(init.read_text())) or ""):
                found.add(".".join((here / name.removesuffix(".py").rstrip("/")).parts))
    return found


def _undocumented_uses(paths: list[Path], documented: set[str]) -> list[str]:
    offenders = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level:
                modules, names = [node.module or ""], [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                modules, names = [a.name for a in node.names], []
            else:
                continue
            for module in modules:
                if module.split(".")[0] not in PRODUCT:
                    continue
                why = ("the CLI" if any(_within(module, c) for c in CLI) else
                       "undocumented" if module not in documented else
                       "private" if any(n.startswith("_") for n in names) else None)
                if why:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {module} ({why})")
    return offenders


def test_experiments_use_only_documented_modules() -> None:
    clients = sorted([*(ROOT / "experiments").rglob("*.py"), *(ROOT / "tests" / "experiments").rglob("*.py")])
    documented = _documented()
    assert {"sim_model.evaluate", "pipeline.pusht.features", "workers.actions.base"} <= documented
    assert _undocumented_uses(clients, documented) == []
    assert _undocumented_uses([ROOT / "pipeline" / "cli.py"], {"schemas"}) != []  # it can fail
