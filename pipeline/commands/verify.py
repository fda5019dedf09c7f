"""`iws verify OUT`: check a generation job's output against its records; `--repair` makes
again what fails."""

from __future__ import annotations

import argparse

EXIT_DAMAGED = 1  # the check ran and found damage (2, as everywhere: it could not run)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "verify", help="check a job's output (local or s3://) against its records",
        description="Check every dataset part of a generation job's output against what its record "
        "says: each file there with its recorded size (what every resume checks too), and then the "
        "data read back: each shard's episodes against the checksums they were committed with, "
        "the LeRobot copy's metadata and data files. Exit 0 when all is as recorded, 1 when "
        "something is not (each listed), 2 when it could not check. --repair then reruns the job "
        "from OUT/job.json, which makes exactly the failing parts again from the committed "
        "episodes and re-assembles what depends on them.")
    parser.add_argument("out", metavar="OUT", help="the job's output directory or s3:// prefix")
    parser.add_argument("--quick", action="store_true",
                        help="check files and sizes only (one listing; no data read)")
    parser.add_argument("--repair", action="store_true",
                        help="make what fails again (reruns the job on an embedded local Ray, or "
                        "on --address / RAY_ADDRESS), then check again")
    parser.add_argument("--address", default=None, help="Ray cluster for --repair")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipeline.generate import verify
    from sim_model import storage

    out = args.out.rstrip("/") if storage.is_remote(args.out) else args.out
    spec = verify.job_of(out)
    findings = _check(out, deep=not args.quick)
    if not findings:
        return 0
    if not args.repair:
        print(f"{len(findings)} problems. Make them again from the committed episodes with "
              f"`iws verify {args.out} --repair` (or rerun the job's spec with `iws generate`).")
        return EXIT_DAMAGED
    from pipeline.commands.paths import import_from_working_dir
    from pipeline.generate import run_job

    import_from_working_dir()
    run_job(spec, address=args.address, verify_data=not args.quick)
    print(f"repaired: {len(findings)} problems made again")
    return EXIT_DAMAGED if _check(out, deep=not args.quick) else 0


def _check(out: str, *, deep: bool) -> list:
    from pipeline.generate import verify
    from workers import parts

    found = parts.read_parts(out)
    findings = verify.inspect(out, found, deep=deep) + (verify.check_index(out, found) if deep else [])
    kept = sum(len(p.episodes) for p in found.values())
    how = "files, sizes and data" if deep else "files and sizes"
    for finding in findings:
        print(f"  {finding}")
    print(f"{out}: {len(found)} parts, {kept} episodes in the datasets; {how} checked: "
          + ("all as recorded" if not findings else f"{len(findings)} not as recorded"))
    return findings
