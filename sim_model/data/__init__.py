"""Episode data: the in-memory episode and the Zarr episode store every part reads and writes."""
