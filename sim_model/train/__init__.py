"""Training: autoencoder -> dynamics -> decoder-finetune over one run directory (see run.py)."""

from sim_model.train.run import train_stage

__all__ = ["train_stage"]
