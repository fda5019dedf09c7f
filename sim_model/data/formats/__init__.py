"""Dataset formats: the floor every reader and writer of episodes stands on.

    detect.py            which dataset lives at a path or s3:// URI (`dataset_kind`, `detect_format`)
    dataset.py           `open_dataset` (any format, read in place) and `import_dataset` (into
                         an EpisodeStore); why each route, see there; `check_apart`: no
                         import or export writes into or over its own source
    source.py            EpisodeSource: the EpisodeStore's read API that every reader offers
    lerobot_features.py  iws features <-> LeRobot feature names, both ways
    lerobot_reader.py    LeRobotReader: a LeRobot v3.0 dataset, frames decoded as lerobot does;
                         `read_actions`: its action column only (replayed streams)
    zarr_dp_reader.py    DPZarrReader: a Diffusion-Policy replay buffer
    lerobot_writer.py    `export_lerobot`, through lerobot's own API ...
    lerobot_repair.py    ... then checked and corrected where lerobot 0.4.4 is wrong (stats.py)
    zarr_dp_writer.py    `export_zarr_dp`: the layout Diffusion Policy's ReplayBuffer opens
    lerobot_v21.py       `export_lerobot_v21`: LeRobot v2.1 (openpi, GR00T)
    lerobot_convert.py   a v2.1 dataset read through lerobot's own v2.1 -> v3.0 converter
    groot.py             GR00T's meta/modality.json; openpi's norm_stats.json

It sits under the workers (which read initial frames and replayed actions through it) and the
pipeline (`iws import`, `iws export`, consolidation); it imports only schemas, sim_model.storage
and the EpisodeStore beside it.
"""

from sim_model.data.formats.dataset import check_apart, import_dataset, open_dataset
from sim_model.data.formats.detect import dataset_kind, detect_format
from sim_model.data.formats.source import EpisodeSource, ReaderBase

__all__ = ["EpisodeSource", "ReaderBase", "check_apart", "dataset_kind", "detect_format",
           "import_dataset", "open_dataset"]
