"""Moved to sim_model.data.formats.lerobot_reader; kept for experiments/ until it moves."""

from sim_model.data.formats.lerobot_reader import LeRobotReader, is_lerobot_root, video_backend

__all__ = ["LeRobotReader", "is_lerobot_root", "video_backend"]
