"""What the terminal shows while a command works: one tqdm progress bar on stderr, the warnings
that ask the user to act printed above it, and the result. Library INFO lines (model loaded,
groups to roll, codec chosen...) are for `iws -v` and for runs without a bar, which log instead.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def quiet_logging(verbose: bool) -> Iterator[None]:
    """While a bar is drawn: log records below WARNING are dropped (kept with -v), and the rest go
    through tqdm.write, above the bar rather than through it. The root level is restored after."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    root = logging.getLogger()
    level = root.level
    if not verbose:
        root.setLevel(max(level, logging.WARNING))
    try:
        with logging_redirect_tqdm():
            yield
    finally:
        root.setLevel(level)


class LazyBar:
    """A tqdm bar drawn at its first update, so a command that fails in its checks (DEST exists,
    frames too small for the codec) prints the error alone, not under an empty bar."""

    def __init__(self, **options: Any) -> None:
        self.options = {"file": sys.stderr, "dynamic_ncols": True, **options}
        self.bar: Any = None

    def update(self, n: int) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(**self.options)
        self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> LazyBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
