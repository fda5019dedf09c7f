"""Ray-facing adapters: model replicas, action sources, episode writers.

    replica.py       WorldModelReplica: one checkpoint loaded once, groups rolled in lockstep
    actions/         action sources: scripted, replayed, closed-loop policies
    closed_loop.py   the one closed-loop rollout: a policy acts on each generated frame
    init_frames.py   initial frames of generated episodes: references, checks, loading
    scoring.py       the success-filter hook: Scorer, TaskScore, keep / drop / label
    writer.py        the record each episode is committed with (a group at a time, by parts.py)
    parts.py         the commit unit: each group's part of the datasets and its record
    lease.py         one run at a time owns a job's output (OUT/lease.json)

Files and s3:// objects go through sim_model.storage, datasets through sim_model.data.formats.
"""
