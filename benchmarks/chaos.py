"""Chaos soak of generation: one small job, many times, each time hit by one fault at a random
moment and then resumed; after every trial the output is checked against an undisturbed run.

    python benchmarks/chaos.py --trials 200 --write benchmarks/results/chaos.md   # about 1 h here
    python benchmarks/chaos.py --trials 5                                          # CI's short version

Faults, one per trial in turn, at a moment drawn uniformly over how long a whole run takes (the
median of the last few):

    replica        SIGKILL one replica actor process; Ray restarts it and the run goes on
    driver         SIGKILL the driver process; a new driver resumes the job
    writer         SIGKILL the replicas while a group's shard is half-written (a staging copy exists)
    s3             cut the connection to the S3 server under a job writing to s3:// (every open
                   socket reset, new ones refused for 0.5-4 s)
    second-driver  start a second driver on the same output while the first runs

Everything stays on this machine: one local Ray (2 CPUs) started here, drivers as subprocesses
joined to it with --address (a SIGKILL must hit a real driver process), and a real S3 server
(SeaweedFS) behind a TCP proxy this script can cut. After the fault, drivers are run until one
finishes (at most MAX_DRIVERS per trial), then the output is checked:

    lost        reference episodes no part record commits, or missing from the dataset
                (OUT/dataset: its index and shards)
    duplicated  an episode committed by more than one part record, or beyond one per index, or
                twice in the dataset
    stale       a committed record, dataset episode or manifest entry whose checksum is not the
                undisturbed run's
    leftovers   data no part record names (staging copies, shards the index does not name),
                per-episode stores or markers (OUT/episodes/, OUT/commits/: none since group
                commits), a lease not released, a manifest not finished
    hung        a driver that did not end within DRIVER_TIMEOUT_S

The exit status is 1 when any trial broke an invariant (the log of its drivers is printed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.fixtures.s3 starts the S3 server

KINDS = ("replica", "driver", "writer", "s3", "second-driver")
EPISODES, HORIZON, BATCH, REPLICAS = 8, 6, 2, 2
DRIVER_TIMEOUT_S = 600.0  # generous: on a loaded 2-core machine a tiny job can take minutes
MAX_DRIVERS = 4  # per trial: the one hit by the fault, then resumes until one finishes
CUT_S = (0.5, 4.0)
BUCKET = "chaos"


# --- the fault on the wire --------------------------------------------------------------------

class CuttableProxy:
    """A loopback TCP forwarder to `upstream_port` that can be cut: every open connection is
    reset at once and new ones are reset on arrival for a while, which is what a network
    partition or a restarting server looks like to an S3 client."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._down_until = 0.0
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self, seconds: float) -> None:
        self._down_until = time.monotonic() + seconds
        with self._lock:
            sockets = list(self._open)
        for sock in sockets:
            _reset(sock)

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            if time.monotonic() < self._down_until:
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._open.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                _reset(sock)
            with self._lock:
                self._open.difference_update((src, dst))


def _reset(sock: socket.socket) -> None:
    """Abort the connection (RST, not a graceful FIN) and wake any thread blocked on it."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


# --- the job and its drivers ------------------------------------------------------------------

@dataclass
class Soak:
    """What every trial shares: the job file, the Ray address, the reference, the proxy."""

    work: Path
    job: Path
    address: str
    proxy: CuttableProxy
    env: dict[str, str]
    reference: dict[str, str] = field(default_factory=dict)  # episode id -> checksum
    wall_s: dict[str, float] = field(default_factory=dict)  # backend -> undisturbed driver time

    recent: dict[str, list[float]] = field(default_factory=dict)

    def observe(self, backend: str, run_s: float) -> None:
        """Fault moments are drawn over the median of the last whole runs: a shared machine's
        load drifts, and a stale estimate would put faults after the end of most runs."""
        runs = self.recent.setdefault(backend, [])
        runs[:] = [*runs[-4:], run_s]
        self.wall_s[backend] = statistics.median(runs)

    def output(self, backend: str, name: str) -> str:
        return f"s3://{BUCKET}/{name}" if backend == "s3" else str(self.work / name / "out")

    def start_driver(self, out: str, log: Path) -> subprocess.Popen:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as sink:
            return subprocess.Popen(
                [sys.executable, "-m", "pipeline.cli", "generate", str(self.job), "--output", out,
                 "--address", self.address, "--no-progress"],
                cwd=ROOT, env=self.env, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def make_job(work: Path) -> Path:
    import numpy as np
    import yaml
    from PIL import Image

    from pipeline.pusht.features import pusht_features
    from sim_model.world_model import WorldModel

    model = WorldModel.random(pusht_features(32), preset="tiny", seed=0).save(work / "model")
    rng = np.random.default_rng(1)
    images = []
    for i in range(3):
        images.append(work / f"init{i}.png")
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(images[-1])
    job = {"name": "chaos", "model": str(model), "task": "Push the T onto the target",
           "init": {"images": [str(p) for p in images]},
           "action_sources": {"walk": {"kind": "scripted", "motion": "mix"}},
           "episodes": EPISODES, "horizon": HORIZON, "batch_size": BATCH, "replicas": REPLICAS,
           "resources": {"num_cpus": 0.5}, "output": {"path": str(work / "unused"), "formats": ["zarr"]},
           "seed": 7}
    path = work / "job.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def wait(driver: subprocess.Popen, timeout_s: float = DRIVER_TIMEOUT_S) -> int | None:
    """The driver's exit status, or None (and the driver killed) when it hung."""
    try:
        code = driver.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        driver.kill()
        driver.wait()
        code = None
    driver.ended = time.monotonic()  # type: ignore[attr-defined]
    return code


