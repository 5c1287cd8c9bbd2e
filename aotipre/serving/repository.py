"""Triton model repositories on disk: which paths are model folders, and the package each serves.

Resolved as Triton resolves them (triton-inference-server/core, pytorch_backend and backend at
the commits cited in docs/serving.md; each rule cites its file and function):

- model folders: every entry of the repository that `stat()` (links followed) says is a folder
  (model_repository_manager.cc Poll / RepositoryIndex: GetDirectorySubdirs, whose
  filesystem/implementations/local.h IsDirectory stats each entry and fails the whole listing
  on an entry it cannot stat); aotipre checks those that hold a config.pbtxt;
- versions: the sub-folders of a model folder, links followed, read by `std::stoll`
  (model_lifecycle.cc VersionsToLoad, see `triton_version`), served by the version policy;
- the package: `JoinPath({model folder, std::to_string(version), default_model_filename or
  model.pt2})` (pytorch_backend src/pt2/model_state.cc LoadModel; JoinPath in backend
  src/backend_common.cc appends an absolute segment, it never replaces the path), opened as a
  file (FileExists, then ReadTextFile: a folder there fails).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from aotipre.findings import Finding, codes
from aotipre.foundation import safeio
from aotipre.foundation.errors import UsageError
from aotipre.serving import pbtxt
from aotipre.serving.triton import DEFAULT_FILENAME, ServingConfig

CONFIG_NAME = "config.pbtxt"
MAX_MODELS = 10_000
MAX_FOLDER_ENTRIES = 10_000
"""Most entries of a repository or model folder read (a listing past it is cut)."""

SKIPPED_VERSION_FOLDERS = ("warmup", "initial_state", "configs")
"""model_lifecycle.cc VersionsToLoad skip_dirs (constants.h kWarmupDataFolder,
kInitialStateFolder, kModelConfigFolder): sub-folders of a model that are never versions."""
_C_SPACE = b" \t\n\v\f\r"
"""isspace() in the C locale: what strtoll (behind std::stoll) skips before the number."""
_INT64 = 2**63


class VersionOutOfRange(ValueError):
    """A version folder name whose number std::stoll cannot hold (std::out_of_range)."""


def triton_version(name: str) -> int | None:
    """The version Triton reads from a model's sub-folder `name`, or None when it ignores it.

    model_lifecycle.cc VersionsToLoad: the skip_dirs are skipped; a name longer than one
    character that starts with '0' is ignored; else `std::stoll(name)`, whose
    std::invalid_argument (no number at the start) means ignored. std::stoll is strtoll in
    base 10 on the name's bytes: leading C-locale white space, an optional sign, then the
    longest run of ASCII digits; the rest is not looked at. So " 1", "+1" and "1a" are
    version 1, "-2" is version -2, "01" and "١" (a non-ASCII digit) and "¹" are ignored.
    VersionOutOfRange when the number does not fit an int64: VersionsToLoad catches only
    std::invalid_argument, so std::out_of_range fails the model's load.
    """
    if name in SKIPPED_VERSION_FOLDERS:
        return None
    raw = os.fsencode(name)
    if len(raw) > 1 and raw[:1] == b"0":
        return None
    text = raw.lstrip(_C_SPACE)
    sign = 1
    if text[:1] in (b"+", b"-"):
        sign = -1 if text[:1] == b"-" else 1
        text = text[1:]
    digits = len(text) - len(text.lstrip(b"0123456789"))
    if digits == 0:
        return None
    value = sign * int(text[:digits].decode("ascii"))
    if not -_INT64 <= value < _INT64:
        raise VersionOutOfRange(name)
    return value


def join_path(*segments: str) -> str:
    """Triton's JoinPath (backend src/backend_common.cc, core src/filesystem/api.cc): segments
    joined by one '/', an absolute segment appended to what comes before it (never replacing
    it, as os.path.join would)."""
    joined = ""
    for segment in segments:
        if not joined:
            joined = segment
        elif segment.startswith("/"):
            joined += segment[1:] if joined.endswith("/") else segment
        else:
            joined += segment if joined.endswith("/") else "/" + segment
    return joined


def _entries(folder: str) -> list[os.DirEntry[str]]:
    """The first MAX_FOLDER_ENTRIES entries of `folder` by name; UsageError (one line) when it
    cannot be listed."""
    try:
        with os.scandir(folder) as listing:
            entries = [entry for _, entry in zip(range(MAX_FOLDER_ENTRIES), listing)]
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise UsageError(f"cannot read {folder}: {why}") from None
    return sorted(entries, key=lambda e: e.name)


def _subfolders(folder: str) -> tuple[list[os.DirEntry[str]], list[str]]:
    """GetDirectorySubdirs: the entries of `folder` that are folders, links followed (stat);
    and the names of those stat fails on (a link to nothing, a loop), each of which fails
    Triton's whole listing (local.h IsDirectory: "failed to stat file")."""
    folders: list[os.DirEntry[str]] = []
    broken: list[str] = []
    for entry in _entries(folder):
        if safeio.probe(entry.path) is None:
            broken.append(entry.name)
        elif safeio.is_dir(entry.path):
            folders.append(entry)
    return folders, broken


