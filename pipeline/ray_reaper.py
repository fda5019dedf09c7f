"""The embedded Ray's undertaker: a tiny process beside the driver that ends what Ray leaves behind
when the driver is killed (kill -9, OOM) and cannot shut its cluster down.

After such a kill the raylet dies with the driver, but its DashboardAgent and RuntimeEnvAgent
(~230 MB together) notice within 2 s and then spend a minute trying to tell the dead GCS about it
(Ray 2.x publishes the raylet's death with a fixed 60 s timeout) before they exit. The reaper
holds the read end of a pipe from the driver and watches the raylet's children; once the pipe
reaches EOF (the driver is gone) or the raylet has exited (also after a clean `ray.shutdown`), it
kills the raylet's children that are still alive and exits. It runs in its own session, so a
Ctrl-C to the driver's terminal does not reach it.

    python -m pipeline.ray_reaper RAYLET_PID     (stdin: the driver's pipe; see ray_connect.py)
"""

from __future__ import annotations

import select
import sys

POLL_S = 0.5


def reap(raylet_pid: int) -> int:
    """Watch until the driver or the raylet is gone, then kill the raylet's surviving children;
    their number."""
    import psutil

    try:
        raylet = psutil.Process(raylet_pid)
    except psutil.NoSuchProcess:
        return 0
    children: dict[int, psutil.Process] = {}
    while True:
        try:
            children.update((p.pid, p) for p in raylet.children(recursive=True))
        except psutil.NoSuchProcess:
            break
        readable, _, _ = select.select([sys.stdin], [], [], POLL_S)
        if readable and not sys.stdin.buffer.read1(4096):  # EOF: the driver has exited
            break
        if not raylet.is_running():
            break
    killed = 0
    for child in children.values():
        try:
            if child.is_running():  # psutil checks the start time: a reused pid is not ours
                child.kill()
                killed += 1
        except psutil.NoSuchProcess:
            pass
    return killed


if __name__ == "__main__":
    reap(int(sys.argv[1]))
