"""PushT, the first task of the registry (pipeline.tasks.registry): gym-pusht, scripted play,
scoring.

gym-pusht stands in for the real robot: its physics gives the true frames of any action
sequence, against which the world model and its data are measured. Nothing outside
`pipeline.pusht` depends on it. The rest of the pipeline reaches PushT through `task.PushT`, its
entry in `pipeline.tasks.registry.TASKS`:

    task.py        PushT: the Task interface, each method importing what it needs when called
    features.py    pusht_features(resolution): the FeatureSpec of its recordings
    env.py         PushTSim, a thin gym-pusht wrapper; geometry of the arena and the T
    primitives.py  scripted play (push, rotate, contact, roam, chain)
    aimed.py       contact-aimed and demonstrator-planned generators (held-out and training sets)
    collect.py     writes it into an EpisodeStore (`iws collect pusht`)
    vision.py      the T and the agent from pixels alone (PushTAnalyzer, `--object-mask pusht`)
    tee_fit.py     the T's pose fitted to its pixels
    scorer.py      goal coverage from pixels (`pusht_coverage`)
    truth.py       a policy rolled in gym-pusht beside the world model (`--ground-truth pusht`)
    demonstrator.py, push_planner.py   the pixel-only scripted demonstrator

Submodules are imported explicitly (no re-exports) so that importing this package stays free of
pygame and pymunk.
"""
