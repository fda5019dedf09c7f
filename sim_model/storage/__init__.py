"""Storage: every file and directory iws reads or writes, at a local path or an s3:// URI.

    uri.py         local path or s3:// URI: the one scheme list, joins, bucket names, and
                   whether one location lies inside another (`is_inside`, `overlap`)
    atomic.py      local whole-file and whole-directory writes (temp, fsync, rename, fsync dir)
    paths.py       read, write, list (names, files, sizes), remove; conditional create and compare-and-swap
                   (`write_new`, `replace_if`, `remove_if`), local and s3:// behind one API
    publish.py     directories that appear whole: `staging_dir` -> `publish_dir`
    s3.py          the boto3 client (retries, clear errors) and cached downloads (`fetch`)
    s3_objects.py  the s3:// half of paths.py and publish.py (conditional PUTs, ordered uploads)
    s3_zarr.py     zarr's FsspecStore over s3fs for the episode store, checked before use

It sits at the bottom of sim_model (it imports nothing of iws but schemas) so that checkpoints,
the episode store, the dataset formats and the workers' writer and lease all share it.
`from sim_model import storage` gives the functions below; `storage.atomic` the local helpers.
"""

from sim_model.storage import atomic
from sim_model.storage.paths import (
    children_with,
    create_versioned,
    ensure_writable_dir,
    exists,
    fetch,
    file_sizes,
    glob,
    is_file,
    list_files,
    list_names,
    read_many,
    read_text,
    read_versioned,
    remove_file,
    remove_if,
    remove_tree,
    replace_if,
    try_read_bytes,
    try_read_text,
    write_atomic,
    write_new,
)
from sim_model.storage.publish import (
    STAGING_ROOT,
    build_and_publish,
    discard_staged,
    publish_dir,
    remove_stale_staging,
    staging_dir,
)
from sim_model.storage.uri import (
    SCHEMES,
    bucket_of,
    check_scheme,
    is_inside,
    is_remote,
    is_s3,
    is_url,
    join,
    local_path,
    on_s3,
    overlap,
    resolved,
)

__all__ = [
    "SCHEMES", "STAGING_ROOT", "atomic", "bucket_of", "build_and_publish", "check_scheme",
    "children_with", "create_versioned", "discard_staged", "ensure_writable_dir", "exists",
    "fetch", "file_sizes", "glob", "is_file", "is_inside", "is_remote", "is_s3", "is_url", "join", "list_files", "list_names", "local_path",
    "on_s3", "overlap", "publish_dir", "read_many", "read_text", "read_versioned", "remove_file", "remove_if",
    "remove_stale_staging", "remove_tree", "replace_if", "resolved", "staging_dir", "try_read_bytes", "try_read_text",
    "write_atomic", "write_new",
]
