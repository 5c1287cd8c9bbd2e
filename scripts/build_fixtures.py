#!/usr/bin/env python
"""Build the fixture .pt2 packages and sample-input files the test suite needs.

    python scripts/build_fixtures.py [--out DIR] [--only NAME ...] [--force] [--list]
                                     [--device {cpu,cuda}]

Output goes to `.fixture-cache/torch-<torch.__version__>/` at the repo root unless --out is
given. A fixture is rebuilt only when its files are missing or its build key changed; the
key hashes the torch version, the device, fixtures/models.py and this script. Every file
is written under a temporary directory and moved into place with os.replace, so an
interrupted build never leaves a half-written file under a fixture's name. `manifest.json`
lists every fixture, its files and sizes and how long it took.

One process builds everything and shares compiled AOTI parts between packages: `aoti`,
`both`, `multi` and `mismatch` come from one compile of TokenModel. The broken packages are
derived from good ones with zipfile only. `--device cuda` builds the `<name>_cuda.pt2`
variants of the packages marked `cuda=True` in fixtures/models.py (written for a torch
2.11+ CUDA host; the sample-input files are device-independent CPU tensors).

The module imports torch only inside the build functions: the zip helpers, the atomic
writer and the build key are torch-free and imported by tests.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODELS_PY = REPO / "fixtures" / "models.py"
MANIFEST = "manifest.json"
MANIFEST_SCHEMA_VERSION = 1
LOCK_FILE = ".build.lock"
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
BOMB_DECLARED_BYTES = 2 * 1024**3
"""Uncompressed size of broken_bomb.pt2's member (2 GiB of zeros, ~2 MB deflated)."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Build key, atomic writes, manifest (torch-free)
# ---------------------------------------------------------------------------------------


