"""Moved to sim_model.data.formats.lerobot_writer; kept for experiments/ until it moves."""

from sim_model.data.formats.lerobot_writer import export_lerobot

__all__ = ["export_lerobot"]
