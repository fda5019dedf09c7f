"""Training code stays readable: no function in sim_model/train/ longer than 60 lines or nesting
blocks deeper than 4 (issue 33; before the split, `dynamics_task` was 107 lines and
`frames.prefetch` nested 6 deep)."""

from __future__ import annotations

import ast
from pathlib import Path

TRAIN = Path(__file__).resolve().parents[3] / "sim_model" / "train"
BLOCKS = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith, ast.Match)
MAX_LINES, MAX_DEPTH = 60, 4


def depth(node: ast.AST, level: int = 0) -> int:
    """Deepest block nesting inside `node`, not counting nested functions or classes (their own)."""
    deepest = level
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        deepest = max(deepest, depth(child, level + isinstance(child, BLOCKS)))
    return deepest


def functions() -> list[tuple[str, int, int]]:
    found = []
    for path in sorted(TRAIN.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((f"{path.name}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1, depth(node)))
    return found


def test_no_long_or_deep_function_in_training() -> None:
    found = functions()
    assert len(found) > 50  # the tree is read at all
    assert [f for f in found if f[1] > MAX_LINES or f[2] > MAX_DEPTH] == []


def test_the_measure_sees_length_and_depth() -> None:
    tree = ast.parse("def f():\n    for a in b:\n        if a:\n            with c:\n                try:\n"
                     "                    if d:\n                        pass\n                except E:\n"
                     "                    pass\n")
    function = tree.body[0]
    assert depth(function) == 5 and function.end_lineno == 9
