"""Jobs: spec -> episodes -> datasets; CLI; evaluation; teleop; training on Ray; tasks.

Top first; a part imports only the parts below it (tests/test_import_graph.py):

    cli.py, commands/   `iws` and its subcommands (parse, call, print); `iws export` and
                        `iws import` call sim_model.data.formats directly
    generate/           generation jobs: spec -> preflight -> Ray replicas -> datasets;
                        verify.py checks an output against its records (`iws verify`)
    evaluation/         `iws eval`: fidelity, stability and policy reports
    teleop/             the live browser session
    train/              training on Ray: `iws train --workers N` on Ray Train's data-parallel
                        workers (cluster.py), `iws submit train`, a stage as a Ray job (submit.py)
    tasks/registry.py   TASKS: the tasks by name; the CLI's task choices, job specs' scorer names
                        and ground truths come from it
    pusht/, sweep/      the tasks, one folder each: PushT (gym-pusht) and bimanual pile sweeping
    rope/               rope routing (deformable): a pymunk rope and clip, and its bundled model
    mug/                mug grasping in MuJoCo (gripper, three cameras), no bundled model yet
    tasks/base.py,      the Task interface and what every task's collection and ground truth
      tasks/collecting.py, share
      tasks/truth.py,
      tasks/extras.py   (a task's simulator as an optional extra of iws)
    ray_connect.py      joining or starting Ray, for generation and training alike
    ray_reaper.py       ends an embedded Ray's agents at once when its driver is killed
    ray_jobs.py         Ray's Jobs API: what `iws submit` sends, follows and stops
"""
