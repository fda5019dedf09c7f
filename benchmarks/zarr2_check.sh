#!/usr/bin/env bash
# Show that zarr 2.x (what Diffusion Policy pins) opens an EpisodeStore written by iws, and
# reads it the way DP's ReplayBuffer.copy_from_path does (copy_store into memory).
#
#   bash benchmarks/zarr2_check.sh          # run from the repository root
#
# Makes a throwaway venv under /tmp with zarr 2.18 (from the package registry) on first run.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${TMPDIR:-/tmp}/iws_zarr2_check"
VENV="${TMPDIR:-/tmp}/iws_zarr2_venv"
IWS_PY="${IWS_PYTHON:-$REPO/.venv/bin/python}"
mkdir -p "$WORK"

echo "== 1. write a store with iws (zarr $("$IWS_PY" -c 'import zarr; print(zarr.__version__)'))"
(cd "$REPO" && "$IWS_PY" - "$WORK" <<'EOF'
import sys
from pathlib import Path

import numpy as np

from pipeline.pusht.features import pusht_features
from schemas import EpisodeMeta
from sim_model.data.episode import Episode
from sim_model.data.store import EpisodeStore

work = Path(sys.argv[1])
features = pusht_features(96)
store = EpisodeStore.create(work / "store.zarr", features, overwrite=True)
rng = np.random.default_rng(0)
for i, t in enumerate((13, 8, 21)):
    frames = rng.integers(0, 255, (t, 96, 96, 3), dtype=np.uint8)
    low = rng.uniform(0, 512, (t, 7)).astype(np.float32)
    store.append(Episode(frames={"top": frames}, action=low[:, :2], state=low[:, 2:4],
                         meta=EpisodeMeta(episode_id=f"ep{i}", length=t, task="push T"),
                         extras={"block_pose": low[:, 4:7], "coverage": low[:, 0] / 512,
                                 "success": low[:, 1] > 400}))
arrays, ends = store.load_all()
np.savez(work / "expected.npz", episode_ends=ends, **arrays)
print(f"wrote {store}")
EOF
)

echo "== 2. throwaway venv with zarr 2.x at $VENV"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "zarr==2.18.*"
fi

echo "== 3. open it with zarr 2.x"
"$VENV/bin/python" - "$WORK" <<'EOF'
import json
import sys
from pathlib import Path

import numcodecs
import numpy as np
import zarr

work = Path(sys.argv[1])
print(f"zarr {zarr.__version__}, numcodecs {numcodecs.__version__}")
root = zarr.open(str(work / "store.zarr"), mode="r")
print(root.tree())
expected = np.load(work / "expected.npz")
ends = root["meta/episode_ends"][:]
assert ends.dtype == np.int64 and ends.tolist() == expected["episode_ends"].tolist(), ends
for key, array in root["data"].arrays():
    assert array.shape[0] == ends[-1], (key, array.shape)
    assert np.array_equal(array[:], expected[key]), key
    print(f"data/{key:<11} {array.dtype!s:<8} {array.shape!s:<18} chunks={array.chunks} "
          f"compressor={array.compressor.codec_id if array.compressor else None}: identical")
metas = [json.loads(m) for m in root["meta/episode_meta"][:]]
assert [m["episode_id"] for m in metas] == ["ep0", "ep1", "ep2"]
features = root.attrs["iws_store"]["features"]
print(f"meta/episode_ends {ends.tolist()}; meta/episode_meta ids {[m['episode_id'] for m in metas]}; "
      f"features cameras {[c['name'] for c in features['cameras']]}")

# Diffusion Policy's ReplayBuffer.copy_from_path: copy meta and data into a MemoryStore.
mem = zarr.MemoryStore()
zarr.copy_store(source=root.store, dest=mem, source_path="/meta", dest_path="/meta")
zarr.copy_store(source=root.store, dest=mem, source_path="/data", dest_path="/data")
buffer = zarr.group(store=mem)
assert np.array_equal(buffer["data"]["top"][5:9], expected["top"][5:9])
assert buffer["meta"]["episode_ends"][:].tolist() == ends.tolist()
print("ReplayBuffer-style copy_store into MemoryStore: OK")
print("ZARR2 CHECK PASSED")
EOF
