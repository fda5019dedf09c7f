"""Joining a Ray cluster, or starting an embedded one, for every Ray job of the pipeline: a
generation job (generate/ray_exec.py) and a data-parallel training stage (train/cluster.py).

`connect` also remembers a SIGTERM (a stopped job) in `terminated`, so that a caller blocked in
`ray.wait` can tell a stop from another SystemExit; see `_note_sigterm`.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any

from schemas import SpecError


def connect(address: str | None) -> bool:
    """Join `address` / RAY_ADDRESS, or start an embedded local Ray. True if we started it."""
    import ray

    if ray.is_initialized():
        return False
    target = address or os.environ.get("RAY_ADDRESS")
    kwargs: dict[str, Any] = {"address": target}
    if not target:
        # Embedded Ray: workers import user callables ('my_policies:act') from the working
        # directory, as the driver does. A cluster gets code through its image or runtime_env.
        path = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)
        # address="local": a cluster of our own even when another runs on this machine (a bare
        # ray.init() would join the newest one found in /tmp/ray).
        kwargs = {"address": "local", "include_dashboard": False,
                  "runtime_env": {"env_vars": {"PYTHONPATH": path},
                                  "worker_process_setup_hook": f"{__name__}.quiet_embedded_worker"}}
        _choose_token_auth()
    try:
        ray.init(logging_level=logging.WARNING, **kwargs)
    except ConnectionError as error:
        raise SpecError(f"cannot reach the Ray cluster at {target}: {error}. Check --address / "
                        "RAY_ADDRESS, or drop it to run on an embedded local Ray.") from None
    _note_sigterm()
    if not target:
        _start_reaper()
    return True


_reaper = None  # the embedded cluster's pipeline.ray_reaper, its stdin held open while we live


def _start_reaper() -> None:
    """Start pipeline.ray_reaper for the embedded cluster just started: it ends the raylet's
    agents at once if this process is killed, instead of a minute later (see its docstring)."""
    global _reaper
    import subprocess
    import sys

    import ray

    node = ray._private.worker._global_node  # the embedded cluster's processes, started by us
    raylet = getattr(node, "all_processes", {}).get("raylet") if node is not None else None
    if not raylet:
        return
    _reaper = subprocess.Popen([sys.executable, "-m", "pipeline.ray_reaper", str(raylet[0].process.pid)],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True,
                               cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def quiet_embedded_worker() -> None:
    """Run in every worker process of the embedded Ray (its runtime_env's setup hook). Without a
    dashboard there is no State API, so Ray Train's placement-group cleaner warns on every check
    that it cannot query it; its job (removing a dead controller's resources) cannot arise when
    the whole cluster ends with this process, so its warnings are noise here."""
    logging.getLogger("ray.train.v2._internal.execution.controller.placement_group_cleaner").setLevel(
        logging.ERROR)


terminated = threading.Event()  # set by the SIGTERM handler `connect` installs


def _note_sigterm() -> None:
    """Remember a SIGTERM (a stopped job) before Ray's driver handler sees it. That handler
    exits with the signal's number, but a SIGTERM that arrives while `ray.wait` blocks surfaces
    from the wait as SystemExit(1); a caller (generate/ray_exec.py's `execute`) tells the two
    apart by `terminated`."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: Any) -> None:
        terminated.set()
        if callable(previous):
            previous(signum, frame)
        raise SystemExit(signum)

    signal.signal(signal.SIGTERM, handler)


def embedded(address: str | None) -> bool:
    """Whether `connect(address)` would start a local Ray of its own."""
    import ray

    return not (ray.is_initialized() or address or os.environ.get("RAY_ADDRESS"))


def _choose_token_auth() -> None:
    """Token authentication for the embedded cluster, chosen explicitly (RAY_AUTH_MODE, when the
    user has not set it). It is what Ray 2.60 picks by itself, but left to pick, Ray prints a
    warning that asks nothing of the user. Ray caches RAY_AUTH_MODE when it is imported, so the
    variable alone is not enough: Ray's own helper sets it and re-reads the config. A new token
    goes to ~/.ray/auth_token, as Ray does."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    try:
        from ray._private.authentication.authentication_token_setup import _enable_token_auth
    except ImportError:  # another Ray: it decides (and may warn)
        return
    _enable_token_auth()
