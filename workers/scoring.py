"""The success-filter hook: score a finished episode, then keep, drop or label it.

A scorer is any callable Episode -> (score, success) (see `Scorer`). The workers do not know
tasks: the pipeline resolves a job's scorer (a task's, by name, via pipeline.tasks.registry, or a
user's 'package.module:function') and hands the callable to each replica. `import_scorer` imports
the second kind, for a replica built straight from a job spec. `iws eval policy` scores its
rollouts through the same interface.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from schemas import SpecError
from schemas.job import FilterSpec
from sim_model.data.episode import Episode
from workers.actions.policy import import_object


class TaskScore(NamedTuple):
    """How well an episode did its task: a score (higher is better) and a success flag."""

    score: float
    success: bool


class Scorer(Protocol):
    """Scores one episode from what it recorded (frames, predicted state, actions)."""

    def __call__(self, episode: Episode) -> tuple[float, bool]: ...


class PlausibilityCheck(Protocol):
    """A task's object checks of one episode from its frames: named values in [0, 1], one of
    them 'plausibility' (pipeline/tasks/plausibility.py)."""

    def __call__(self, episode: Episode) -> dict[str, float]: ...


def import_scorer(ref: str, what: str = "filter.scorer") -> Scorer:
    """The user's scorer 'package.module:function'; SpecError for anything else (`what`: where
    the name came from). A task's scorer by name is the pipeline's to resolve and hand over."""
    if ":" not in ref:
        raise SpecError(f"{what} '{ref}' is not 'package.module:function'; a task's scorer named "
                        "so is resolved by the pipeline (pipeline.tasks.registry.resolve_scorer) "
                        "and handed to the replica.")
    return import_object(ref, "scorer")


def score_episode(scorer: Scorer, episode: Episode) -> TaskScore:
    try:
        score, success = scorer(episode)
    except (TypeError, ValueError) as error:
        raise SpecError(f"scorer failed on {episode.meta.episode_id}: expected (score, success), "
                        f"got an error: {error}") from None
    return TaskScore(float(score), bool(success))


def check_episode(check: PlausibilityCheck, episode: Episode) -> dict[str, float]:
    """The check's values for `episode`, 'plausibility' among them (SpecError otherwise)."""
    values = {name: float(value) for name, value in check(episode).items()}
    if "plausibility" not in values:
        raise SpecError(f"plausibility check failed on {episode.meta.episode_id}: it returned "
                        f"{sorted(values)}, without 'plausibility'")
    return values


def is_plausible(spec: FilterSpec | None, plausibility: float | None) -> bool | None:
    """Whether an episode passes filter.plausibility's threshold; None when no check ran."""
    if plausibility is None:
        return None
    threshold = 0.0 if spec is None or spec.plausibility is None else spec.plausibility.min
    return plausibility >= threshold


def is_kept(spec: FilterSpec | None, success: bool | None, plausibility: float | None = None) -> bool:
    """Whether a committed episode enters the job's datasets under the filter's mode (and
    filter.plausibility's, when it drops implausible episodes)."""
    if spec is None:
        return True
    if (spec.plausibility is not None and spec.plausibility.mode == "drop"
            and is_plausible(spec, plausibility) is False):
        return False
    if spec.mode == "label":
        return True
    return bool(success) if spec.mode == "keep" else not success