def replica_processes(since: float) -> list[Any]:
    """Replica actor processes of this script's Ray started after `since` (epoch seconds)."""
    import psutil

    found = []
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if proc.create_time() >= since - 0.5 and "WorldModelReplica" in " ".join(proc.cmdline()):
                found.append(proc)
    return found


def sleep_while(driver: subprocess.Popen, seconds: float) -> bool:
    """Sleep up to `seconds`; False if the driver ended first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if driver.poll() is not None:
            return False
        time.sleep(0.01)
    return driver.poll() is None


def staging_copies(out: str) -> list[Path]:
    """A group's shard being built (local outputs: a hidden sibling, renamed into place)."""
    shards = Path(out) / "dataset" / "shards"
    return [p for p in shards.glob(".*.tmp")] if shards.is_dir() else []


# --- one trial ---------------------------------------------------------------------------------

@dataclass
class Trial:
    index: int
    kind: str
    backend: str
    delay_s: float
    landed: bool = False  # the fault hit while the job was still running
    detail: str = ""
    drivers: int = 0
    exits: list[int | None] = field(default_factory=list)
    driver_s: list[float] = field(default_factory=list)  # how long each driver ran
    lost: int = 0
    duplicated: int = 0
    stale: int = 0
    leftovers: int = 0
    hung: int = 0
    wall_s: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def broken(self) -> bool:
        return bool(self.lost or self.duplicated or self.stale or self.leftovers or self.hung)


def run_trial(soak: Soak, index: int, kind: str, backend: str, rng: random.Random, *,
              keep: bool = False) -> Trial:
    name = f"t{index:04d}"
    out, logs = soak.output(backend, name), soak.work / name
    trial = Trial(index, kind, backend, delay_s=rng.uniform(0, soak.wall_s[backend]))
    began, began_epoch = time.monotonic(), time.time()
    first = soak.start_driver(out, logs / "driver-0.log")
    running = [first]
    if kind == "driver":
        if sleep_while(first, trial.delay_s):
            first.send_signal(signal.SIGKILL)
            trial.landed = True
    elif kind == "replica":
        # Replicas live only between the driver's start-up and its consolidation: the moment is
        # drawn over that span, not over the whole run.
        while first.poll() is None and not replica_processes(began_epoch):
            time.sleep(0.01)
        trial.delay_s = rng.uniform(0, max(soak.wall_s[backend] - (time.monotonic() - began), 0.5))
        if sleep_while(first, trial.delay_s):
            procs = replica_processes(began_epoch)
            if procs:
                victim = rng.choice(procs)
                with contextlib.suppress(Exception):
                    victim.send_signal(signal.SIGKILL)
                    trial.landed = first.poll() is None
    elif kind == "writer":
        sleep_while(first, trial.delay_s)
        while first.poll() is None and not (copies := staging_copies(out)):
            time.sleep(0.002)
        if first.poll() is None:
            for proc in replica_processes(began_epoch):
                with contextlib.suppress(Exception):
                    proc.send_signal(signal.SIGKILL)
            trial.landed = any(p.exists() for p in copies)  # killed before the copy was published
            trial.detail = "mid-write" if trial.landed else "after the write"
    elif kind == "s3":
        if sleep_while(first, trial.delay_s):
            cut = rng.uniform(*CUT_S)
            soak.proxy.cut(cut)
            trial.landed, trial.detail = True, f"cut {cut:.1f} s"
    elif kind == "second-driver":
        if sleep_while(first, trial.delay_s):
            running.append(soak.start_driver(out, logs / "driver-1.log"))
            trial.landed = True
    trial.exits = [wait(d) for d in running]
    trial.driver_s = [d.ended - began for d in running]  # type: ignore[attr-defined]
    if trial.exits[0] == 0 and kind != "second-driver":  # a whole run: how long runs take now
        soak.observe(backend, trial.driver_s[0])
    if kind == "second-driver" and len(trial.exits) == 2:
        trial.detail = _second_driver_outcome(trial.exits, logs)
    while 0 not in trial.exits and len(trial.exits) < MAX_DRIVERS:
        resumed = time.monotonic()
        trial.exits.append(wait(soak.start_driver(out, logs / f"driver-{len(trial.exits)}.log")))
        trial.driver_s.append(time.monotonic() - resumed)
    trial.drivers = len(trial.exits)
    trial.hung = trial.exits.count(None)
    trial.wall_s = time.monotonic() - began
    check(out, soak.reference, trial)
    if not trial.broken and backend == "local" and not keep:
        shutil.rmtree(soak.work / name, ignore_errors=True)
    return trial


