"""Check the installed environment for what `pip check` cannot see: exactly one OpenCV owns
cv2/ (opencv-python and opencv-python-headless both write it; see requirements/opencv-python), and
the cv2 that imports satisfies every installed requirement on either OpenCV (lerobot's <4.13).

Run by scripts/setup.sh after installing and by tests/test_environment.py; exits 1 naming the
problem and the fix."""

from __future__ import annotations

import importlib.metadata as md
import sys

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

OPENCV = {"opencv-python", "opencv-python-headless", "opencv-contrib-python",
          "opencv-contrib-python-headless"}
WANTED = "opencv-python-headless"
FIX = ("Fix: ./scripts/setup.sh (it installs requirements/opencv-python in place of the real "
       "opencv-python), or by hand: pip uninstall -y opencv-python && pip install --force-reinstall "
       "--no-deps -c requirements/constraints.txt opencv-python-headless")


def cv2_owners() -> list[str]:
    """Names of the installed distributions that put files into cv2/."""
    owners = {canonicalize_name(d.metadata["Name"]) for d in md.distributions()
              if any(str(f).startswith("cv2/") for f in d.files or [])}
    return sorted(owners)


def opencv_requirements() -> list[tuple[str, Requirement]]:
    """(dependent, requirement) for every installed requirement on an OpenCV distribution."""
    found = []
    for dist in md.distributions():
        for text in dist.requires or []:
            req = Requirement(text)
            if canonicalize_name(req.name) in OPENCV and (req.marker is None or req.marker.evaluate()):
                found.append((dist.metadata["Name"], req))
    return found


def problems() -> list[str]:
    owners = cv2_owners()
    if owners != [WANTED]:
        return [f"cv2/ is installed by {owners or 'nothing'}; it must be {WANTED} alone. {FIX}"]
    try:
        import cv2
    except ImportError as error:
        return [f"cv2 does not import ({error}); a removed OpenCV took shared files with it. {FIX}"]
    version = Version(cv2.__version__)
    return [f"cv2 {version} does not satisfy {who}'s {req}. {FIX}"
            for who, req in opencv_requirements()
            if canonicalize_name(req.name) == WANTED and version not in req.specifier]


def main() -> int:
    found = problems()
    for problem in found:
        print(f"check_env: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
