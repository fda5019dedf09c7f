"""A task's simulator dependencies are an optional extra of iws (`pip install 'iws[rope]'`).

`require(module, extra)` imports one of them where the task first needs it and, when it is
missing, raises SpecError naming the extra to install instead of a bare ImportError.
`scripts/setup.sh` (so `make demo`, `make test`, `.ci/run`) installs every extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from schemas import SpecError


def require(module: str, extra: str) -> ModuleType:
    """`module`, imported; SpecError saying which extra of iws provides it when it cannot be."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise SpecError(f"the {extra} task needs the Python package '{module.split('.')[0]}', which "
                        f"is not installed ({exc}). Install the task's extra: pip install "
                        f"'iws[{extra}]' (scripts/setup.sh installs every extra).") from exc
