"""Ray-facing adapters: model replicas, action sources, episode writers."""
