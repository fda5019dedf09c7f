"""The import graph of the whole tree: no circle, and every import points down the layers
`experiments -> pipeline -> workers -> sim_model -> schemas`, with the storage and data floors at the
bottom of sim_model. Every import counts: top-level, inside a function, or under TYPE_CHECKING."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("schemas", "sim_model", "workers", "pipeline", "experiments")  # bottom first
# What each floor may import from iws, besides itself.
FLOORS = {
    "sim_model.storage": ("schemas",),
    "sim_model.data.formats": ("schemas", "sim_model.storage", "sim_model.data"),
}


def _modules() -> dict[str, Path]:
    found = {}
    for layer in LAYERS:
        for path in (ROOT / layer).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports() -> dict[str, set[str]]:
    """module -> the tree's modules it imports (`from a import b` counts as a.b where that is one)."""
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
        graph[name] = {t for t in targets if t and t != name}
    return graph


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
    upward = [f"{m} -> {t}" for m, targets in _imports().items() for t in sorted(targets)
              if rank[t.split(".")[0]] > rank[m.split(".")[0]]]
    assert upward == []


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
