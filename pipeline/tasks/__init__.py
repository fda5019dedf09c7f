"""Robot tasks: what the pipeline asks of one (the interface) and which ones it knows (the registry).

    base.py        the Task interface and SideScore; imports nothing else of pipeline
    collecting.py  what every task's `iws collect TASK` shares (--mix, the checks, the output
                   store, the episode pool, the run)
    truth.py       what every task's ground truth shares (the recorded starts, the batches)
    plausibility.py what every task's plausibility check shares (the probed frames, conservation)
    registry.py    TASKS, each task by name (pipeline/pusht/, pipeline/sweep/), and lookups

The task folders import base.py, collecting.py, truth.py and plausibility.py; registry.py imports the task folders. This
file imports nothing, so that reaching base.py from a task folder never runs the registry
(tests/test_import_graph.py holds that order).
"""
