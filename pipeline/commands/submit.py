"""`iws submit job.yaml --address http://HEAD:8265`: run a generation job on a Ray cluster through
its Jobs API, follow its log and progress, or stop it (`--stop ID`). `iws submit --address URL
train -- <iws train arguments>` runs a training stage there the same way (pipeline/train/submit.py).

A cluster with Ray's token authentication (RAY_AUTH_MODE=token; the manifests in infra/ turn it
on) answers 401 to requests without its token. The token is read from where Ray's own clients
read it, RAY_AUTH_TOKEN or the file RAY_AUTH_TOKEN_PATH names, and sent as an `Authorization:
Bearer` header on every request (also without RAY_AUTH_MODE=token here, which Ray's client would
need); it is never printed, logged or put into the job's runtime_env.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from schemas.errors import UserError

TOKEN_VAR, TOKEN_PATH_VAR = "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"
TERMINAL_EXIT = {"SUCCEEDED": 0, "FAILED": 1, "STOPPED": 1}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("submit", help="run a generation job or a training stage on a Ray cluster "
                            "(Jobs API)",
                            description="Upload the job's directory and run `iws generate JOB "
                            "--no-progress` on the cluster's head; committed episodes survive a stop "
                            "or failure, and submitting the same job again resumes it. "
                            "`iws submit [options] train -- <iws train arguments>` runs `iws train` "
                            "there instead (--data s3:// or absolute, --out absolute on a shared "
                            "filesystem; the --config file's directory is uploaded); resubmitting "
                            "resumes the stage.")
    parser.add_argument("job", nargs="?", help="job spec YAML, or 'train' (omit with --stop)")
    parser.add_argument("train_args", nargs="*", metavar="-- TRAIN_ARGS",
                        help="after `train --`: the arguments of `iws train`")
    parser.add_argument("--address", default=None,
                        help="the cluster's dashboard / Jobs API, e.g. http://127.0.0.1:8265 "
                        "(default: RAY_API_SERVER_ADDRESS, else RAY_ADDRESS); a cluster with token "
                        "authentication gets the token from RAY_AUTH_TOKEN or the file "
                        "RAY_AUTH_TOKEN_PATH names (docs/cluster.md)")
    parser.add_argument("--follow", action=argparse.BooleanOptionalAction, default=True,
                        help="stream the job's log until it ends (default); --no-follow returns "
                        "after submitting")
    parser.add_argument("--stop", metavar="JOB_ID", help="stop a submitted job and wait until it ends")
    parser.add_argument("--working-dir", default=None,
                        help="directory to upload (default: the job file's directory); must "
                        "contain the job file and every relative path it names")
    parser.add_argument("--output", default=None, help="override output.path (s3:// on a cluster)")
    parser.add_argument("--model", default=None, help="override the spec's model")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a spec field on the cluster, e.g. --set replicas=8")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete what an earlier run wrote to the output first")
    parser.add_argument("--take-over", action="store_true",
                        help="take the output over from a run whose lease on it has not expired "
                        "(see `iws generate --help`)")
    parser.set_defaults(func=run)


def auth_headers() -> dict[str, str]:
    """{'Authorization': 'Bearer <token>'} from RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH; {} when
    neither is set (then Ray's client sends what it finds itself, if RAY_AUTH_MODE=token)."""
    token = os.environ.get(TOKEN_VAR, "").strip()
    path = os.environ.get(TOKEN_PATH_VAR)
    if not token and path:
        try:
            token = Path(path).expanduser().read_text(encoding="utf-8").strip()
        except OSError as error:
            raise UserError(f"cannot read the Ray auth token file {path} named by {TOKEN_PATH_VAR} "
                            f"({error.strerror}); fix the path or unset it.") from None
        if not token:
            raise UserError(f"the Ray auth token file {path} named by {TOKEN_PATH_VAR} is empty.")
    return {"Authorization": f"Bearer {token}"} if token else {}


def _client(address: str | None) -> Any:
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    address = address or os.environ.get("RAY_API_SERVER_ADDRESS") or os.environ.get("RAY_ADDRESS")
    if not address:
        raise UserError("no cluster given: pass --address http://HEAD:8265 (the Ray dashboard, "
                        "e.g. through `kubectl port-forward svc/iws-head-svc 8265:8265`) or set "
                        "RAY_API_SERVER_ADDRESS.")
    headers = auth_headers()
    try:
        return JobSubmissionClient(address, headers=headers or None)
    except AuthenticationError:
        if headers:
            raise UserError(f"the Ray cluster at {address} refused the token from {_token_source()} "
                            "(403): it is not this cluster's token; fetch the right one "
                            "(docs/cluster.md, 'Access').") from None
        raise UserError(f"the Ray cluster at {address} requires token authentication: set "
                        f"{TOKEN_VAR}, or {TOKEN_PATH_VAR} to a file holding the token "
                        "(docs/cluster.md, 'Access').") from None
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise UserError(f"cannot reach the Ray Jobs API at {address} ({error}); check --address (the "
                        "dashboard's http://HOST:8265) and that the cluster is running.") from None


def _token_source() -> str:
    return TOKEN_VAR if os.environ.get(TOKEN_VAR, "").strip() else TOKEN_PATH_VAR


def _check_address(address: str | None) -> None:
    """UserError at once for an --address without a scheme: Ray's client takes HOST:PORT for a
    cluster's own (GCS) address and waits ~35 s for it to answer before failing."""
    if address is not None and "://" not in address and address != "auto":
        raise UserError(f"--address {address} has no scheme; give the Ray dashboard's HTTP address, "
                        f"e.g. --address http://{address} (the Jobs API, port 8265 by default).")


def run(args: argparse.Namespace) -> int:
    from pipeline import ray_jobs

    _check_address(args.address)
    if args.stop:
        if args.job:
            raise UserError("give either a job file to submit or --stop JOB_ID, not both.")
        client = _client(args.address)
        status = ray_jobs.stop(client, args.stop)
        print(f"job {args.stop}: {status}")
        return 0 if status == "STOPPED" else TERMINAL_EXIT.get(status, 1)
    if not args.job:
        raise UserError("name the job spec YAML to submit (or --stop JOB_ID).")
    if args.job == "train":
        from pipeline.commands import train
        from pipeline.train.submit import prepare_training

        if not args.train_args:
            raise UserError("put the `iws train` arguments after `train --`, e.g. `iws submit "
                            "--address URL train -- --stage dynamics --data s3://b/d.zarr --out "
                            "/shared/run --workers 8 --gpus-per-worker 1`.")
        generation_only = [flag for flag, value in (("--output", args.output), ("--model", args.model),
                                                    ("--set", args.overrides), ("--overwrite", args.overwrite),
                                                    ("--take-over", args.take_over)) if value]
        if generation_only:
            raise UserError(f"{', '.join(generation_only)} apply to generation jobs; a training "
                            "stage takes `iws train` arguments after `train --`.")
        plan = prepare_training(args.train_args, train.submission_parser(), working_dir=args.working_dir)
    elif args.train_args:
        raise UserError(f"unexpected arguments after the job file: {' '.join(args.train_args)}.")
    else:
        from pipeline.generate import submit

        plan = submit.prepare(args.job, working_dir=args.working_dir, output=args.output,
                              model=args.model, overrides=args.overrides, overwrite=args.overwrite,
                              take_over=args.take_over)
    client = _client(args.address)
    job_id = ray_jobs.submit(client, plan)
    address = client.get_address()
    print(f"submitted {plan.job_name} as {job_id} to {address}: {plan.entrypoint}", flush=True)
    if not args.follow:
        print(f"follow: ray job logs --address {address} -f {job_id}\n"
              f"stop:   iws submit --stop {job_id} --address {address}")
        return 0
    try:
        status = ray_jobs.follow(client, job_id, sys.stdout)
    except KeyboardInterrupt:
        print(f"\nstopped following; {job_id} keeps running on the cluster. Stop it with "
              f"`iws submit --stop {job_id} --address {address}`.", file=sys.stderr)
        return 130
    message = client.get_job_info(job_id).message or ""
    print(f"job {job_id}: {status}" + (f" ({message})" if status != "SUCCEEDED" and message else ""))
    return TERMINAL_EXIT.get(status, 1)