def _second_driver_outcome(exits: list[int | None], logs: Path) -> str:
    """Which of two drivers on one output was refused: exit 2 naming the lease's owner."""
    refused = [i for i, code in enumerate(exits) if code == 2
               and "is in use by another run" in (logs / f"driver-{i}.log").read_text(errors="replace")]
    return {(): "both ran", (0,): "first refused", (1,): "second refused"}.get(tuple(refused), "both refused")


# --- the checks ----------------------------------------------------------------------------------

def check(out: str, reference: dict[str, str], trial: Trial) -> None:
    """Count what the trial's output breaks (see the module docstring) into `trial`."""
    from schemas import RunManifest
    from sim_model import storage
    from sim_model.data.shards import SHARDS_DIR, ShardedDataset, read_index, shard_name
    from workers.lease import lease_uri
    from workers.parts import PARTS_DIR, read_parts, records_of
    from workers.writer import COMMITS_DIR, EPISODES_DIR

    def problem(field_name: str, text: str, count: int = 1) -> None:
        setattr(trial, field_name, getattr(trial, field_name) + count)
        trial.problems.append(f"{field_name}: {text}")

    found = read_parts(out)
    listed = [r for part in found.values() for r in records_of(part).values()]
    records = {r.episode_id: r for r in listed}
    for episode_id, count in Counter(r.episode_id for r in listed).items():
        if count > 1:
            problem("duplicated", f"{episode_id} committed by {count} part records", count - 1)
    for episode_id in reference.keys() - records.keys():
        problem("lost", f"no part record commits {episode_id}")
    for index, count in Counter(r.index for r in records.values()).items():
        if count > 1:
            problem("duplicated", f"{count} committed episodes for index {index}", count - 1)
    for episode_id in records.keys() - reference.keys():
        problem("duplicated", f"an unknown episode {episode_id} is committed")
    for episode_id, record in records.items():
        if episode_id in reference and record.checksum != reference[episode_id]:
            problem("stale", f"the committed record of {episode_id} has another checksum")
    # A group's part is its commit: nothing is stored per episode.
    for name in (EPISODES_DIR, COMMITS_DIR):
        if storage.exists(storage.join(out, name)):
            problem("leftovers", f"{name}/ exists")
    for sub in (PARTS_DIR, storage.join("dataset", SHARDS_DIR)):
        if not storage.on_s3(out) and list(Path(storage.join(out, sub)).glob(".*.tmp")):
            problem("leftovers", f"staging copies in {sub}/")
    if storage.exists(lease_uri(out)):
        problem("leftovers", "the lease was not released")
    try:
        dataset = ShardedDataset(storage.join(out, "dataset"))
        ids = [dataset.meta(i).episode_id for i in range(len(dataset))]
        for episode_id, count in Counter(ids).items():
            if count > 1:
                problem("duplicated", f"{episode_id} {count} times in the dataset", count - 1)
        for episode_id in reference.keys() - set(ids):
            problem("lost", f"{episode_id} missing from the dataset")
        for i, episode_id in enumerate(ids):
            if reference.get(episode_id) != dataset.episode(i).checksum():
                problem("stale", f"the dataset's {episode_id} is not the undisturbed run's")
        named = {shard_name(row.shard) for row in dataset.rows}
        for extra in set(storage.list_names(storage.join(out, "dataset", SHARDS_DIR))) - named:
            problem("leftovers", f"dataset/shards/{extra} is named by no index row")
    except Exception as error:
        problem("lost", f"the dataset cannot be read ({error})", len(reference))
    try:
        manifest = RunManifest.model_validate_json(storage.read_text(storage.join(out, "manifest.json")))
        if manifest.finished is None:
            problem("leftovers", "manifest.json is not finished")
        rows, _ = read_index(storage.join(out, "dataset"))
        listed = {r.episode_id: r.checksum for r in rows}
        if manifest.episodes_committed != len(reference) or listed != reference:
            problem("stale", f"the manifest counts {manifest.episodes_committed} episodes and the index "
                    f"lists {len(listed)}, not the undisturbed run's")
    except Exception as error:
        problem("stale", f"manifest.json cannot be read ({error})")


