"""Triton model repositories on disk: which paths are model folders, and the package each serves.

Layout rules (server docs model_repository.md; pytorch_backend README "AOT Inductor Support"):
`<repo>/<model>/config.pbtxt` and `<repo>/<model>/<version>/model.pt2`, versions being numeric
folder names; the version policy (model_config.proto ModelVersionPolicy, default `latest`
with num_versions 1) says which are served; the backend opens
`<model>/<version>/<default_model_filename or model.pt2>` as a file (pt2/model_state.cc
LoadModel: FileExists, then ReadTextFile of it: a folder there fails).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from aotipre import codes
from aotipre.errors import UsageError
from aotipre.findings import Finding
from aotipre.serving import pbtxt
from aotipre.serving.triton import DEFAULT_FILENAME, ServingConfig

CONFIG_NAME = "config.pbtxt"
MAX_MODELS = 10_000


def is_model_dir(path: str | os.PathLike[str]) -> bool:
    """A folder holding config.pbtxt: a Triton model folder (an extracted .pt2 never holds one;
    its root holds archive_format, or one folder that does)."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, CONFIG_NAME))


def is_repository(path: str | os.PathLike[str]) -> bool:
    """A folder that is not a model folder or an extracted package, with model folders in it."""
    if not os.path.isdir(path) or is_model_dir(path):
        return False
    if os.path.exists(os.path.join(path, "archive_format")):
        return False
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)[:MAX_MODELS]
    except OSError:
        return False
    return any(e.is_dir(follow_symlinks=False) and is_model_dir(e.path) for e in entries)


def expand(path: str) -> list[tuple[str, ServingConfig]] | None:
    """(package, serving config) for each model a model folder or repository serves; None when
    `path` is neither (a package, or a folder a .pt2 was extracted into)."""
    if is_model_dir(path):
        return read_model_dir(path)
    if is_repository(path):
        out: list[tuple[str, ServingConfig]] = []
        for entry in sorted(os.scandir(path), key=lambda e: e.name)[:MAX_MODELS]:
            if entry.is_dir(follow_symlinks=False) and is_model_dir(entry.path):
                out += read_model_dir(entry.path)
        return out
    return None


def read_model_dir(model_dir: str) -> list[tuple[str, ServingConfig]]:
    """The package of each served version with its config and layout findings; a version
    whose package is missing gets the expected path and `package=None` (cannot be checked)."""
    source = os.path.join(model_dir, CONFIG_NAME)
    config = pbtxt.read_config(source)
    name = Path(model_dir).name
    layout: list[Finding] = []
    if config.name and config.name != name:
        layout.append(
            _layout(
                f"{source} names the model '{config.name}', its folder is '{name}': Triton "
                "requires them to be the same (model_configuration.md)"
            )
        )
    versions = _versions(model_dir)
    filename = config.default_model_filename or DEFAULT_FILENAME
    base = ServingConfig(config=config, source=source, model_dir=model_dir)
    if not versions:
        found = [p.name for p in Path(model_dir).glob("*.pt2")][:3]
        where = f" ({', '.join(found)} sits beside config.pbtxt)" if found else ""
        finding = _layout(
            f"{model_dir} has no numeric version folder{where}: Triton serves "
            f"<model>/<version>/{filename} and finds nothing to load"
        )
        return [
            (
                os.path.join(model_dir, "1", filename),
                replace(base, layout=(*layout, finding), package=None),
            )
        ]
    out = []
    for version in _served(config, versions):
        folder = os.path.join(model_dir, version)
        path = os.path.join(folder, filename)
        found_layout = list(layout)
        package: str | None = path
        if os.path.isdir(path):
            found_layout.append(
                _layout(
                    f"{path} is a folder: the backend reads the package as one file "
                    "(model_state.cc LoadModel: ReadTextFile), so an extracted .pt2 does not load"
                )
            )
        elif not os.path.isfile(path):
            others = sorted(p.name for p in Path(folder).glob("*.pt2"))[:3]
            if others:
                package = os.path.join(folder, others[0])
                found_layout.append(
                    _layout(
                        f"the backend loads {path}, which does not exist; {folder} holds "
                        f"{', '.join(others)}: rename it to {filename} or set "
                        f'default_model_filename: "{others[0]}"'
                    )
                )
            else:
                package = None
                found_layout.append(_layout(f"the backend loads {path}, which does not exist"))
        out.append(
            (
                package or path,
                replace(base, version=version, layout=tuple(found_layout), package=package),
            )
        )
    return out


def _versions(model_dir: str) -> list[str]:
    """Numeric version folders (model_repository.md: other names, and names starting with 0,
    are ignored)."""
    try:
        entries = list(os.scandir(model_dir))
    except OSError as exc:
        raise UsageError(f"cannot read {model_dir}: {exc.strerror or exc}") from None
    return sorted(
        (e.name for e in entries if e.is_dir() and e.name.isdigit() and not e.name.startswith("0")),
        key=int,
    )


def _served(config: object, versions: list[str]) -> list[str]:
    """model_config.proto ModelVersionPolicy: latest (num_versions, default 1), all, specific."""
    policy = config.version_policy  # type: ignore[attr-defined]
    which = policy.WhichOneof("policy_choice")
    if which == "all":
        return versions
    if which == "specific":
        wanted = {str(v) for v in policy.specific.versions}
        return [v for v in versions if v in wanted] or versions[-1:]
    n = policy.latest.num_versions if which == "latest" and policy.latest.num_versions else 1
    return versions[-n:]


def _layout(message: str) -> Finding:
    return codes.get("AOT041").finding(message, stage="static")


def plan(
    paths: list[str], serving_config: str | None = None
) -> tuple[list[str], dict[str, ServingConfig]]:
    """The packages to check and the server config of each: Triton model folders and
    repositories expanded to the package of each served model version, or `serving_config`
    (--serving-config) applied to the one package given. UsageError (one line) for a config
    that cannot be read or a combination that makes no sense."""
    if serving_config is not None:
        if len(paths) != 1:
            raise UsageError(
                "--serving-config applies to one package",
                hint="check a model repository folder instead: each model's config.pbtxt is used",
            )
        if is_model_dir(paths[0]) or is_repository(paths[0]):
            raise UsageError(
                f"{paths[0]} is a Triton model folder or repository with its own config.pbtxt; "
                "leave out --serving-config"
            )
        from aotipre.serving.triton import load_serving_config

        return list(paths), {paths[0]: load_serving_config(serving_config)}
    packages: list[str] = []
    configs: dict[str, ServingConfig] = {}
    for path in paths:
        found = expand(path) if os.path.isdir(path) else None
        if found is None:
            packages.append(path)
            continue
        for package, config in found:
            packages.append(package)
            configs[package] = config
    return packages, configs
