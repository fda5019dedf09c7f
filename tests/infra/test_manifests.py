"""Static checks of infra/: no Docker engine or Kubernetes here, so the image definition and the
cluster manifests are validated by reading them. Every YAML parses; every `iws ...` command in
them is one the CLI accepts; image tags, Ray and package versions agree with each other and with
pyproject.toml; credentials only ever come from Secrets; the RayJob's own job spec is valid and
fits the cluster it asks for."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from schemas import JobSpec
from schemas.errors import validate
from tests.infra import manifest_tools as mt

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
DOCKERFILE = INFRA / "docker" / "Dockerfile"
DOCKERIGNORE = INFRA / "docker" / "Dockerfile.dockerignore"
GUIDE = ROOT / "docs" / "cluster.md"
YAML_FILES = sorted([*INFRA.rglob("*.yaml"), *INFRA.rglob("*.yml")])
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
PINS = {Requirement(d).name: Requirement(d).specifier for d in PYPROJECT["dependencies"]}
ARGS = mt.dockerfile_args(DOCKERFILE.read_text())
# Dockerfile ARG -> the pyproject requirement it must satisfy.
PINNED_ARGS = {"TORCH_VERSION": "torch", "TORCHVISION_VERSION": "torchvision",
               "RAY_VERSION": "ray", "LEROBOT_VERSION": "lerobot", "ZARR_VERSION": "zarr"}


def _docs() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in YAML_FILES:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                yield path, doc


def _ray_clusters() -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, RayCluster spec) for every RayCluster and every RayJob's rayClusterSpec."""
    for path, doc in _docs():
        name = f"{path.relative_to(ROOT)}:{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        if doc.get("kind") == "RayCluster":
            yield name, doc["spec"]
        elif doc.get("kind") == "RayJob":
            yield name, doc["spec"]["rayClusterSpec"]


