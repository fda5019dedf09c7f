"""Episode data: the in-memory episode and the Zarr episode store every part reads and writes.

    episode.py         Episode: one episode's arrays and metadata in memory
    store.py           EpisodeStore (layout: store_layout.py, damage reports: store_damage.py)
    reader.py          the read side shared by the store and the readers of foreign formats
    formats/           the data floor: detect a dataset, open it (LeRobot v3.0, Diffusion-Policy
                       Zarr) with the store's read API, import it, export to either format
"""
