"""The success-filter hook: score a finished episode, then keep, drop or label it.

Built-in scorers are registered in `BUILTIN_SCORERS` (name -> 'module:function'); a job may also
name any 'package.module:function' taking an Episode and returning (score, success).
"""

from __future__ import annotations

from collections.abc import Callable

from schemas import SpecError
from schemas.job import FilterSpec
from sim_model.data.episode import Episode
from workers.actions.policy import import_object

Scorer = Callable[[Episode], tuple[float, bool]]

# Built-in task scorers arrive with the evaluation issue; each maps a name to its implementation.
BUILTIN_SCORERS: dict[str, str] = {}


def resolve_scorer(name: str) -> Scorer:
    """The scorer called `name`; SpecError listing the choices when there is none."""
    if name in BUILTIN_SCORERS:
        return import_object(BUILTIN_SCORERS[name], "scorer")
    if ":" in name:
        return import_object(name, "scorer")
    known = ", ".join(sorted(BUILTIN_SCORERS)) or "none yet"
    raise SpecError(f"filter.scorer '{name}' is unknown; built-in scorers: {known}. Or give "
                    "'package.module:function' returning (score, success) for an Episode.")


def score_episode(scorer: Scorer, episode: Episode) -> tuple[float, bool]:
    try:
        score, success = scorer(episode)
    except (TypeError, ValueError) as error:
        raise SpecError(f"scorer failed on {episode.meta.episode_id}: expected (score, success), "
                        f"got an error: {error}") from None
    return float(score), bool(success)


def is_kept(spec: FilterSpec | None, success: bool | None) -> bool:
    """Whether a committed episode enters the job's datasets under the filter's mode."""
    if spec is None or spec.mode == "label":
        return True
    return bool(success) if spec.mode == "keep" else not success
