"""The installed environment and its lock (requirements/constraints.txt): one OpenCV that
lerobot accepts, no broken requirement, and a lock that agrees with pyproject.toml, with what is
installed and with the container image."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "constraints.txt"
DOCKERFILE = ROOT / "infra" / "docker" / "Dockerfile"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SETUP = "run ./scripts/setup.sh (or make test) to bring .venv to the lock"


def _lock() -> dict[str, Version]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"{LOCK.name}: '{line}' is not a name==version pin"
            pins[canonicalize_name(name)] = Version(version)
    return pins


def _check_env():  # the module scripts/check_env.py, which scripts/setup.sh runs
    spec = importlib.util.spec_from_file_location("check_env", ROOT / "scripts" / "check_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_opencv_owns_cv2_and_lerobot_accepts_it() -> None:
    check = _check_env()
    assert check.cv2_owners() == ["opencv-python-headless"], f"{check.problems()}"
    assert check.problems() == []
    import cv2

    lerobot = [r for who, r in check.opencv_requirements() if who == "lerobot"]
    assert lerobot and all(Version(cv2.__version__) in r.specifier for r in lerobot)


def test_the_check_names_a_second_opencv(monkeypatch: pytest.MonkeyPatch) -> None:
    check = _check_env()
    monkeypatch.setattr(check, "cv2_owners", lambda: ["opencv-python", "opencv-python-headless"])
    (problem,) = check.problems()
    assert "['opencv-python', 'opencv-python-headless']" in problem and "setup.sh" in problem


def test_pip_check_finds_no_broken_requirement() -> None:
    result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_lock_pins_every_declared_dependency_inside_its_range() -> None:
    pins = _lock()
    extras = [r for group in PROJECT["optional-dependencies"].values() for r in group]
    declared = [Requirement(r) for r in PROJECT["dependencies"] + extras]
    for req in declared:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is declared but not locked; refresh the lock (make lock)"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"the lock's {req.name}=={pins[name]} is outside pyproject's {req}"
    assert "iws" not in pins and "opencv-python" not in pins  # see requirements/opencv-python


def test_the_installed_versions_are_the_locked_ones() -> None:
    wrong = []
    for name, version in _lock().items():
        try:
            installed = Version(md.version(name))
        except md.PackageNotFoundError:
            wrong.append(f"{name} (not installed)")
            continue
        if installed not in SpecifierSet(f"=={version}"):  # a local build tag (+cu128) is fine
            wrong.append(f"{name} {installed} (lock: {version})")
    assert not wrong, f"installed packages differ from {LOCK.name}: {wrong}; {SETUP}"


def test_the_image_installs_with_the_lock() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^COPY requirements ", text, re.MULTILINE)
    install = re.search(r"pip install -c requirements/constraints\.txt ./requirements/opencv-python "
                        r"'\.\[([a-z,]+)\]'", text)
    assert install, "the Dockerfile must install iws with the lock and the OpenCV stand-in"
    from pipeline.tasks.registry import TASKS

    task_extras = set(PROJECT["optional-dependencies"]) & set(TASKS)
    assert task_extras <= set(install.group(1).split(",")), \
        f"the image must install every task's extra ({sorted(task_extras)}), not {install.group(1)}"
    pins = _lock()
    args = dict(re.findall(r"^ARG (\w+_VERSION)=(\S+)$", text, re.MULTILINE))
    for arg, package in {"TORCH_VERSION": "torch", "TORCHVISION_VERSION": "torchvision",
                         "RAY_VERSION": "ray", "LEROBOT_VERSION": "lerobot", "ZARR_VERSION": "zarr"}.items():
        assert Version(args[arg]) == pins[package], f"Dockerfile {arg}={args[arg]}, lock {pins[package]}"
