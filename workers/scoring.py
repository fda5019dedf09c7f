"""The success-filter hook: score a finished episode, then keep, drop or label it.

A scorer is any callable Episode -> (score, success) (see `Scorer`). Built-in scorers are
registered in `BUILTIN_SCORERS` (name -> 'module:function', imported only when named); a job may
also name any 'package.module:function' with that signature. `iws eval policy` scores its
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


# Task-specific scorers live with their task (pipeline/<task>/); a name here imports one lazily.
BUILTIN_SCORERS: dict[str, str] = {
    # Goal coverage by the T estimated from pixels alone; success = coverage > 0.95 (gym-pusht).
    "pusht_coverage": "pipeline.pusht.scorer:score_episode",
}


def resolve_scorer(name: str, what: str = "filter.scorer") -> Scorer:
    """The scorer called `name`; SpecError listing the choices when there is none (`what`:
    where the name came from, for the message)."""
    if name in BUILTIN_SCORERS:
        return import_object(BUILTIN_SCORERS[name], "scorer")
    if ":" in name:
        return import_object(name, "scorer")
    known = ", ".join(sorted(BUILTIN_SCORERS)) or "none yet"
    raise SpecError(f"{what} '{name}' is unknown; built-in scorers: {known}. Or give "
                    "'package.module:function' returning (score, success) for an Episode.")


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
