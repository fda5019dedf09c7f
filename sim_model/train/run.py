"""One entry point per stage over a shared run directory.

    OUT/train_config.json          resolved TrainConfig (fixed architecture for every stage)
    OUT/<stage>/state/             resumable state (weights, AdamW, step, RNG): safetensors + JSON
    OUT/<stage>/metrics.jsonl      training / validation losses at intervals
    OUT/<stage>/samples/*.png      sample images
    OUT/<stage>/model/             the stage's finished checkpoint (WorldModel.load opens it)
    OUT/<stage>/model_last/        with `ema` on: the last weights (model/ holds their average)
    OUT/model/                     the complete world model, after dynamics and after decoder-finetune
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from pathlib import Path
from typing import Any

import torch

from schemas import FeatureSpec
from schemas.errors import SpecError, load_yaml, validate
from sim_model import checkpoint as ckpt
from sim_model.config import CheckpointConfig, ModelConfig, Provenance, StageRecord, preset_config
from sim_model.nn.world import WorldModelNet
from sim_model.normalize import Normalizer, fit_normalization
from sim_model.precision import resolve_precision
from sim_model.storage.atomic import write_text
from sim_model.train.autoencoder import autoencoder_task
from sim_model.train.config import STAGES, Stage, TrainConfig, default_train_config, merge
from sim_model.train.data import TrainingData
from sim_model.train.dynamics import dynamics_task
from sim_model.train.finetune import finetune_task
from sim_model.train.loop import LoopResult, run_loop
from sim_model.train.parallel import Replica, shard_config
from sim_model.train.task import StageTask

log = logging.getLogger(__name__)
SOURCE = {"dynamics": "autoencoder", "decoder-finetune": "dynamics"}
AUTOENCODER_PARTS = ("encoder.", "decoder.", "state_head.")  # what a fresh dynamics starts on


def resolve_config(out: Path, config_file: str | None, preset: str | None,
                   stage: Stage, steps: int | None, init: CheckpointConfig | None = None) -> TrainConfig:
    """The run's TrainConfig: stored one (if any) <- config file <- --steps. Architecture is fixed
    by the first stage (or by the --init-from checkpoint); later changes to it are refused."""
    stored_path = out / "train_config.json"
    override: dict[str, Any] = {}
    if config_file is not None:
        override = load_yaml(TrainConfig, config_file).model_dump(exclude_unset=True)
    if init is not None:
        if preset is not None and preset != init.model.preset:
            raise SpecError(f"--preset {preset} disagrees with the --init-from checkpoint's preset "
                            f"'{init.model.preset}'; drop --preset.")
        # The checkpoint's architecture, with what the config file changes in it on top (e.g. a
        # recipe ablation that adds an input to the dynamics, see `_init_from`).
        override = merge({"preset": init.model.preset, "model": init.model.model_dump()}, override)
    if out.exists() and not out.is_dir():
        raise SpecError(f"--out {out} is a file; pass the run directory shared by all stages (a new path "
                        "starts a new run).")
    if stored_path.is_file():
        stored = validate(TrainConfig, _stored_config(stored_path), str(stored_path))
        if preset is not None and preset != stored.preset:
            raise SpecError(f"{out} was started with preset '{stored.preset}', not '{preset}'; drop "
                            "--preset or use a new --out directory.")
        merged = merge(stored.model_dump(), override)
        if merged.get("model") != stored.model_dump().get("model") or merged["preset"] != stored.preset:
            raise SpecError(f"{config_file} changes the architecture of the run in {out}; use a new --out.")
    else:
        merged = merge(default_train_config(preset or override.get("preset", "small")), override)
    if steps is not None:
        merged = merge(merged, {stage.replace("-", "_"): {"steps": steps}})
    cfg = validate(TrainConfig, merged, source=config_file or "training config")
    write_text(stored_path, cfg.model_dump_json(indent=2))
    return cfg


def _stored_config(path: Path) -> dict[str, Any]:
    """The mapping in a run's train_config.json; SpecError naming it if it is damaged."""
    try:
        found = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        found, why = None, f"is not JSON ({error})"
    else:
        why = f"holds a {type(found).__name__}, not a TrainConfig"
    if isinstance(found, dict):
        return found
    raise SpecError(f"{path} {why}; it is damaged, or not a file iws wrote. It is the run's resolved "
                    "TrainConfig, which fixes the architecture of every stage: restore it from a copy, or "
                    "delete it and rerun with the --preset and --config the run was started with (it is "
                    "written again), or use a new --out.")


