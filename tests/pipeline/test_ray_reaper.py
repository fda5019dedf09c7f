"""A driver SIGKILLed on its embedded Ray leaves no Ray agents behind (pipeline.ray_reaper)."""

import os
import signal
import subprocess
import sys
import time

import psutil

from tests.fixtures.ray_cluster import REPO_ROOT

DRIVER = """
import ray, time
from pipeline.ray_connect import connect
connect(None)
ray.get(ray.remote(lambda: 1).remote())
print(" ".join(str(p.pid) for p in __import__("psutil").Process().children(recursive=True)), flush=True)
time.sleep(120)
"""


def _alive(pids: list[int]) -> list[str]:
    names = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE:
                names.append(f"{pid} {process.name()}")
        except psutil.NoSuchProcess:
            pass
    return names


def _wait_gone(pids: list[int], seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := _alive(pids)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def test_a_killed_driver_takes_its_ray_agents_along():
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=REPO_ROOT, env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in driver.stdout.readline().split()]
        agents = [p for p in pids if "Agent" in " ".join(psutil.Process(p).cmdline())]
        assert len(agents) == 2, _alive(pids)  # DashboardAgent, RuntimeEnvAgent
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
        # Ray alone leaves both agents for ~60 s (its fixed GCS timeout); the reaper ends them at once.
        assert _wait_gone(pids, 15) == []
    finally:
        driver.kill()
        driver.wait()