def is_model_dir(path: str | os.PathLike[str]) -> bool:
    """A folder holding config.pbtxt: a Triton model folder (an extracted .pt2 never holds one;
    its root holds archive_format, or one folder that does)."""
    return safeio.is_dir(path) and safeio.is_file(os.path.join(path, CONFIG_NAME))


def is_repository(path: str | os.PathLike[str]) -> bool:
    """A folder that is not a model folder or an extracted package, with model folders in it
    (links to model folders count: Triton follows them)."""
    if not safeio.is_dir(path) or is_model_dir(path):
        return False
    if safeio.exists(os.path.join(path, "archive_format")):
        return False
    try:
        folders, _ = _subfolders(os.fspath(path))
    except UsageError:
        return False
    return any(is_model_dir(e.path) for e in folders[:MAX_MODELS])


def expand(path: str) -> list[tuple[str, ServingConfig]] | None:
    """(package, serving config) for each model a model folder or repository serves; None when
    `path` is neither (a package, or a folder a .pt2 was extracted into)."""
    if is_model_dir(path):
        return read_model_dir(path)
    if not is_repository(path):
        return None
    folders, broken = _subfolders(path)
    unpolled: list[Finding] = []
    if broken:
        unpolled.append(
            _layout(
                f"Triton cannot stat {_names(broken)} in the model repository {path} "
                "(a link to nothing, or a loop): listing the repository fails "
                "(model_repository_manager.cc Poll: GetDirectorySubdirs), so no model in it "
                "is loaded unless loaded by name (--model-control-mode=explicit)"
            )
        )
    out: list[tuple[str, ServingConfig]] = []
    for entry in folders[:MAX_MODELS]:
        if is_model_dir(entry.path):
            out += [
                (package, replace(served, layout=(*unpolled, *served.layout)))
                for package, served in read_model_dir(entry.path)
            ]
    return out


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
    versions, problems = _versions(model_dir)
    filename = config.default_model_filename or DEFAULT_FILENAME
    base = ServingConfig(config=config, source=source, model_dir=model_dir)
    served, policy_problems = _served(config, sorted(versions))
    layout += problems
    if not versions or not served:
        if not versions:
            found = sorted(e.name for e in _entries(model_dir) if e.name.endswith(".pt2"))[:3]
            where = f" ({', '.join(found)} sits beside config.pbtxt)" if found else ""
            why = (
                f"{model_dir} has no numeric version folder{where}: Triton serves "
                f"<model>/<version>/{filename} and finds nothing to load"
            )
        else:
            why = (
                f"{model_dir}: no version folder is served by its version policy: Triton "
                'fails the model (model_lifecycle.cc AsyncLoad: "at least one version must '
                'be available under the version policy")'
            )
        path = join_path(model_dir, "1", filename)
        finding = _layout(why)
        return [(path, replace(base, layout=(*layout, *policy_problems, finding), package=None))]
    layout += policy_problems
    out = []
    for version in served:
        folder = join_path(model_dir, str(version))
        path = join_path(folder, filename)
        found_layout = list(layout)
        package: str | None = path
        named = versions[version]
        if str(version) not in named:
            found_layout.append(
                _layout(
                    f"Triton reads {_names(named)} in {model_dir} as version {version} "
                    f"(std::stoll), and the backend loads version {version} from {folder} "
                    "(model_state.cc LoadModel: the version number, not the folder name): "
                    f"name the folder {version}"
                )
            )
        if safeio.is_dir(path):
            found_layout.append(
                _layout(
                    f"{path} is a folder: the backend reads the package as one file "
                    "(model_state.cc LoadModel: ReadTextFile), so an extracted .pt2 does not load"
                )
            )
        elif not safeio.is_file(path):
            others = _packages_in(folder)
            absolute = filename.startswith("/")
            if absolute:
                found_layout.append(
                    _layout(
                        f'default_model_filename "{filename}" is absolute, but the backend '
                        f"appends it to the version folder (JoinPath) and loads {path}, which "
                        "does not exist"
                    )
                )
            if others:
                package = os.path.join(folder, others[0])
                found_layout.append(
                    _layout(
                        f"the backend loads {path}, which does not exist; {folder} holds "
                        f"{', '.join(others)}: rename it to {os.path.basename(filename)} or set "
                        f'default_model_filename: "{others[0]}"'
                    )
                )
            else:
                package = None
                if not absolute:
                    found_layout.append(_layout(f"the backend loads {path}, which does not exist"))
        out.append(
            (
                package or path,
                replace(base, version=str(version), layout=tuple(found_layout), package=package),
            )
        )
    return out


