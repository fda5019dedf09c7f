"""Mug grasping (issue 30's second regime): a parallel-jaw gripper, a mug with a
handle under gravity and friction, three cameras (front, side, wrist), in MuJoCo.

    env.py         the simulator (MugSim), its state, cameras and the held test
    primitives.py  scripted play covering grasped / slipped / tipped / nudged
    features.py    what a recording holds (three cameras, 4-D action and state, mug pose, held)
    collect.py     scripted play into an EpisodeStore, byte-identical for any workers, resumable
    vision.py      the mug's mask and its centre triangulated from the two fixed views
    scorer.py      `mug_held` from pixels (benchmarks/results/scorer_mug.md: r 0.991 over 630 frames)
                   and the cross-view plausibility check
    demonstrator.py  MugDemonstrator: grasps from pixels, closed loop (a `--policy` source)
    truth.py       `--ground-truth mug`: a policy closed loop on the MuJoCo table
    task.py        the registry's entry (`iws collect mug`)

No bundled model yet, so no example job either.
"""
