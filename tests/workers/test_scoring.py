"""workers.scoring: user scorers by 'module:function', the call contract, and the filter modes."""

from __future__ import annotations

import numpy as np
import pytest

from schemas import EpisodeMeta, SpecError
from schemas.job import FilterSpec
from sim_model.data.episode import Episode
from tests.workers.policies import even_seed_scorer
from workers.scoring import TaskScore, import_scorer, is_kept, score_episode


def _episode(index: int) -> Episode:
    return Episode(frames={"top": np.zeros((1, 4, 4, 3), np.uint8)}, action=np.zeros((1, 2), np.float32),
                   meta=EpisodeMeta(episode_id=f"e{index}", length=1, info={"index": index}))


def test_a_user_scorer_is_imported_and_its_result_typed() -> None:
    scorer = import_scorer("tests.workers.policies:even_seed_scorer")
    assert scorer is even_seed_scorer
    assert score_episode(scorer, _episode(4)) == TaskScore(4.0, True)


def test_a_bare_name_is_the_pipelines_to_resolve() -> None:
    with pytest.raises(SpecError, match="'pusht_coverage' is not 'package.module:function'.*pipeline"):
        import_scorer("pusht_coverage")
    with pytest.raises(SpecError, match="has no attribute 'missing'"):
        import_scorer("tests.workers.policies:missing")


def test_a_scorer_of_the_wrong_shape_is_named() -> None:
    with pytest.raises(SpecError, match="scorer failed on e1: expected \\(score, success\\)"):
        score_episode(lambda episode: 0.5, _episode(1))  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize(("mode", "kept"), [("label", [True, True]), ("keep", [True, False]),
                                            ("drop", [False, True])])
def test_filter_modes(mode: str, kept: list[bool]) -> None:
    spec = FilterSpec(scorer="x:y", mode=mode)  # type: ignore[arg-type]
    assert [is_kept(spec, True), is_kept(spec, False)] == kept
    assert is_kept(None, False)
