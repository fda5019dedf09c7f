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


def is_kept(spec: FilterSpec | None, success: bool | None) -> bool:
    """Whether a committed episode enters the job's datasets under the filter's mode."""
    if spec is None or spec.mode == "label":
        return True
    return bool(success) if spec.mode == "keep" else not success