def train_stage(stage: Stage, data_path: str | os.PathLike[str], out: str | os.PathLike[str], *,
                config_file: str | None = None, preset: str | None = None, device: str = "cpu",
                steps: int | None = None, progress: bool = True,
                time_limit_s: float | None = None, init_from: str | None = None,
                cache_mb: float | None = None, metrics_logs: tuple[str, ...] = ()) -> Path:
    """Train (or resume) one stage and export its checkpoint. With `time_limit_s` the stage stops
    early (learning rate annealed to the time budget) and still exports what it has; rerunning
    continues towards the configured steps. With `init_from` (a complete checkpoint directory or a
    bundled name) the stage starts from that model's weights, normalisation and architecture
    instead of the previous stage of this run, e.g. to continue training the bundled model on a
    GPU; the stage's own saved state still wins when it exists. With `cache_mb` the frames are
    streamed from the store through a cache of that size instead of loaded whole. Returns the
    exported checkpoint directory. `metrics_logs`: "csv" and/or "tensorboard" beside
    metrics.jsonl (sim_model/train/metrics_log.py)."""
    cfg = stage_config(stage, out, config_file=config_file, preset=preset, device=device, steps=steps,
                       init_from=init_from)
    path = train_stage_worker(stage, data_path, out, cfg, device=device, progress=progress,
                              time_limit_s=time_limit_s, init_from=init_from, cache_mb=cache_mb,
                              metrics_logs=metrics_logs)
    assert path is not None  # a single process is its own chief
    return path


def stage_config(stage: Stage, out: str | os.PathLike[str], *, config_file: str | None = None,
                 preset: str | None = None, device: str = "cpu", steps: int | None = None,
                 init_from: str | None = None) -> TrainConfig:
    """Check the request and resolve (and store) the run's TrainConfig, before any training
    process starts."""
    if stage not in STAGES:
        raise SpecError(f"unknown stage '{stage}'; choose one of {', '.join(STAGES)}.")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SpecError("--device cuda was asked for but torch sees no CUDA device; use --device cpu.")
    init_cfg = None if init_from is None else ckpt.read_config(ckpt.resolve(init_from))
    return resolve_config(Path(out), config_file, preset, stage, steps, init_cfg)


def train_stage_worker(stage: Stage, data_path: str | os.PathLike[str], out: str | os.PathLike[str],
                       cfg: TrainConfig, *, device: str = "cpu", progress: bool = True,
                       time_limit_s: float | None = None, init_from: str | None = None,
                       replica: Replica | None = None, data: TrainingData | None = None,
                       cache_mb: float | None = None, metrics_logs: tuple[str, ...] = ()) -> Path | None:
    """Train one stage with a resolved config, alone or as one data-parallel worker (`replica`,
    whose task is built for one shard's batch); the chief exports the checkpoint and returns its
    directory, other workers return None. `data`: the store at data_path, already loaded;
    otherwise it is read from data_path (frames streamed with `cache_mb`)."""
    out_dir = Path(out)
    init_dir = None if init_from is None else ckpt.resolve(init_from)
    dev = torch.device(device)
    data = data if data is not None else TrainingData.from_store(data_path, cache_mb)
    train_view, val_view = data.split(cfg.val_fraction, cfg.seed)
    if init_dir is not None:
        ckpt_cfg, net = _init_from(init_dir, data, cfg, stage)
    else:
        ckpt_cfg, net = _initial_model(stage, out_dir, cfg, data, train_view.episodes)
    # Not channels-last: with bf16 autocast, a no-grad feedback pass followed by backward
    # segfaults in oneDNN (torch 2.10, CPU); the inference copy in WorldModel uses it.
    net.to(dev)
    bf16 = resolve_precision({"auto": "auto", "on": "bf16", "off": "fp32"}[cfg.bf16], dev)
    stage_dir = out_dir / stage
    stage_dir.mkdir(parents=True, exist_ok=True)
    seed = cfg.seed + 1000 * STAGES.index(stage)
    task_cfg = cfg if replica is None else cfg.model_copy(update={
        stage.replace("-", "_"): shard_config(cfg.stage(stage), replica.shards)})
    task = _task(stage, net, train_view, val_view, task_cfg, ckpt_cfg, dev, bf16, seed)
    result = run_loop(net, task, cfg.stage(stage), stage_dir, seed=seed, device=dev, bf16=bf16,
                      progress=progress, time_limit_s=time_limit_s, replica=replica,
                      metrics_logs=metrics_logs)
    path = None
    if replica is None or replica.is_chief:
        path = _export(stage, out_dir, cfg, ckpt_cfg, net, result, data, data_path)
    if replica is not None and replica.publish is not None:
        replica.publish(result.trainer.step)  # now with the exported checkpoint
    return path


