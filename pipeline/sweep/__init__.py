"""Bimanual pile sweeping, the second task of the registry (pipeline.tasks.registry): a granular
pile, two arms (4-D actions), two cameras. A pymunk arena of its own stands in for the real robot.

    task.py          Sweep: the Task interface, each method importing what it needs when called
    features.py      sweep_features(resolution): cameras top and side, 4-D action and state
    env.py           SweepSim: the arena's physics, the pile's random start, the goal
    render.py        the two cameras: top (orthographic) and side (perspective, depth-ordered)
    broom.py         planning a sweep with both pushers side by side
    primitives.py    scripted play (sweep, spread, roam, cross)
    collect.py       writes it into an EpisodeStore (`iws collect sweep`)
    vision.py        the pile and the pushers from pixels (SweepAnalyzer, `--object-mask sweep`)
    scorer.py        the in-goal fraction from pixels (`sweep_in_goal`)
    truth.py         a policy rolled in the arena beside the world model (`--ground-truth sweep`)
    demonstrator.py  the pixel-reading broom sweeper

Submodules are imported explicitly (no re-exports) so that importing this package stays free of
pymunk.
"""
