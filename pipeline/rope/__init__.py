"""Rope routing, the paper's deformable regime (issue 30): a rope of linked segments held at one
end by an end effector (2-D actions), a clip of two posts on the table, one camera from above.
A pymunk table of its own stands in for the real robot.

Work in progress: the simulator, its camera, scripted play and the pixel scorer are here; the
ground truth, the demonstrator, a bundled model and the registry entry (which makes it
`iws collect rope`) come next.

    env.py           RopeSim: the rope, the clip, the effector's PD drive; `inserted` (through the gap)
    render.py        the `top` camera
    primitives.py    scripted play (route, swing, graze, roam)
    features.py      rope_features(resolution): camera top, 2-D action and state, the rope's points
    collect.py       writes it into an EpisodeStore
    vision.py        the rope and the clip's posts from pixels; rope through the gap or not
    scorer.py        `rope_inserted`: the last frame through the clip (1) or near it (< 0.5)

Submodules are imported explicitly (no re-exports) so that importing this package stays free of
pymunk.
"""
