"""Turn an iws dataset into the formats imitation-learning trainers read: LeRobot v3.0
(`lerobot.export_lerobot`) and Diffusion Policy's Zarr replay buffer (`zarr_dp.export_zarr_dp`)."""