def build_key(torch_version: str, device: str, sources: tuple[Path, ...] | None = None) -> str:
    """A short hash of everything that decides what the fixtures contain."""
    digest = hashlib.sha256(f"{torch_version}\0{device}\0".encode())
    for path in sources if sources is not None else (MODELS_PY, Path(__file__).resolve()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def atomic_output(dest: Path) -> Iterator[Path]:
    """Yield a temporary path to write; move it to `dest` only if the block succeeds.

    The temporary file keeps dest's basename (inside a private directory next to dest):
    torch names an archive's root folder after the file it writes.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(prefix=".tmp-", dir=dest.parent))
    try:
        tmp = tmp_dir / dest.name
        yield tmp
        if not tmp.is_file():
            raise RuntimeError(f"builder wrote nothing for {dest.name}")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def load_manifest(out: Path) -> dict[str, Any]:
    try:
        data = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    if data.get("schema_version") != MANIFEST_SCHEMA_VERSION:
        return {}
    return data


def save_manifest(out: Path, manifest: dict[str, Any]) -> None:
    with atomic_output(out / MANIFEST) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def is_up_to_date(out: Path, entry: dict[str, Any] | None, key: str) -> bool:
    if not entry or entry.get("key") != key:
        return False
    files = entry.get("files", {})
    return bool(files) and all(
        (out / name).is_file() and (out / name).stat().st_size == size
        for name, size in files.items()
    )


@contextlib.contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """Serialize concurrent builders of one directory (parallel pytest sessions)."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / LOCK_FILE, "a") as lock:  # "a": never touch the mtime
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# ---------------------------------------------------------------------------------------
# Broken packages (torch-free, derived from good ones with zipfile)
# ---------------------------------------------------------------------------------------


def _zip_info(name: str, compress_type: int = zipfile.ZIP_STORED) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
    info.compress_type = compress_type
    info.external_attr = 0o644 << 16
    return info


def rewrite_archive(
    src: Path,
    dst: Path,
    *,
    replace: dict[str, bytes] | None = None,
    extra: tuple[tuple[str, bytes], ...] = (),
) -> None:
    """Copy `src` into `dst` with its root folder renamed to dst's stem (all STORED).

    `replace` maps a path below the root (`archive_version`) to new content; `extra`
    members are appended verbatim, after the copied ones.
    """
    replace = dict(replace or {})
    root = dst.stem
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            _, _, rest = info.filename.partition("/")
            data = replace.pop(rest) if rest in replace else zin.read(info)
            zout.writestr(_zip_info(f"{root}/{rest}"), data)
        if replace:
            raise KeyError(f"{src.name} has no member(s) {sorted(replace)}")
        for name, data in extra:
            zout.writestr(_zip_info(name), data)


def member_data_offset(path: Path, member: str) -> tuple[int, int]:
    """(offset of the member's data in the file, its size) for a STORED member."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_len + extra_len, info.compress_size


def make_empty(src: Path | None, dst: Path) -> None:
    dst.write_bytes(b"")


def make_not_zip(src: Path | None, dst: Path) -> None:
    dst.write_text("This is a text file with a .pt2 name, not a zip archive.\n")


def make_truncated(src: Path | None, dst: Path) -> None:
    assert src is not None
    data = src.read_bytes()
    dst.write_bytes(data[: len(data) // 2])


def make_escape(src: Path | None, dst: Path) -> None:
    assert src is not None
    rewrite_archive(
        src,
        dst,
        extra=(
            ("../../evil", b"written outside the extraction folder\n"),
            ("/abs/path", b"written to an absolute path\n"),
        ),
    )


def make_plain_zip(src: Path | None, dst: Path) -> None:
    root = dst.stem
    with zipfile.ZipFile(dst, "w") as zf:
        zf.writestr(_zip_info(f"{root}/README.txt"), b"an ordinary zip: no archive_format\n")
        zf.writestr(_zip_info(f"{root}/data/blob.bin"), bytes(range(256)))


def make_version(src: Path | None, dst: Path) -> None:
    assert src is not None
    rewrite_archive(src, dst, replace={"archive_version": b"99"})


def make_json(src: Path | None, dst: Path) -> None:
    assert src is not None
    rewrite_archive(src, dst, replace={"models/model.json": b'{"graph_module": {"graph": [1, 2'})


def make_wrong_format(src: Path | None, dst: Path) -> None:
    assert src is not None
    rewrite_archive(src, dst, replace={"archive_format": b"torchscript"})


def make_bomb(src: Path | None, dst: Path) -> None:
    """A valid EP archive plus one DEFLATED member that inflates to 2 GiB of zeros."""
    assert src is not None
    rewrite_archive(src, dst)
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(dst, "a", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        info = _zip_info(f"{dst.stem}/data/bomb.bin", zipfile.ZIP_DEFLATED)
        with zf.open(info, "w", force_zip64=True) as member:
            for _ in range(BOMB_DECLARED_BYTES // len(chunk)):
                member.write(chunk)


def make_crc(src: Path | None, dst: Path) -> None:
    """The aoti package with 4 bytes inverted in the middle of its .so member."""
    assert src is not None
    rewrite_archive(src, dst)
    with zipfile.ZipFile(dst) as zf:
        so_members = [n for n in zf.namelist() if n.endswith(".so")]
    if not so_members:
        raise RuntimeError(f"{src.name} has no .so member to corrupt")
    offset, size = member_data_offset(dst, so_members[0])
    with open(dst, "r+b") as f:
        f.seek(offset + size // 2)
        original = f.read(4)
        f.seek(offset + size // 2)
        f.write(bytes(b ^ 0xFF for b in original))


@dataclass(frozen=True)
class Broken:
    """A package broken on purpose."""

    name: str
    summary: str
    source: str | None
    """The good package it is derived from."""
    make: Callable[[Path | None, Path], None]


BROKEN: tuple[Broken, ...] = (
    Broken("broken_empty", "0-byte file", None, make_empty),
    Broken("broken_not_zip", "a text file", None, make_not_zip),
    Broken(
        "broken_truncated", "first half of aoti.pt2 (no central directory)", "aoti", make_truncated
    ),
    Broken(
        "broken_escape", "ep_only plus members '../../evil' and '/abs/path'", "ep_only", make_escape
    ),
    Broken("broken_plain_zip", "a zip with no archive_format member", None, make_plain_zip),
    Broken("broken_version", "ep_only with archive_version = 99", "ep_only", make_version),
    Broken("broken_json", "ep_only with models/model.json cut mid-JSON", "ep_only", make_json),
    Broken(
        "broken_bomb", "ep_only plus a ~2 MB DEFLATED member declaring 2 GiB", "ep_only", make_bomb
    ),
    Broken(
        "broken_crc",
        "aoti with 4 bytes inverted inside the .so member (CRC mismatch)",
        "aoti",
        make_crc,
    ),
    Broken(
        "broken_wrong_format",
        "ep_only with archive_format = 'torchscript'",
        "ep_only",
        make_wrong_format,
    ),
)


# ---------------------------------------------------------------------------------------
# Good packages and inputs (torch)
# ---------------------------------------------------------------------------------------


@dataclass
class TorchBuilder:
    """Exports and compiles lazily, once per program / compile, for one device."""

    device: str
    exported: dict[str, Any] = field(default_factory=dict)
    compiled: dict[str, list[Any]] = field(default_factory=dict)

    def export(self, key: str) -> Any:
        if key not in self.exported:
            import torch

            from fixtures.models import PROGRAMS

            program = PROGRAMS[key]
            start = time.perf_counter()
            torch.manual_seed(0)
            model = program.make_model().to(self.device).eval()
            args, kwargs = _to_device(program.example(), self.device)
            dynamic_shapes = program.dynamic_shapes() if program.dynamic_shapes else None
            self.exported[key] = torch.export.export(
                model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False
            )
            log(f"    export {key} ({self.device}): {time.perf_counter() - start:.1f} s")
        return self.exported[key]

    def compile(self, key: str) -> list[Any]:
        """AOTI files of one compile (paths in the inductor cache, plus Weights)."""
        if key not in self.compiled:
            from torch._inductor import aot_compile

            from fixtures.models import COMPILES

            recipe = COMPILES[key]
            ep = self.export(recipe.program)
            start = time.perf_counter()
            try:
                gm = ep.module(check_guards=False)
            except TypeError:  # older torch: no check_guards
                gm = ep.module()
            args, kwargs = ep.example_inputs
            options = {
                **recipe.inductor_configs,
                "aot_inductor.package": True,
                "aot_inductor.metadata": {"aotipre_fixture_compile": key},
            }
            files = aot_compile(gm, args, kwargs, options=options)
            if not isinstance(files, list):
                raise RuntimeError(f"aot_compile returned {type(files).__name__}, not a list")
            self.compiled[key] = files
            log(f"    compile {key} ({self.device}): {time.perf_counter() - start:.1f} s")
        return self.compiled[key]

    def package(self, name: str, dst: Path) -> None:
        import torch
        from torch.export.pt2_archive._package import package_pt2

        from fixtures.models import package

        recipe = package(name)
        if recipe.use_export_save:
            ((model_name, part),) = recipe.models.items()
            assert model_name == "model" and part.exported and not part.compiled
            torch.export.save(self.export(part.exported), dst)
            return
        exported = {m: self.export(p.exported) for m, p in recipe.models.items() if p.exported}
        compiled = {m: self.compile(p.compiled) for m, p in recipe.models.items() if p.compiled}
        package_pt2(dst, exported_programs=exported or None, aoti_files=compiled or None)


def _to_device(inputs: Any, device: str) -> Any:
    import torch
    from torch.utils import _pytree as pytree

    if device == "cpu":
        return inputs
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(device), inputs)


def write_inputs(make: Callable[[], Any], dst: Path) -> None:
    import torch

    obj = make()
    if isinstance(obj, bytes):
        dst.write_bytes(obj)
    else:
        torch.save(obj, dst)


# ---------------------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One fixture the builder makes: one file, its dependencies and how to write it."""

    name: str
    kind: str
    """'package', 'inputs' or 'broken'."""
    filename: str
    summary: str
    write: Callable[[Path, Path], None]
    """(output dir, temporary destination) -> None."""
    depends: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


def all_targets(device: str, builder: TorchBuilder) -> list[Target]:
    from fixtures.models import INPUTS, PACKAGES

    suffix = "" if device == "cpu" else f"_{device}"
    targets: list[Target] = []
    for pkg in PACKAGES:
        if device != "cpu" and not pkg.cuda:
            continue
        targets.append(
            Target(
                name=pkg.name + suffix,
                kind="package",
                filename=f"{pkg.name}{suffix}.pt2",
                summary=pkg.summary,
                write=lambda _out, dst, n=pkg.name: builder.package(n, dst),
                details={
                    "device": device,
                    "never_load": pkg.never_load,
                    "models": {
                        m: {"exported": p.exported, "compiled": p.compiled}
                        for m, p in pkg.models.items()
                    },
                },
            )
        )
    if device != "cpu":
        return targets
    for inp in INPUTS:
        targets.append(
            Target(
                name=inp.name,
                kind="inputs",
                filename=f"{inp.name}.pt",
                summary=inp.summary,
                write=lambda _out, dst, make=inp.make: write_inputs(make, dst),
            )
        )
    for broken in BROKEN:
        src_file = f"{broken.source}.pt2" if broken.source else None
        targets.append(
            Target(
                name=broken.name,
                kind="broken",
                filename=f"{broken.name}.pt2",
                summary=broken.summary,
                write=lambda out, dst, b=broken, s=src_file: b.make(out / s if s else None, dst),
                depends=(broken.source,) if broken.source else (),
                details={"source": broken.source},
            )
        )
    return targets


def select(targets: list[Target], only: list[str] | None) -> list[Target]:
    """Targets named in `only` plus what they depend on, in build order."""
    if not only:
        return targets
    by_name = {t.name: t for t in targets}
    unknown = sorted(set(only) - set(by_name))
    if unknown:
        raise SystemExit(f"unknown fixture(s): {', '.join(unknown)}; try --list")
    wanted: set[str] = set()
    todo = list(only)
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(by_name[name].depends)
    return [t for t in targets if t.name in wanted]


def build(
    out: Path, targets: list[Target], key: str, *, force: set[str], torch_version: str
) -> int:
    """Build what is stale or named in `force`; returns how many targets were built."""
    manifest = load_manifest(out)
    entries: dict[str, Any] = manifest.get("fixtures", {})
    rebuilt: set[str] = set()
    total_start = time.perf_counter()
    width = max(len(t.name) for t in targets)
    for index, target in enumerate(targets, 1):
        prefix = f"[{index:2}/{len(targets)}] {target.name:<{width}}"
        stale_dep = any(d in rebuilt for d in target.depends)
        forced = target.name in force
        if not forced and not stale_dep and is_up_to_date(out, entries.get(target.name), key):
            log(f"{prefix}  up to date")
            continue
        log(f"{prefix}  building ...")
        start = time.perf_counter()
        with atomic_output(out / target.filename) as tmp:
            target.write(out, tmp)
        seconds = time.perf_counter() - start
        size = (out / target.filename).stat().st_size
        entries[target.name] = {
            "kind": target.kind,
            "summary": target.summary,
            "files": {target.filename: size},
            "seconds": round(seconds, 2),
            "key": key,
            **target.details,
        }
        rebuilt.add(target.name)
        manifest.update(
            schema_version=MANIFEST_SCHEMA_VERSION,
            torch_version=torch_version,
            fixtures=dict(sorted(entries.items())),
        )
        save_manifest(out, manifest)  # after each target: an interrupted build resumes
        log(f"{prefix}  built in {seconds:.1f} s ({size:,} bytes)")
    log(
        f"{len(rebuilt)} built, {len(targets) - len(rebuilt)} up to date, "
        f"{time.perf_counter() - total_start:.1f} s total -> {out}"
    )
    return len(rebuilt)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        help="output directory (default: .fixture-cache/torch-<version>/ at the repo root)",
    )
    parser.add_argument("--only", nargs="+", metavar="NAME", help="build these (and deps)")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument("--list", action="store_true", help="list fixtures and exit")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cuda builds <name>_cuda.pt2 variants of the cuda-capable ones",
    )
    args = parser.parse_args(argv)

    start = time.perf_counter()
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import torch

    log(f"import torch {torch.__version__}: {time.perf_counter() - start:.1f} s")
    targets = all_targets(args.device, TorchBuilder(args.device))
    if args.list:
        for t in targets:
            print(f"{t.filename:<34} {t.kind:<8} {t.summary}")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        log("--device cuda: torch.cuda.is_available() is False")
        return 2
    out = (args.out or REPO / ".fixture-cache" / f"torch-{torch.__version__}").resolve()
    key = build_key(torch.__version__, args.device)
    selected = select(targets, args.only)
    with build_lock(out):
        # --force rebuilds what --only names (or everything), not the dependencies
        force = set(args.only or [t.name for t in selected]) if args.force else set()
        build(out, selected, key, force=force, torch_version=torch.__version__)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
