"""Jobs: spec -> episodes -> datasets; CLI; evaluation; tasks.

    cli.py, commands/   `iws` and its subcommands (parse, call, print)
    generate/           generation jobs: spec -> preflight -> Ray replicas -> datasets
    export/, imports/   re-exports for experiments/ only: formats live in sim_model.data.formats
    evaluation/         `iws eval`: fidelity, stability and policy reports
    teleop/             the live browser session
    tasks/              the task registry (TASKS) and the Task interface; the CLI's task choices,
                        job specs' scorer names and ground truths come from it
    pusht/              PushT (gym-pusht), the first task, in its own folder
"""
