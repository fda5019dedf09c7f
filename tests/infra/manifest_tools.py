"""Readers for the files under infra/ (Dockerfile, .dockerignore, Kubernetes and Ray YAML) used
by test_manifests.py. Small and literal on purpose: they read the subset of syntax we write."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from typing import Any

CREDENTIAL_VARS = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "RAY_AUTH_TOKEN"}
_SHELL_SEPARATORS = re.compile(r"&&|\|\||[;|\n]")
# `iws` followed by arguments: a bare "iws" is a name (a label value), not a command.
_IWS_START = re.compile(r"^\s*(\S*/)?iws\s+\S")
_LEAKS = (
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # an AWS access key id
    re.compile(r"(?i)aws_secret_access_key\s*[=:]\s*[\"']?[A-Za-z0-9/+]{30,}"),  # a secret value
    re.compile(r"(?i)ray_auth_token\s*[=:]\s*[\"']?[\w-]{16,}"),  # a Ray token written out
)


# -- Dockerfile / .dockerignore ------------------------------------------------------------------

def dockerfile_args(text: str) -> dict[str, str]:
    """ARG NAME=default lines -> {NAME: default}."""
    return dict(re.findall(r"^ARG\s+(\w+)=(\S+)\s*$", text, flags=re.MULTILINE))


def dockerfile_label(text: str, key: str) -> str:
    match = re.search(rf'{re.escape(key)}="([^"]+)"', text)
    if match is None:
        raise AssertionError(f"the Dockerfile has no LABEL {key}")
    return match[1]


def dockerfile_copy_sources(text: str) -> list[str]:
    """Sources of every COPY from the build context (COPY --from=... copies from a stage)."""
    sources: list[str] = []
    for line in re.findall(r"^COPY\s+(.+)$", text, flags=re.MULTILINE):
        parts = shlex.split(line)
        if any(p.startswith("--from") for p in parts):
            continue
        sources += [p for p in parts[:-1] if not p.startswith("--")]
    return sources


def dockerignore_rules(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def dockerignore_reincluded(text: str) -> set[str]:
    """Paths brought back with '!path' after a leading '*'."""
    return {rule[1:].rstrip("/") for rule in dockerignore_rules(text) if rule.startswith("!")}


# -- YAML trees ------------------------------------------------------------------------------

def walk(node: Any) -> Iterator[tuple[str | None, Any]]:
    """Every (key, value) pair in a YAML tree, depth first; list items have key None."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield None, item
            yield from walk(item)


def iws_commands(doc: Any) -> list[str]:
    """Every shell command in the document that runs iws: in a string (entrypoint, bash -c
    scripts, chained with ; or &&) or as an exec list (command: [iws, ...])."""
    found: list[str] = []
    for _, value in walk(doc):
        if isinstance(value, str):
            found += [s.strip() for s in _SHELL_SEPARATORS.split(value) if _IWS_START.match(s)]
        elif (isinstance(value, list) and value and isinstance(value[0], str)
              and re.fullmatch(r"(\S*/)?iws", value[0]) and all(isinstance(v, str) for v in value)):
            found.append(shlex.join(value))
    return found


def check_iws_command(command: str) -> str | None:
    """None when the iws CLI accepts `command`, else what is wrong with it."""
    from pipeline.cli import COMMANDS, build_parser

    try:
        argv = shlex.split(command)[1:]
    except ValueError as error:
        return f"`{command}` is not valid shell syntax: {error}"
    parser = build_parser()
    choices = next(a.choices for a in parser._actions if a.dest == "command")
    name = next((a for a in argv if not a.startswith("-")), "")
    if name not in choices:
        module = name if name in COMMANDS else f"{name}_"
        if module in COMMANDS:
            return (f"`{command}` uses `iws {name}`, which is planned but not built yet "
                    f"(pipeline/commands/{module}.py is missing); build it or change the manifest")
        return f"`{command}`: '{name}' is not an iws command; known: {sorted(choices)}"
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(argv)
        except SystemExit as exit_:
            if exit_.code:
                return f"`{command}` is rejected by the iws CLI: {errors.getvalue().strip()}"
    return None


def env_value(container: dict[str, Any], name: str) -> str | None:
    """The literal value of env var `name` in a Kubernetes container spec, if it has one."""
    return next((e.get("value") for e in container.get("env", []) if e.get("name") == name), None)


def docker_env(run_options: list[str]) -> dict[str, str]:
    """`--env NAME=VALUE` / `-e NAME=VALUE` entries of a launcher's docker run_options."""
    found = {}
    for option in run_options:
        words = option.split()
        for flag, value in zip(words, words[1:], strict=False):
            if flag in ("--env", "-e") and "=" in value:
                name, _, text = value.partition("=")
                found[name] = text
    return found


def images(doc: Any) -> list[str]:
    return [v for k, v in walk(doc) if k == "image" and isinstance(v, str)]


def env_entries(doc: Any) -> list[dict[str, Any]]:
    return [e for k, v in walk(doc) if k == "env" and isinstance(v, list)
            for e in v if isinstance(e, dict)]


def reads_secret(container: dict[str, Any]) -> bool:
    """Whether the container gets AWS credentials from a Secret (envFrom or env secretKeyRef)."""
    if any("secretRef" in e for e in container.get("envFrom", [])):
        return True
    return any(e.get("name") == "AWS_ACCESS_KEY_ID" and "secretKeyRef" in e.get("valueFrom", {})
               for e in container.get("env", []))


def _quantity(value: Any) -> float:
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def gpus(container: dict[str, Any]) -> float:
    return _quantity(container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))


def cpus(container: dict[str, Any]) -> float:
    return _quantity(container.get("resources", {}).get("requests", {}).get("cpu", 0))


def credential_leaks(text: str) -> list[str]:
    return [m[0] for pattern in _LEAKS for m in pattern.finditer(text)]
