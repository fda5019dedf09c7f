"""Ray-facing adapters: model replicas, action sources, episode writers.

Files and s3:// objects go through sim_model.storage, datasets through sim_model.data.formats.
"""
