#!/usr/bin/env bash
# Show that zarr 2.x (what Diffusion Policy pins) opens what `iws export zarr-dp` writes, and
# reads it the way DP's PushT image dataset does: ReplayBuffer.copy_from_path(path,
# keys=['img', 'state', 'action']) = zarr.open + copy_store of meta and of each key into a
# MemoryStore, then the ReplayBuffer constructor's checks and slicing by episode_ends.
#
#   bash benchmarks/zarr2_dp_check.sh       # run from anywhere
#
# Same approach and throwaway venv (zarr 2.18 from the package registry) as zarr2_check.sh.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${TMPDIR:-/tmp}/iws_zarr2_dp_check"
VENV="${TMPDIR:-/tmp}/iws_zarr2_venv"
IWS_PY="${IWS_PYTHON:-$REPO/.venv/bin/python}"
rm -rf "$WORK" && mkdir -p "$WORK"

echo "== 1. collect-like store with iws, exported with iws export zarr-dp defaults (no --keys)"
(cd "$REPO" && "$IWS_PY" - "$WORK" <<'EOF'
import sys
from pathlib import Path

import numpy as np

from sim_model.data.formats.zarr_dp_writer import export_zarr_dp
from pipeline.pusht.features import pusht_features
from schemas import EpisodeMeta
from sim_model.data.episode import Episode
from sim_model.data.store import EpisodeStore

work = Path(sys.argv[1])
features = pusht_features(96)
store = EpisodeStore.create(work / "store.zarr", features)
rng = np.random.default_rng(0)
for i, t in enumerate((13, 8, 21)):
    low = rng.uniform(0, 512, (t, 7)).astype(np.float32)
    store.append(Episode(frames={"top": rng.integers(0, 255, (t, 96, 96, 3), dtype=np.uint8)},
                         action=low[:, :2], state=low[:, 2:4],
                         meta=EpisodeMeta(episode_id=f"ep{i}", length=t, task="push T"),
                         extras={"block_pose": low[:, 4:7], "coverage": low[:, 0] / 512,
                                 "success": low[:, 1] > 400}))
export_zarr_dp(store, work / "pusht_dp.zarr")  # defaults: DP's PushT names (img, state, action)
arrays, ends = store.load_all()
np.savez(work / "expected.npz", episode_ends=ends, img=arrays["top"], state=arrays["state"],
         action=arrays["action"])
print(f"exported {store} -> {work / 'pusht_dp.zarr'}")
EOF
)

echo "== 2. throwaway venv with zarr 2.x at $VENV"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "zarr==2.18.*"
fi

echo "== 3. read it as Diffusion Policy does, with zarr 2.x"
"$VENV/bin/python" - "$WORK" <<'EOF'
import sys
from pathlib import Path

import numcodecs
import numpy as np
import zarr

work = Path(sys.argv[1])
print(f"zarr {zarr.__version__}, numcodecs {numcodecs.__version__}")
expected = np.load(work / "expected.npz")
group = zarr.open(str(work / "pusht_dp.zarr"), "r")
print(group.tree())
for key, array in group["data"].arrays():
    print(f"data/{key:<11} {array.dtype!s:<8} {array.shape!s:<18} chunks={array.chunks} "
          f"compressor={array.compressor}")
assert group["data/img"].chunks == (1, 96, 96, 3), "images must be chunked per frame"

# ReplayBuffer.copy_from_path(path, keys=[...]): meta and the chosen keys into memory.
store = zarr.MemoryStore()
root = zarr.group(store=store)
zarr.copy_store(source=group.store, dest=store, source_path="/meta", dest_path="/meta")
root.create_group("data", overwrite=True)
for key in ("img", "state", "action"):
    zarr.copy_store(source=group.store, dest=store, source_path=f"/data/{key}",
                    dest_path=f"/data/{key}")
# ReplayBuffer.__init__'s checks
assert "data" in root and "meta" in root and "episode_ends" in root["meta"]
ends = root["meta"]["episode_ends"][:]
for key, value in root["data"].items():
    assert value[: ends[-1]].shape[0] == ends[-1], key
assert ends.dtype == np.int64 and ends.tolist() == expected["episode_ends"].tolist()
for key in ("img", "state", "action"):
    assert np.array_equal(root["data"][key][:], expected[key]), key
# an episode slice, as SequenceSampler takes it
start, stop = ends[0], ends[1]
assert np.array_equal(root["data"]["img"][start:stop], expected["img"][start:stop])
print(f"ReplayBuffer-style load of img/state/action, episode_ends {ends.tolist()}: identical")
print("ZARR2 DP CHECK PASSED")
EOF