def test_infra_files_exist() -> None:
    for path in (DOCKERFILE, DOCKERIGNORE, GUIDE, INFRA / "kuberay" / "rayjob.yaml",
                 INFRA / "kuberay" / "raycluster.yaml", INFRA / "aws" / "cluster.yaml"):
        assert path.is_file(), f"{path.relative_to(ROOT)} is missing"


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(INFRA)))
def test_yaml_parses(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs, f"{path} holds no YAML documents"
    assert all(isinstance(d, dict) for d in docs), f"{path}: every document must be a mapping"


def test_iws_commands_are_valid_cli_invocations() -> None:
    commands = [(path, command) for path, doc in _docs() for command in mt.iws_commands(doc)]
    assert commands, "no manifest under infra/ runs iws (the RayJob entrypoint should)"
    for path, command in commands:
        problem = mt.check_iws_command(command)
        assert problem is None, f"{path.relative_to(ROOT)}: {problem}"


def test_command_checker_explains_what_is_wrong() -> None:
    assert mt.check_iws_command("iws generate /config/job.yaml --no-progress") is None
    unknown = mt.check_iws_command("iws frobnicate job.yaml")
    assert unknown is not None and "'frobnicate' is not an iws command" in unknown
    bad_option = mt.check_iws_command("iws generate job.yaml --no-such-flag")
    assert bad_option is not None and "--no-such-flag" in bad_option
    missing_arg = mt.check_iws_command("iws generate")
    assert missing_arg is not None and "job" in missing_arg
    assert "not valid shell syntax" in (mt.check_iws_command("iws generate 'job.yaml") or "")
    # Commands are found wherever a manifest runs them: strings, chains, exec lists.
    doc = {"a": "ulimit -n 1; /opt/venv/bin/iws generate x.yaml && echo done",
           "b": ["iws", "export", "out"], "c": "ray start --head"}
    assert mt.iws_commands(doc) == ["/opt/venv/bin/iws generate x.yaml", "iws export out"]


def test_image_tags_agree_everywhere() -> None:
    refs = {f"{p.relative_to(ROOT)}": mt.images(doc) for p, doc in _docs()}
    refs["Dockerfile LABEL"] = [mt.dockerfile_label(DOCKERFILE.read_text(), "org.opencontainers.image.ref.name")]
    refs["docs/cluster.md"] = sorted(set(re.findall(r"ghcr\.io/[\w./-]+:[\w.-]+", GUIDE.read_text())))
    found = {ref for values in refs.values() for ref in values}
    assert len(found) == 1, f"image references disagree: {refs}"
    (image,) = found
    tag = image.rsplit(":", 1)[1]
    assert tag.startswith(PYPROJECT["version"] + "-"), f"tag {tag} does not start with the package version"
    assert tag.endswith(ARGS["TORCH_CUDA"]), f"tag {tag} does not name the torch build {ARGS['TORCH_CUDA']}"


@pytest.mark.parametrize("arg", sorted(PINNED_ARGS))
def test_dockerfile_pins_agree_with_pyproject(arg: str) -> None:
    requirement = PINNED_ARGS[arg]
    version = ARGS[arg]
    assert version in PINS[requirement], (f"Dockerfile {arg}={version} is outside pyproject's "
                                          f"{requirement}{PINS[requirement]}")
    assert "==${" + arg + "}" in DOCKERFILE.read_text(), f"{arg} is declared but never installed"


def test_dockerfile_python_and_cuda_agree() -> None:
    python = ARGS["PYTHON_VERSION"]
    assert Version(python) in Requirement(f"python{PYPROJECT['requires-python']}").specifier
    cuda = re.search(r":(\d+)\.(\d+)\.\d+-", ARGS["CUDA_IMAGE"])
    assert cuda, f"CUDA_IMAGE {ARGS['CUDA_IMAGE']} has no x.y.z version tag"
    assert ARGS["TORCH_CUDA"] == f"cu{cuda[1]}{cuda[2]}", "CUDA base image and torch build differ"
    assert "ffmpeg" in DOCKERFILE.read_text()


def test_dockerfile_copies_what_exists_and_dockerignore_keeps_it() -> None:
    sources = mt.dockerfile_copy_sources(DOCKERFILE.read_text())
    assert sources, "the Dockerfile copies nothing from the repository"
    included = mt.dockerignore_reincluded(DOCKERIGNORE.read_text())
    assert mt.dockerignore_rules(DOCKERIGNORE.read_text())[0] == "*", "start from an empty context"
    for source in sources:
        assert (ROOT / source).exists(), f"Dockerfile copies {source}, which does not exist"
        assert source.rstrip("/") in included, f"{source} is excluded by {DOCKERIGNORE.name}"
    assert ".venv" not in included and ".git" not in included


def test_kuberay_ray_version_matches_the_pin() -> None:
    clusters = list(_ray_clusters())
    assert len(clusters) >= 2, "expected a RayCluster and a RayJob"
    for where, spec in clusters:
        assert spec["rayVersion"] == ARGS["RAY_VERSION"], f"{where}: rayVersion {spec['rayVersion']}"
        assert spec["rayVersion"] in PINS["ray"]


def test_kuberay_clusters_have_a_cpu_head_and_gpu_workers() -> None:
    for where, spec in _ray_clusters():
        head = spec["headGroupSpec"]["template"]["spec"]["containers"]
        assert all(mt.gpus(c) == 0 for c in head), f"{where}: the head should be CPU-only"
        gpu_groups = [g for g in spec["workerGroupSpecs"]
                      if any(mt.gpus(c) > 0 for c in g["template"]["spec"]["containers"])]
        assert gpu_groups, f"{where}: no worker group requests nvidia.com/gpu"
        for group in gpu_groups:
            assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"], where


def test_credentials_only_come_from_secrets() -> None:
    for path, doc in _docs():
        for entry in mt.env_entries(doc):
            if entry.get("name") in mt.CREDENTIAL_VARS:
                where = path.relative_to(ROOT)
                assert "value" not in entry, f"{where}: {entry['name']} is inline; use a Secret"
                assert "secretKeyRef" in entry.get("valueFrom", {}), f"{where}: {entry['name']}"
    for where, spec in _ray_clusters():
        groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
        for container in (c for g in groups for c in g["template"]["spec"]["containers"]):
            assert mt.reads_secret(container), f"{where}: container {container['name']} gets no credentials"
    for path in [*YAML_FILES, DOCKERFILE, GUIDE]:
        leaks = mt.credential_leaks(path.read_text())
        assert not leaks, f"{path.relative_to(ROOT)} looks like it holds credentials: {leaks}"


def test_kuberay_clusters_require_rays_token_auth() -> None:
    """The Jobs API runs code with the nodes' S3 credentials: no cluster may take jobs unasked.
    authOptions makes KubeRay (>= 1.5.1) create the token Secret and hand it to every Ray
    container and to the RayJob submitter; RAY_AUTH_MODE=token set by hand makes an operator
    that drops authOptions fail closed (Ray refuses to start without a token)."""
    for where, spec in _ray_clusters():
        assert spec.get("authOptions", {}).get("mode") == "token", f"{where}: no authOptions.mode: token"
        groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
        for container in (c for g in groups for c in g["template"]["spec"]["containers"]):
            assert mt.env_value(container, "RAY_AUTH_MODE") == "token", \
                f"{where}: container {container['name']} does not fail closed (RAY_AUTH_MODE)"


def test_aws_launcher_cluster_requires_rays_token_auth() -> None:
    config = yaml.safe_load((INFRA / "aws" / "cluster.yaml").read_text())
    env = mt.docker_env(config["docker"]["run_options"])
    assert env.get("RAY_AUTH_MODE") == "token", "containers must run with RAY_AUTH_MODE=token"
    token_dir = str(Path(env["RAY_AUTH_TOKEN_PATH"]).parent)
    assert token_dir in config["file_mounts"], "the token file must be synced to every node"
    assert config["file_mounts"][token_dir].startswith("~/"), "the token comes from the user's machine"
    for command in [*config["head_start_ray_commands"], *config["worker_start_ray_commands"]]:
        assert "RAY_AUTH_MODE=disabled" not in command
        assert "--dashboard-host=0.0.0.0" not in command, "the dashboard is reached through `ray dashboard`"


def test_rayjob_runs_a_valid_job_that_fits_its_cluster() -> None:
    path = INFRA / "kuberay" / "rayjob.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    job = next(d for d in docs if d["kind"] == "RayJob")
    argv = shlex.split(job["spec"]["entrypoint"])
    spec_path = Path(argv[2])
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for c in head["containers"] for m in c.get("volumeMounts", [])}
    volume = next(v for v in head["volumes"] if mounts.get(v["name"]) == str(spec_path.parent))
    config_map = next(d for d in docs if d["kind"] == "ConfigMap"
                      and d["metadata"]["name"] == volume["configMap"]["name"])
    text = config_map["data"][spec_path.name]
    spec = validate(JobSpec, yaml.safe_load(text), source=f"{path.name}:{spec_path.name}")
    workers = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    gpus = sum(g["minReplicas"] * sum(mt.gpus(c) for c in g["template"]["spec"]["containers"])
               for g in workers)
    cpus = sum(g["minReplicas"] * sum(mt.cpus(c) for c in g["template"]["spec"]["containers"])
               for g in workers)
    assert spec.replicas * spec.resources.num_gpus <= gpus, "replicas need more GPUs than the workers have"
    assert spec.replicas * spec.resources.num_cpus < cpus, "no CPUs left for writer tasks"
    for image_glob in spec.init.images or []:
        assert image_glob.startswith("/opt/iws/examples/"), "init images must ship in the image"
        local = ROOT / image_glob.removeprefix("/opt/iws/")
        assert list(local.parent.glob(local.name)), f"{image_glob} matches nothing in examples/"


def test_aws_launcher_config_is_valid_for_ray() -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((INFRA / "aws" / "cluster.yaml").read_text())
    with contextlib.redirect_stderr(io.StringIO()):
        validate_config(prepare_config(config))
    nodes = config["available_node_types"]
    assert nodes[config["head_node_type"]]["resources"] == {"CPU": 0}
    assert any(n["node_config"]["InstanceType"].startswith(("g", "p")) for n in nodes.values())
