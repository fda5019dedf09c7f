"""Rope routing, the paper's deformable regime (issue 30): a rope of linked segments held at one
end by an end effector (2-D actions), a clip of two posts on the table, one camera from above.
A pymunk table of its own stands in for the real robot.

The third task of the registry (`iws collect rope`, `--ground-truth rope`, `--object-mask rope`,
scorer `rope_inserted`); no bundled model yet.

    env.py           RopeSim: the rope, the clip, the effector's PD drive; `inserted` (through the gap)
    render.py        the `top` camera
    primitives.py    scripted play (route, swing, graze, roam)
    features.py      rope_features(resolution): camera top, 2-D action and state, the rope's points
    collect.py       writes it into an EpisodeStore
    vision.py        the rope and the clip's posts from pixels; rope through the gap or not
    scorer.py        `rope_inserted`: the last frame through the clip (1) or near it (< 0.5)
    truth.py         a policy rolled on the table beside the world model (`--ground-truth rope`)
    demonstrator.py  the pixel-reading router
    task.py          Rope: the Task interface, each method importing what it needs when called

Submodules are imported explicitly (no re-exports) so that importing this package stays free of
pymunk.
"""
