"""Checkpoint selection in the world model: do in-model scores rank policies as the task's real
environment does? (`iws eval ranking`)

Every policy runs closed loop from the same initial states in the world model and, through the
task's ground truth (`Task.roll_ground_truth`: gym-pusht for PushT), in the real environment;
both sides are scored by the task's graded progress (PushT: goal coverage), success beside it.
Agreement is reported as the field reports it, over all policies and within each family (a
family: checkpoints of one training run or one kind of policy, e.g. ACT at four points of its
training):

- Pearson r, Spearman's rho and Kendall's tau-b of in-model against real mean scores;
- MMRV, the mean maximum rank violation (0 = every order kept; stats.mmrv);
- slope and intercept of the least-squares line of in-model on real score (calibration: 1 and 0
  when the model's scores are the real ones);
- checkpoint-selection regret: the real score of the best policy minus that of the policy the
  model ranks first (what a user loses by choosing in the model).

Each comes with a 95% percentile-bootstrap interval over the starts: a resample draws starts with
replacement, the same starts for every policy and both sides (the rows are paired), and
recomputes the policies' means and the measure, so the interval is that of the ranking itself.

Per-policy scores are cached in a work directory, one file per policy and side: the real side
under the task's name (it does not depend on the model, so ranking a second checkpoint reuses
it), the model side under the checkpoint's hash; each keyed by the evaluation's setup and the
policy's content (a LeRobot checkpoint's files, a callable's reference). A killed run resumes,
and adding a policy costs only its own rollouts.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, Field

from pipeline.evaluation import stats
from pipeline.evaluation.policy import evaluate_in_model, summarize
from pipeline.evaluation.policy_report import PolicyReport, SideScore, Summary
from schemas import EpisodeSpec, SpecError
from sim_model.data.episode import Episode
from workers.scoring import Scorer

if TYPE_CHECKING:
    from pipeline.tasks.base import Task
    from sim_model.world_model import WorldModel
    from workers.actions.base import ActionSource

log = logging.getLogger(__name__)

SCRIPTED = "scripted"  # the family of a 'module:function' policy not given one
MEASURES = ("pearson", "spearman", "kendall", "mmrv", "slope", "intercept", "regret")
LEROBOT_WEIGHTS = ("config.json", "model.safetensors")


@dataclass(frozen=True)
class PolicyEntry:
    """One policy to rank: its name in the tables, its family and what `--policy` would take."""

    name: str
    family: str
    ref: str


# -- the policy list -------------------------------------------------------------------------


def lerobot_family(directory: Path) -> str | None:
    """A LeRobot checkpoint's policy type ('act', 'diffusion', 'vqbet'...) from its config.json."""
    try:
        kind = json.loads((directory / "config.json").read_text()).get("type")
    except (OSError, ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) and kind else None


def _default_name(ref: str) -> str:
    """'runs/zoo/act/checkpoints/002000/pretrained_model' -> 'act/002000'; 'pkg.mod:Noisy30' ->
    'Noisy30'."""
    if ":" in ref and not Path(ref).exists():
        return ref.rsplit(":", 1)[-1]
    parts = [p for p in Path(ref).parts if p not in ("pretrained_model", "checkpoints", ".")]
    return "/".join(parts[-2:]) or ref


def expand_policies(values: Sequence[str]) -> list[PolicyEntry]:
    """`--policy [FAMILY=]REF` values as entries. REF is a LeRobot checkpoint directory, a glob of
    them (sorted; checkpoints of one run sort by step), or 'package.module:function'. Without
    FAMILY a LeRobot checkpoint's family is its policy type and a callable's 'scripted'.
    SpecError for a glob that matches nothing or names that collide."""
    entries: list[PolicyEntry] = []
    for value in values:
        family, _, ref = value.partition("=") if "=" in value.split(":", 1)[0] else ("", "", value)
        refs = [ref]
        if glob.has_magic(ref):
            refs = sorted(glob.glob(ref))
            if not refs:
                raise SpecError(f"--policy {value}: the pattern {ref!r} matches nothing.")
        for one in refs:
            path = Path(one)
            kind = family or (lerobot_family(path) if path.is_dir() else SCRIPTED)
            if kind is None:
                raise SpecError(f"--policy {one}: a directory without a LeRobot config.json (with "
                                "its 'type'); give a checkpoint's pretrained_model directory, or "
                                "name the family as FAMILY=DIR.")
            entries.append(PolicyEntry(_default_name(one), kind, one))
    names = [e.name for e in entries]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise SpecError(f"two --policy entries are both named {clashes[0]!r} (a name is the "
                        "reference's last two path parts); rank them in separate runs or from "
                        "directories whose names differ.")
    if len(entries) < 3:
        raise SpecError(f"ranking needs at least 3 policies, got {len(entries)}: give more --policy.")
    return entries


