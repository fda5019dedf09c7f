"""Mug grasping (issue 30's second regime, in progress): a parallel-jaw gripper, a mug with a
handle under gravity and friction, three cameras (front, side, wrist), in MuJoCo.

    env.py         the simulator (MugSim), its state, cameras and the held test
    primitives.py  scripted play covering grasped / slipped / tipped / nudged

Not yet a registered task: its collection, scorer, demonstrator and bundled model come next.
"""
