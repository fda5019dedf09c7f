"""The task registry: each robot task the pipeline knows, by name (see `base.Task`).

A task's code lives in its own folder (`pipeline/pusht/`, `pipeline/sweep/`); this file is the
one place it is registered. `iws collect TASK`, `iws eval ... --object-mask TASK |
--ground-truth TASK`, the default `--scorer` and the scorer names of job specs all come from
`TASKS`. The first entry gives the CLI's defaults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.mug.task import Mug
from pipeline.pusht.task import PushT
from pipeline.rope.task import Rope
from pipeline.sweep.task import Sweep
from pipeline.tasks.base import Task
from schemas import SpecError

if TYPE_CHECKING:
    from schemas.job import FilterSpec
    from workers.scoring import PlausibilityCheck, Scorer

_ORDER: list[Task] = [  # typed, so that mypy checks each entry against the Task protocol
    PushT(),
    Sweep(),
    Rope(),
    Mug(),
]
TASKS: dict[str, Task] = {task.name: task for task in _ORDER}


def get_task(name: str, what: str = "task") -> Task:
    """The task called `name`; SpecError listing the known ones (`what`: where the name came from)."""
    if name not in TASKS:
        raise SpecError(f"{what} '{name}' is unknown; the tasks are {', '.join(TASKS)}.")
    return TASKS[name]


def default_task() -> Task:
    return next(iter(TASKS.values()))


def _task_scored_by(name: str | None) -> Task | None:
    """The task whose scorer `name` is, by its scorer name ('pusht_coverage') or its own ('pusht')."""
    return next((task for task in TASKS.values() if name in (task.scorer_name, task.name)), None)


def resolve_scorer(name: str, what: str = "filter.scorer") -> Scorer:
    """The scorer a job spec or `--scorer` names: a task's by its scorer name ('pusht_coverage')
    or by the task's name ('pusht'), or a user's 'package.module:function'. Resolved here, on the
    driver, and handed to the workers."""
    from workers.scoring import import_scorer

    task = _task_scored_by(name)
    if task is not None:
        return task.scorer()
    if ":" in name:
        return import_scorer(name, what)
    known = ", ".join(task.scorer_name for task in TASKS.values())
    raise SpecError(f"{what} '{name}' is unknown; built-in scorers: {known} (or a task's name: "
                    f"{', '.join(TASKS)}). Or give 'package.module:function' returning "
                    "(score, success) for an Episode.")


def resolve_plausibility(spec: FilterSpec | None) -> PlausibilityCheck | None:
    """The plausibility check a job's filter asks for: filter.plausibility.task's, else the task
    of filter.scorer when it is a task's; None without a filter, or with a user's scorer and no
    filter.plausibility. SpecError when filter.plausibility cannot name its task."""
    if spec is None:
        return None
    named = spec.plausibility.task if spec.plausibility is not None else None
    if named is not None:
        return get_task(named, "filter.plausibility.task").plausibility()
    task = _task_scored_by(spec.scorer)
    if task is not None:
        return task.plausibility()
    if spec.plausibility is not None:
        raise SpecError(f"filter.plausibility: filter.scorer '{spec.scorer}' is not a task's, so name "
                        f"the task whose object checks apply in filter.plausibility.task ({', '.join(TASKS)}).")
    return None