def _export(stage: Stage, out_dir: Path, cfg: TrainConfig, ckpt_cfg: CheckpointConfig,
            net: WorldModelNet, result: LoopResult, data: TrainingData,
            data_path: str | os.PathLike[str]) -> Path:
    """Write the stage's checkpoint (and, after dynamics, the run's complete model) with its
    provenance; returns the directory WorldModel.load should open."""
    stage_dir = out_dir / stage
    record = StageRecord(stage=stage, steps=result.trainer.step, wall_time_s=result.trainer.wall_time_s,
                         hardware=result.trainer.hardware, data_hash=data.data_hash(),
                         val_loss=result.val.get("val_loss"),
                         finished=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    previous = {s.stage: s for s in ckpt_cfg.provenance.stages}
    # The weights this stage started from had been trained in this stage before (a chain that
    # began with --init-from): steps and time add up.
    if stage in previous:
        before = previous[stage]
        record = record.model_copy(update={"steps": before.steps + record.steps,
                                           "wall_time_s": before.wall_time_s + record.wall_time_s,
                                           "hardware": sorted({*before.hardware, *record.hardware})})
    stages = [s for s in ckpt_cfg.provenance.stages if s.stage != stage] + [record]
    final = ckpt_cfg.model_copy(update={"provenance": Provenance(
        source="trained", seed=cfg.seed, data=str(data_path), stages=stages)})
    weights = net.state_dict() if result.average is None else result.average.state_dict(net)
    if result.average is not None:  # the last weights too, to compare against the average
        ckpt.write_checkpoint(stage_dir / "model_last", final, net.state_dict())
    path = ckpt.write_checkpoint(stage_dir / "model", final, weights)
    if stage != "autoencoder":
        ckpt.write_checkpoint(out_dir / "model", final, weights)
        path = out_dir / "model"
    log.info("%s: exported after %d of this run's %d steps (%d in the checkpoint's provenance, "
             "%.0f s in all); checkpoint %s", stage, result.trainer.step, cfg.stage(stage).steps,
             record.steps, record.wall_time_s, path)
    return path


def _initial_model(stage: Stage, out: Path, cfg: TrainConfig, data: TrainingData,
                   train_episodes: Any) -> tuple[CheckpointConfig, WorldModelNet]:
    """A fresh net for the autoencoder; otherwise the previous stage's finished checkpoint."""
    if stage == "autoencoder":
        model_cfg = cfg.model or preset_config(cfg.preset, data.features)
        rows = torch.zeros(len(data.actions), dtype=torch.bool)
        starts = [0, *data.ends[:-1]]
        for e in train_episodes:
            rows[int(starts[e]):int(data.ends[e])] = True
        norm = fit_normalization(data.features, data.actions[rows.numpy()],
                                 None if data.states is None else data.states[rows.numpy()])
        return (CheckpointConfig(features=data.features, model=model_cfg, normalization=norm),
                _seeded_net(model_cfg, data.features, cfg.seed))
    source = previous_stage(stage, out)
    ckpt_cfg = ckpt.read_config(source)
    if ckpt_cfg.features != data.features:
        raise SpecError(f"the data's features differ from those {source} was trained on; train "
                        "every stage of a run on the same dataset layout.")
    net = _seeded_net(ckpt_cfg.model, ckpt_cfg.features, cfg.seed + 1)
    # The dynamics stage takes only the autoencoder's parts (its dynamics starts fresh); the
    # decoder fine-tune takes everything.
    _load_parts(net, source, AUTOENCODER_PARTS if stage == "dynamics" else ("",))
    return ckpt_cfg, net


def _load_parts(net: WorldModelNet, source: Path, keep: tuple[str, ...]) -> None:
    """The checkpoint's weights whose names start with one of `keep`; the rest of `net` stays
    as initialised."""
    expected = {k: v for k, v in net.state_dict().items() if k.startswith(keep)}
    tensors = {k: v for k, v in ckpt.read_weights(source).items() if k.startswith(keep)}
    ckpt.check_shapes(source, expected, tensors)
    net.load_state_dict(tensors, strict=False)


def previous_stage(stage: Stage, out: Path) -> Path:
    """The finished checkpoint a later stage starts from; refused if it is not there yet."""
    source = out / SOURCE[stage] / "model"
    if not (source / ckpt.WEIGHTS).is_file():
        raise SpecError(f"stage '{stage}' starts from the finished '{SOURCE[stage]}' stage, but "
                        f"{source} does not exist; run `iws train --stage {SOURCE[stage]} --out {out}` "
                        "to the end first.")
    return source


def _init_from(directory: Path, data: TrainingData, cfg: TrainConfig,
               stage: Stage) -> tuple[CheckpointConfig, WorldModelNet]:
    """Every weight of a complete checkpoint, to continue training it. When the run's
    architecture widens a layer's input (e.g. `recency` adds channels to the dynamics' target
    stem) the new inputs start at zero weight, so the model starts out computing what the
    checkpoint computed. With the dynamics' `fresh_dynamics`, only the checkpoint's autoencoder:
    the dynamics starts from scratch in the run's architecture, and the provenance keeps the
    stages before it."""
    ckpt_cfg = ckpt.read_config(directory)
    if ckpt_cfg.features != data.features:
        raise SpecError(f"--init-from {directory} was trained on other features than the data: "
                        f"{feature_differences(ckpt_cfg.features, data.features)}; continue a "
                        "checkpoint on data of the same layout (resize or re-collect the data).")
    model = cfg.model or ckpt_cfg.model
    net = _seeded_net(model, ckpt_cfg.features, cfg.seed + 1)
    if stage == "dynamics" and cfg.dynamics.fresh_dynamics:
        _load_parts(net, directory, AUTOENCODER_PARTS)
        before = [s for s in ckpt_cfg.provenance.stages if s.stage == "autoencoder"]
        provenance = ckpt_cfg.provenance.model_copy(update={"stages": before})
        return ckpt_cfg.model_copy(update={"model": model, "provenance": provenance}), net
    tensors = ckpt.read_weights(directory)
    expected = net.state_dict()
    widened = [k for k, v in tensors.items() if k in expected and _widens(v, expected[k])]
    for key in widened:
        grown = torch.zeros_like(expected[key])
        grown[tuple(slice(0, n) for n in tensors[key].shape)] = tensors[key]
        tensors[key] = grown
    if widened:
        log.warning("--init-from %s: the new architecture widens %s; the added inputs start at zero",
                    directory, ", ".join(widened))
    ckpt.check_shapes(directory, expected, tensors)
    net.load_state_dict(tensors)
    return ckpt_cfg.model_copy(update={"model": model}), net


def feature_differences(model: FeatureSpec, data: FeatureSpec) -> str:
    """'field: model value vs data value' for every field that differs (cameras compared by
    name and size)."""
    ours, theirs = model.model_dump(), data.model_dump()
    return "; ".join(f"{key}: checkpoint {ours[key]} vs data {theirs[key]}"
                     for key in ours if ours[key] != theirs[key])


def _widens(old: torch.Tensor, new: torch.Tensor) -> bool:
    """A conv/linear weight whose input dimension (dim 1) grew and nothing else changed."""
    return (old.dim() == new.dim() >= 2 and old.shape[0] == new.shape[0] and old.shape[1] < new.shape[1]
            and old.shape[2:] == new.shape[2:])


def _seeded_net(model: ModelConfig, features: FeatureSpec, seed: int) -> WorldModelNet:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return WorldModelNet(model, features)


def _task(stage: Stage, net: WorldModelNet, train_view: Any, val_view: Any, cfg: TrainConfig,
          ckpt_cfg: CheckpointConfig, device: torch.device, bf16: bool, seed: int) -> StageTask:
    stage_cfg, model = cfg.stage(stage), ckpt_cfg.model
    norm = Normalizer(ckpt_cfg.normalization, device)
    window = stage_cfg.window or model.dynamics.context + 1
    if stage == "autoencoder":
        return autoencoder_task(net, train_view, val_view, stage_cfg, norm, device,
                                model.autoencoder.decode_steps, seed)
    if stage == "dynamics":
        from sim_model.world_model import WorldModel

        def make_world_model() -> WorldModel:
            return WorldModel(net, ckpt_cfg, device, "bf16" if bf16 else "fp32")

        return dynamics_task(net, train_view, val_view, stage_cfg, norm, device, window=window,
                             dyn=model.dynamics, seed=seed, make_world_model=make_world_model)
    return finetune_task(net, train_view, val_view, stage_cfg, norm, device, window=window,
                         dyn=model.dynamics,
                         decode_steps=model.autoencoder.decode_steps, seed=seed)