# --- the soak ------------------------------------------------------------------------------------

@contextlib.contextmanager
def soak_setup(work: Path) -> Iterator[Soak]:
    """S3 server + proxy, the AWS variables pointing at the proxy (for drivers and, through
    Ray's workers inheriting this process's environment, replicas), one local Ray."""
    import ray

    from tests.fixtures.s3 import running_server

    with running_server(work / "s3") as server:
        server.client().create_bucket(Bucket=BUCKET)
        proxy = CuttableProxy(int(server.endpoint_url.rsplit(":", 1)[1]))
        aws = {**server.env(), "AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.port}",
               "AWS_EC2_METADATA_DISABLED": "true",
               "AWS_CONFIG_FILE": str(work / "no-aws-config"),
               "AWS_SHARED_CREDENTIALS_FILE": str(work / "no-aws-credentials")}
        for name in [k for k in os.environ if k.startswith("AWS_")]:
            del os.environ[name]
        os.environ.update(aws)
        os.environ["IWS_CACHE_DIR"] = str(work / "cache")
        # Drivers and Ray's workers (which inherit the raylet's environment) import this checkout.
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")  # our own
        try:
            address = ray.get_runtime_context().gcs_address
            yield Soak(work=work, job=make_job(work), address=address, proxy=proxy, env=dict(os.environ))
        finally:
            ray.shutdown()
            proxy.close()


def reference_runs(soak: Soak) -> None:
    """Undisturbed runs on both backends: the checksums every trial must reproduce, and the
    wall time over which fault moments are drawn."""
    from workers.parts import committed_records

    for backend in ("local", "s3"):
        out = soak.output(backend, f"reference-{backend}")
        began = time.monotonic()
        code = wait(soak.start_driver(out, soak.work / f"reference-{backend}.log"))
        soak.observe(backend, time.monotonic() - began)
        if code != 0:
            raise SystemExit(f"the undisturbed {backend} run failed (exit {code}):\n"
                             + (soak.work / f"reference-{backend}.log").read_text(errors="replace")[-3000:])
        checksums = {k: r.checksum for k, r in committed_records(out).items()}
        if not soak.reference:
            soak.reference = checksums
        elif checksums != soak.reference:
            raise SystemExit("the undisturbed local and s3 runs made different episodes")


def schedule(trials: int, kinds: tuple[str, ...] = KINDS) -> list[tuple[str, str]]:
    """(kind, backend) for each trial: kinds in turn; driver, replica and second-driver trials
    alternate between local and s3:// outputs."""
    plan, turns = [], Counter[str]()
    for i in range(trials):
        kind = kinds[i % len(kinds)]
        if kind == "writer":
            backend = "local"
        elif kind == "s3":
            backend = "s3"
        else:
            backend = ("local", "s3")[turns[kind] % 2]
        turns[kind] += 1
        plan.append((kind, backend))
    return plan