def _packages_in(folder: str) -> list[str]:
    """The first .pt2 files of a version folder by name (none when it cannot be listed)."""
    try:
        entries = _entries(folder)
    except UsageError:
        return []
    return [e.name for e in entries if e.name.endswith(".pt2") and safeio.is_file(e.path)][:3]


def _versions(model_dir: str) -> tuple[dict[int, list[str]], list[Finding]]:
    """The versions Triton finds in a model folder (model_lifecycle.cc VersionsToLoad), each
    with the folder names read as it; and what fails the model's load instead."""
    folders, broken = _subfolders(model_dir)
    problems: list[Finding] = []
    if broken:
        problems.append(
            _layout(
                f"Triton cannot stat {_names(broken)} in {model_dir} (a link to nothing, or a "
                "loop): listing the model's versions fails (VersionsToLoad: "
                "GetDirectorySubdirs), so the model does not load"
            )
        )
    versions: dict[int, list[str]] = {}
    for entry in folders:
        try:
            version = triton_version(entry.name)
        except VersionOutOfRange:
            problems.append(
                _layout(
                    f"{os.path.join(model_dir, entry.name)}: the number does not fit an int64: "
                    "Triton's std::stoll throws std::out_of_range, which VersionsToLoad does "
                    "not catch, so the model does not load"
                )
            )
            continue
        if version is not None:
            versions.setdefault(version, []).append(entry.name)
    return versions, problems


def _served(config: object, versions: list[int]) -> tuple[list[int], list[Finding]]:
    """model_lifecycle.cc VersionsToLoad: `specific` serves the listed versions present (a
    missing one is logged as an error), `latest` the num_versions highest (no policy: latest
    1, model_config_utils.cc NormalizeModelConfig), `all` every one."""
    policy = config.version_policy  # type: ignore[attr-defined]
    which = policy.WhichOneof("policy_choice")
    if which == "all":
        return versions, []
    if which == "specific":
        present = set(versions)
        wanted = sorted(set(policy.specific.versions))
        missing = [v for v in wanted if v not in present]
        problems = [
            _layout(
                f"version_policy specific lists version {v}, but the model has no folder for "
                "it: Triton logs an error and does not serve it (VersionsToLoad)"
            )
            for v in missing
        ]
        return [v for v in wanted if v in present], problems
    n = policy.latest.num_versions if which == "latest" else 1
    return (versions[-n:] if n > 0 else []), []


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


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
        found = expand(path) if safeio.is_dir(path) else None
        if found is None:
            packages.append(path)
            continue
        for package, config in found:
            packages.append(package)
            configs[package] = config
    return packages, configs
