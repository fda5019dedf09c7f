"""The world model: torch only, never imports ray.

    world_model.py   WorldModel (load/random/save/reset/step/rollout), StepResult, RolloutResult
    config.py        pydantic configs of the model and checkpoint; size presets tiny/small/paper
    checkpoint.py    model.safetensors + config.json; clear errors, never unpickles
    nn/              encoder + consistency decoder + state head, dynamics U-Net with causal
                     temporal attention (cached context), global spatial attention, FiLM actions
    context.py       ring buffer of context keys/values: constant cost per rollout step
    inputs.py        checks and reshapes what callers hand to reset/step
    compile.py       one rollout step as three tensor functions, eager or torch.compile
    precision.py     bf16 autocast where it pays (AMX / AVX512-BF16 CPUs, CUDA)
    noise.py         per-row generators: a row's samples do not depend on its batch
    normalize.py     action and state scaling to [-1, 1], stored in checkpoints
    evaluate.py      fidelity against recorded episodes per horizon, beside repeat-the-frame
                     (`iws eval fidelity`); parse_horizons, mask_iou
    metrics.py       PSNR and SSIM on uint8 frames
    stability.py     long-rollout health per step (`iws eval stability`)
    train/           `iws train` stages: autoencoder -> dynamics -> decoder-finetune
    data/            the in-memory Episode and the Zarr EpisodeStore; data/formats/, the data
                     floor: detect, read, import and export LeRobot v3.0 and Diffusion-Policy Zarr
    storage/         local paths and s3:// behind one API: atomic files and directories,
                     conditional creates, listing, publishing (the floor checkpoints, the store
                     and the workers share; it imports nothing of iws but schemas)
"""