def table(trials: list[Trial], soak: Soak, elapsed_s: float, command: str) -> str:
    rows = ["| fault | output | trials | landed | drivers per trial | lost | duplicated | stale | "
            "leftovers | hung | median trial s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], list[Trial]] = {}
    for t in trials:
        groups.setdefault((t.kind, t.backend), []).append(t)
    for (kind, backend), group in sorted(groups.items(), key=lambda g: (KINDS.index(g[0][0]), g[0][1])):
        rows.append(_row(f"{kind}", backend, group))
    rows.append(_row("**all**", "", trials))
    outcomes = Counter(t.detail for t in trials if t.kind == "second-driver")
    writers = Counter(t.detail for t in trials if t.kind == "writer")
    lines = [
        "# Chaos soak of generation (benchmarks/chaos.py)", "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, `{command}`, {elapsed_s / 60:.1f} min; "
        f"{platform.machine()} {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end.", "",
        f"Job: tiny model, {EPISODES} episodes x {HORIZON} steps in groups of {BATCH}, {REPLICAS} "
        "replicas on one local Ray (2 CPUs), drivers joined with --address, zarr output; the s3 "
        "rows write to a real SeaweedFS behind a cuttable TCP proxy. Fault moments drawn uniformly "
        f"over the median of the last 5 whole runs (at the end: local {soak.wall_s['local']:.1f} s, "
        f"s3 {soak.wall_s['s3']:.1f} s). \"landed\": the fault hit while the job ran; the others "
        "found it finished and check a plain resume.", "",
        *rows, "",
        f"Second drivers: {dict(outcomes)}. Writer kills: {dict(writers)}.", "",
        "Checked after every trial: each episode committed once (by one part record), one per index "
        "and no other, every episode once in the dataset (its index over the shards), the checksums "
        "of the undisturbed run in the part records, the dataset and manifest.json, no per-episode "
        "stores or markers (episodes/, commits/), no shard the index does not name, no staging "
        "leftovers, the lease released, the manifest finished.",
    ]
    broken = [t for t in trials if t.broken]
    if broken:
        lines += ["", "## Broken trials", ""]
        lines += [f"- t{t.index:04d} {t.kind} ({t.backend}, at {t.delay_s:.1f} s): {'; '.join(t.problems[:5])}"
                  for t in broken]
    return "\n".join(lines) + "\n"


def _row(kind: str, backend: str, group: list[Trial]) -> str:
    total = {f: sum(getattr(t, f) for t in group) for f in ("lost", "duplicated", "stale", "leftovers", "hung")}
    drivers = statistics.mean(t.drivers for t in group)
    median = statistics.median(t.wall_s for t in group)
    return (f"| {kind} | {backend} | {len(group)} | {sum(t.landed for t in group)} | {drivers:.2f} | "
            f"{total['lost']} | {total['duplicated']} | {total['stale']} | {total['leftovers']} | "
            f"{total['hung']} | {median:.1f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--time-limit", type=float, default=120.0, help="minutes; no trial starts after")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="faults to draw from")
    parser.add_argument("--write", type=Path, default=None, help="write the table here (markdown)")
    parser.add_argument("--json", type=Path, default=None, help="write every trial here (JSON)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="iws-chaos-"))
    started = time.monotonic()
    trials: list[Trial] = []
    try:
        with soak_setup(work) as soak:
            reference_runs(soak)
            print(f"undisturbed: local {soak.wall_s['local']:.1f} s, s3 {soak.wall_s['s3']:.1f} s; "
                  f"work directory {work}", flush=True)
            for index, (kind, backend) in enumerate(schedule(args.trials, tuple(args.kinds))):
                if time.monotonic() - started > args.time_limit * 60:
                    print(f"time limit reached after {index} trials", flush=True)
                    break
                trial = run_trial(soak, index, kind, backend, rng, keep=args.keep)
                trials.append(trial)
                print(f"t{index:04d} {kind:13s} {backend:5s} at {trial.delay_s:5.1f} s "
                      f"landed={trial.landed!s:5s} {trial.detail:15s} drivers={trial.drivers} "
                      f"exits={trial.exits} ({', '.join(f'{d:.0f}' for d in trial.driver_s)} s) "
                      f"{'BROKEN: ' + '; '.join(trial.problems[:3]) if trial.broken else 'ok'}", flush=True)
                if trial.broken:
                    for log in sorted((work / f"t{index:04d}").glob("driver-*.log")):
                        print(f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}", flush=True)
            command = "python benchmarks/chaos.py " + " ".join(argv if argv is not None else sys.argv[1:])
            report = table(trials, soak, time.monotonic() - started, command.strip())
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(report)
    if args.write:
        args.write.write_text(report)
    if args.json:
        args.json.write_text(json.dumps([{**asdict(t), "broken": t.broken} for t in trials], indent=1))
    return 1 if any(t.broken for t in trials) else 0


if __name__ == "__main__":
    sys.exit(main())