def policy_digest(ref: str) -> str:
    """What identifies a policy's behaviour: a LeRobot checkpoint's config and weights (so a
    retrained checkpoint at the same path is evaluated again), else the reference itself."""
    digest = hashlib.sha256(ref.encode())
    path = Path(ref)
    if path.is_dir():
        digest = hashlib.sha256()
        for name in (*LEROBOT_WEIGHTS, *sorted(p.name for p in path.glob("*processor*.json"))):
            file = path / name
            if file.is_file():
                digest.update(name.encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


# -- scoring ---------------------------------------------------------------------------------


def every_kth(scorer: Scorer, k: int) -> Scorer:
    """`scorer` on every k-th frame of an episode and always its first and last (a PushT T fit
    costs ~30 ms a frame): exact for scorers that read the first and last frames (sweep's), a
    coarser 'best over the episode' for those that take a maximum (pusht_coverage)."""
    if k == 1:
        return scorer

    def score(episode: Episode) -> tuple[float, bool]:
        rows = np.unique(np.append(np.arange(0, len(episode), k), len(episode) - 1))
        meta = episode.meta.model_copy(update={"length": len(rows)})
        sub = Episode(frames={c: f[rows] for c, f in episode.frames.items()}, action=episode.action[rows],
                      meta=meta, state=None if episode.state is None else episode.state[rows],
                      extras={key: v[rows] for key, v in episode.extras.items()})
        return scorer(sub)
    return score


@dataclass
class RankingSetup:
    """What every policy is evaluated on."""

    model: WorldModel
    model_label: str
    task: Task
    scorer: Scorer
    scorer_label: str
    specs: list[EpisodeSpec]
    horizon: int
    batch_size: int
    seed: int
    init: str
    work: Path
    also: dict[str, Scorer] = field(default_factory=dict)  # more in-model scorers, by label

    def key(self) -> str:
        """The setup's part of the cache key (the starts, their seeds, the horizon, the scorer)."""
        text = json.dumps([[s.init_ref, s.seed] for s in self.specs] + [self.horizon, self.scorer_label])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _load(path: Path, episodes: int) -> list[SideScore] | None:
    """Per-start scores cached at `path`; None when missing, damaged or short."""
    try:
        scores = [SideScore.model_validate(s) for s in json.loads(path.read_text())]
    except (OSError, ValueError):
        return None
    return scores if len(scores) == episodes else None


def _cached(paths: dict[str, Path], roll: Callable[[], dict[str, list[SideScore]]],
            episodes: int) -> dict[str, list[SideScore]]:
    """Per-start scores under each label of `paths`, rolled once for all of them and written
    (atomically) when any is missing or damaged."""
    loaded = {label: _load(path, episodes) for label, path in paths.items()}
    if all(v is not None for v in loaded.values()):
        return loaded  # type: ignore[return-value]
    rolled = roll()
    for label, path in paths.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_suffix(f".{os.getpid()}.tmp")
        staged.write_text(json.dumps([s.model_dump() for s in rolled[label]]))
        os.replace(staged, path)
    return rolled


def _recording(primary: Scorer, also: dict[str, Scorer]) -> tuple[Scorer, dict[str, list[SideScore]]]:
    """`primary`, also scoring each episode with every scorer of `also` (recorded in call order:
    the episodes' order)."""
    from pipeline.evaluation.policy import score_episode

    recorded: dict[str, list[SideScore]] = {label: [] for label in also}

    def score(episode: Episode) -> tuple[float, bool]:
        for label, scorer in also.items():
            value, success = score_episode(scorer, episode)
            recorded[label].append(SideScore(score=value, success=success))
        return primary(episode)
    return score, recorded


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "policy"


def _label_dir(label: str) -> str:
    return f"also-{slug(label)[:40]}-{hashlib.sha256(label.encode()).hexdigest()[:8]}"


def evaluate_entry(entry: PolicyEntry, setup: RankingSetup,
                   build: Callable[[str], ActionSource]) -> tuple[PolicyReport, dict[str, list[SideScore]]]:
    """Both sides of one policy (each cached), as `iws eval policy --ground-truth` reports them,
    and the in-model scores of every `setup.also` scorer (the same rollouts). `build` makes a
    fresh policy from its reference (each side starts it anew)."""
    base = setup.work / setup.key()
    name = f"{slug(entry.name)}-{policy_digest(entry.ref)}.json"
    model_dir = base / f"model-{setup.model.checkpoint_hash[:16]}"

    def in_model() -> dict[str, list[SideScore]]:
        scorer, recorded = _recording(setup.scorer, setup.also)
        scores = evaluate_in_model(setup.model, build(entry.ref), scorer, setup.specs, setup.batch_size, 0)[0]
        return {"": scores, **recorded}

    def in_truth() -> dict[str, list[SideScore]]:
        return {"": setup.task.roll_ground_truth(build(entry.ref), setup.specs, setup.model.features,
                                                 setup.horizon, setup.batch_size, 0)[0]}

    n = len(setup.specs)
    model_scores = _cached({"": model_dir / name, **{label: model_dir / _label_dir(label) / name
                                                    for label in setup.also}}, in_model, n)
    truth_scores = _cached({"": base / setup.task.name / name}, in_truth, n)[""]
    report = summarize(setup.specs, model_scores.pop(""), truth_scores, setup.seed,
                       {"policy": entry.ref, "model": setup.model_label, "init": setup.init,
                        "scorer": setup.scorer_label, "checkpoint_hash": setup.model.checkpoint_hash,
                        "horizon": setup.horizon, "ground_truth_env": setup.task.name})
    return report, model_scores


# -- agreement -------------------------------------------------------------------------------


class Estimate(BaseModel):
    """A measure over the policies' mean scores, with its bootstrap interval over the starts
    (None where the measure is undefined: a constant side has no correlation)."""

    value: float | None
    low: float | None = None
    high: float | None = None


class RankAgreement(BaseModel):
    policies: int
    pearson: Estimate
    spearman: Estimate
    kendall: Estimate
    mmrv: Estimate
    slope: Estimate = Field(description="Of the least-squares line in-model = slope * real + intercept.")
    intercept: Estimate
    regret: Estimate = Field(description="Best real score minus the real score of the model's first choice.")


def measures(model: np.ndarray, real: np.ndarray) -> dict[str, float | None]:
    """Every measure for one set of policy means (in-model, real)."""
    line = stats.linear_fit(real, model) if len(real) >= 2 else None
    pair = len(real) >= 2
    return {"pearson": stats.pearson(model, real) if pair else None,
            "spearman": stats.spearman(model, real) if pair else None,
            "kendall": stats.kendall_tau(model, real) if pair else None,
            "mmrv": stats.mmrv(model, real), "regret": stats.selection_regret(model, real),
            "slope": None if line is None else line[0], "intercept": None if line is None else line[1]}


def agreement(model: np.ndarray, real: np.ndarray, seed: int, resamples: int = 2000) -> RankAgreement:
    """Measures of (policies, starts) score arrays, each with its paired bootstrap interval."""
    n = model.shape[1]
    point = measures(model.mean(axis=1), real.mean(axis=1))
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {m: [] for m in MEASURES}
    for _ in range(resamples):
        rows = rng.integers(0, n, n)
        for m, v in measures(model[:, rows].mean(axis=1), real[:, rows].mean(axis=1)).items():
            if v is not None:
                draws[m].append(v)

    def estimate(m: str) -> Estimate:
        # An interval only where the measure is defined in most resamples.
        if point[m] is None or len(draws[m]) < resamples / 2:
            return Estimate(value=point[m])
        low, high = np.percentile(draws[m], [2.5, 97.5])
        return Estimate(value=point[m], low=float(low), high=float(high))
    return RankAgreement(policies=len(model), **{m: estimate(m) for m in MEASURES})


class RankedPolicy(BaseModel):
    name: str
    family: str
    policy: str = Field(description="The reference as given to --policy.")
    world_model: Summary
    ground_truth: Summary
    score_gap: float = Field(description="Real minus in-model mean score (calibration).")
    model_rank: int = Field(description="1 = the model's best.")
    real_rank: int


class AlsoScored(BaseModel):
    """The ranking by another in-model scorer on the same rollouts."""

    scores: dict[str, float] = Field(description="In-model mean score per policy name.")
    overall: RankAgreement
    per_family: dict[str, RankAgreement]


class RankingReport(BaseModel):
    model: str
    checkpoint_hash: str
    ground_truth_env: str
    init: str
    scorer: str
    horizon: int
    episodes: int
    seed: int
    resamples: int
    policies: list[RankedPolicy]
    overall: RankAgreement = Field(description="On mean score (the task's graded progress).")
    per_family: dict[str, RankAgreement]
    success: RankAgreement = Field(description="The same measures on success rates.")
    also: dict[str, AlsoScored] = Field(default_factory=dict,
                                        description="Each --also-score scorer's in-model ranking.")


def _order(values: np.ndarray) -> np.ndarray:
    """Competition ranks, 1 = the highest value."""
    return np.array([1 + int((values > v).sum()) for v in values])


def _per_family(entries: Sequence[PolicyEntry], model: np.ndarray, real: np.ndarray, seed: int,
                resamples: int) -> dict[str, RankAgreement]:
    out = {}
    for family in sorted({e.family for e in entries}):
        rows = [i for i, e in enumerate(entries) if e.family == family]
        out[family] = agreement(model[rows], real[rows], seed, resamples)
    return out


def score_matrix(scores: Sequence[Sequence[SideScore]], field: str = "score") -> np.ndarray:
    """(policies, starts) array of one field of per-start scores."""
    return np.array([[float(getattr(s, field)) for s in row] for row in scores])


def rank(entries: Sequence[PolicyEntry], reports: Sequence[PolicyReport], seed: int,
         resamples: int = 2000, also: Mapping[str, Sequence[Sequence[SideScore]]] | None = None,
         ) -> RankingReport:
    """The ranking report from each policy's two-sided report (same starts, same order), and
    `also`: per scorer label, each policy's in-model scores by that scorer."""
    def matrix(side: str, field: str) -> np.ndarray:
        return score_matrix([[getattr(e, side) for e in r.episodes] for r in reports], field)

    model, real = matrix("world_model", "score"), matrix("ground_truth", "score")
    model_rank, real_rank = _order(model.mean(axis=1)), _order(real.mean(axis=1))
    first = reports[0]
    policies = []
    for i, (entry, report) in enumerate(zip(entries, reports, strict=True)):
        assert report.ground_truth is not None
        policies.append(RankedPolicy(
            name=entry.name, family=entry.family, policy=entry.ref, world_model=report.world_model,
            ground_truth=report.ground_truth,
            score_gap=report.ground_truth.mean_score - report.world_model.mean_score,
            model_rank=int(model_rank[i]), real_rank=int(real_rank[i])))
    alternatives = {}
    for label, rows in (also or {}).items():
        other = score_matrix(rows)
        alternatives[label] = AlsoScored(
            scores={e.name: float(v) for e, v in zip(entries, other.mean(axis=1), strict=True)},
            overall=agreement(other, real, seed, resamples),
            per_family=_per_family(entries, other, real, seed, resamples))
    return RankingReport(
        model=first.model, checkpoint_hash=first.checkpoint_hash,
        ground_truth_env=first.ground_truth_env or "", init=first.init, scorer=first.scorer,
        horizon=first.horizon, episodes=len(first.episodes), seed=seed, resamples=resamples,
        policies=policies, overall=agreement(model, real, seed, resamples),
        per_family=_per_family(entries, model, real, seed, resamples),
        success=agreement(matrix("world_model", "success"), matrix("ground_truth", "success"),
                          seed, resamples), also=alternatives)


# -- what is written -------------------------------------------------------------------------


def write_scores(path: Path, entries: Sequence[PolicyEntry], reports: Sequence[PolicyReport],
                 also: Mapping[str, Sequence[Sequence[SideScore]]]) -> None:
    """Every start's scores (scores.json), for analyses of one's own: per policy its family, the
    real and in-model scores and successes per start, and each --also-score scorer's."""
    rows = []
    for i, (entry, report) in enumerate(zip(entries, reports, strict=True)):
        rows.append({"name": entry.name, "family": entry.family, "policy": entry.ref,
                     "real": [e.ground_truth.score for e in report.episodes if e.ground_truth],
                     "real_success": [e.ground_truth.success for e in report.episodes if e.ground_truth],
                     "model": {report.scorer: [e.world_model.score for e in report.episodes],
                               **{label: [s.score for s in scores[i]] for label, scores in also.items()}},
                     "model_success": [e.world_model.success for e in report.episodes]})
    starts = [{"init": e.init, "seed": e.seed} for e in reports[0].episodes]
    path.write_text(json.dumps({"starts": starts, "policies": rows}, indent=1))


def _fmt(e: Estimate) -> str:
    if e.value is None:
        return "n/a"
    if e.low is None or e.high is None:
        return f"{e.value:.2f}"
    return f"{e.value:.2f} [{e.low:.2f}, {e.high:.2f}]"


def markdown(report: RankingReport) -> str:
    """The tables of ranking.md: policies, then agreement overall and per family."""
    lines = ["| policy | family | in-model score | real score | in-model success | real success | "
             "gap | rank (model / real) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for p in sorted(report.policies, key=lambda p: (p.family, p.name)):
        m, r = p.world_model, p.ground_truth
        lines.append(f"| {p.name} | {p.family} | {m.mean_score:.3f} [{m.mean_score_ci95.low:.3f}, "
                     f"{m.mean_score_ci95.high:.3f}] | {r.mean_score:.3f} [{r.mean_score_ci95.low:.3f}, "
                     f"{r.mean_score_ci95.high:.3f}] | {m.success_rate:.2f} | {r.success_rate:.2f} | "
                     f"{p.score_gap:+.3f} | {p.model_rank} / {p.real_rank} |")
    lines += ["", "| policies | n | Pearson r | Spearman rho | Kendall tau | MMRV | slope | intercept | "
              "regret |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    groups = [("all (score)", report.overall), ("all (success)", report.success),
              *((f"{f}", a) for f, a in report.per_family.items())]
    for label, a in groups:
        lines.append(f"| {label} | {a.policies} | " + " | ".join(_fmt(getattr(a, m)) for m in MEASURES) + " |")
    for scorer, alt in report.also.items():
        lines += ["", f"In-model scorer `{scorer}` (same rollouts):", "",
                  "| policies | n | Pearson r | Spearman rho | Kendall tau | MMRV | slope | intercept | "
                  "regret |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for label, a in [("all (score)", alt.overall), *alt.per_family.items()]:
            lines.append(f"| {label} | {a.policies} | " + " | ".join(_fmt(getattr(a, m)) for m in MEASURES)
                         + " |")
    return "\n".join(lines)


def plot(report: RankingReport, path: Path) -> None:
    """In-model against real mean score, one colour per family, 95% intervals as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    colours = plt.get_cmap("tab10")
    for i, family in enumerate(report.per_family):
        ps = [p for p in report.policies if p.family == family]
        x = np.array([p.ground_truth.mean_score for p in ps])
        y = np.array([p.world_model.mean_score for p in ps])
        xerr = np.abs(np.array([[p.ground_truth.mean_score_ci95.low, p.ground_truth.mean_score_ci95.high]
                                for p in ps]).T - x)
        yerr = np.abs(np.array([[p.world_model.mean_score_ci95.low, p.world_model.mean_score_ci95.high]
                                for p in ps]).T - y)
        ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", ms=5, lw=0.7, capsize=2,
                    color=colours(i % 10), label=f"{family} ({len(ps)})")
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
    o = report.overall
    if o.slope.value is not None and o.intercept.value is not None:
        xs = np.linspace(0, 1, 2)
        ax.plot(xs, o.slope.value * xs + o.intercept.value, color="black", lw=0.8)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel(f"real mean score ({report.ground_truth_env})")
    ax.set_ylabel("in-model mean score")
    ax.set_title(f"Spearman {_fmt(o.spearman)}, MMRV {_fmt(o.mmrv)}", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
