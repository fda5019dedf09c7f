"""Mug grasping (issue 30's second regime, in progress): a parallel-jaw gripper, a mug with a
handle under gravity and friction, three cameras (front, side, wrist), in MuJoCo.

    env.py         the simulator (MugSim), its state, cameras and the held test
    primitives.py  scripted play covering grasped / slipped / tipped / nudged
    features.py    what a recording holds (three cameras, 4-D action and state, mug pose, held)
    collect.py     scripted play into an EpisodeStore, byte-identical for any workers, resumable
    vision.py      the mug's mask and its centre triangulated from the two fixed views
    scorer.py      `mug_held` from pixels (benchmarks/results/scorer_mug.md: r 0.991 over 630 frames)
                   and the cross-view plausibility check
    demonstrator.py  MugDemonstrator: grasps from pixels, closed loop (a `--policy` source)

Not yet a registered task (so not yet `iws collect mug`): its ground truth,
task entry, example job and bundled model come next.
"""
