#!/usr/bin/env python
"""Build the fixture .pt2 packages and sample-input files the test suite needs.

    python scripts/build_fixtures.py [--out DIR] [--only NAME ... [--with-shared]] [--force]
                                     [--list] [--device {cpu,cuda}] [--jobs N]

Output goes to `.fixture-cache/torch-<torch.__version__>/` at the repo root unless --out is
given. A fixture is rebuilt only when its files are missing or its build key changed; the
key hashes the torch version, the device, fixtures/models.py and this script. Every file
is written under a temporary directory and moved into place with os.replace, so an
interrupted build never leaves a half-written file under a fixture's name. `manifest.json`
lists every fixture, its files and sizes and how long it took.

One process shares compiled AOTI parts between packages: `aoti`, `both`, `multi` and
`mismatch` come from one compile of TokenModel. The broken packages are derived from good ones
with zipfile only. `--device cuda` builds the `<name>_cuda.pt2` variants of the packages marked
`cuda=True` in fixtures/models.py (written for a torch 2.11+ CUDA host; the sample-input files
are device-independent CPU tensors).

`--jobs N` (default: the CPUs this process may use, at most 4) builds the stale packages in up
to N child processes (this script with the hidden `--child`). Packages that share an export or
a compile stay in one child, with the broken packages derived from them; the groups are
balanced by the manifest's previous "seconds" (or by estimates). This process keeps the lock,
records each file in the manifest as a child reports it, then builds the rest (sample inputs,
broken packages of up-to-date sources) itself. A failed child stops the others; what finished
stays in the manifest. The children share torch's inductor cache directory: inductor locks
what concurrent processes may both write, the children never compile the same graph, and
the cache path is written into the compiled files, so a private directory would change
them. `--jobs 1` builds everything in this process, one target after another.

The module imports torch only inside the build functions: the zip helpers, the atomic
writer and the build key are torch-free and imported by tests.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import fcntl
import hashlib
import json
import os
import selectors
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
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


ZERO_CHUNK_BYTES = 1 << 20
"""The run of zero bytes that one repeated deflate block of a zip bomb stands for."""


def deflated_zeros(nbytes: int) -> bytes:
    """A raw deflate stream that inflates to `nbytes` zero bytes (a multiple of 1 MiB), ~1 KB
    per MiB, made without compressing `nbytes`: one 1 MiB block ended by a full flush (byte
    aligned, no back-references before it) repeated, then an empty final block."""
    assert nbytes > 0 and nbytes % ZERO_CHUNK_BYTES == 0
    block = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = block.compress(bytes(ZERO_CHUNK_BYTES)) + block.flush(zlib.Z_FULL_FLUSH)
    final = zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)
    return piece * (nbytes // ZERO_CHUNK_BYTES) + final


def _gf2_times(matrix: list[int], vector: int) -> int:
    total = 0
    for column in matrix:
        if not vector:
            break
        if vector & 1:
            total ^= column
        vector >>= 1
    return total


def _gf2_square(matrix: list[int]) -> list[int]:
    return [_gf2_times(matrix, column) for column in matrix]


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """zlib.crc32(a + b) from crc1 = zlib.crc32(a), crc2 = zlib.crc32(b) and len2 = len(b),
    without reading a or b (zlib's crc32_combine: appending a zero bit to the CRC register is
    linear over GF(2), so len2 zero bytes are a power of one 32x32 bit matrix)."""
    if len2 <= 0:
        return crc1
    odd = [0xEDB88320] + [1 << bit for bit in range(31)]  # one zero bit
    even = _gf2_square(odd)  # two zero bits
    odd = _gf2_square(even)  # four zero bits
    while True:
        even = _gf2_square(odd)  # 1, 4, 16, ... zero bytes
        if len2 & 1:
            crc1 = _gf2_times(even, crc1)
        len2 >>= 1
        if not len2:
            break
        odd = _gf2_square(even)
        if len2 & 1:
            crc1 = _gf2_times(odd, crc1)
        len2 >>= 1
        if not len2:
            break
    return crc1 ^ crc2


def crc32_of_zeros(nbytes: int) -> int:
    """zlib.crc32(bytes(nbytes)) without `nbytes` of memory: 1 MiB chunks by doubling with
    crc32_combine, then the rest."""
    chunks, rest = divmod(nbytes, ZERO_CHUNK_BYTES)
    crc = 0  # of the chunks taken so far
    power, power_chunks = zlib.crc32(bytes(ZERO_CHUNK_BYTES)), 1  # of 2**k chunks
    while chunks:
        if chunks & 1:
            crc = crc32_combine(crc, power, power_chunks * ZERO_CHUNK_BYTES)
        chunks >>= 1
        if chunks:
            power = crc32_combine(power, power, power_chunks * ZERO_CHUNK_BYTES)
            power_chunks *= 2
    return crc32_combine(crc, zlib.crc32(bytes(rest)), rest)


def append_deflated_member(archive: Path, name: str, stream: bytes, size: int, crc: int) -> None:
    """Append a DEFLATED member holding the raw deflate `stream` (which inflates to `size`
    bytes of CRC-32 `crc`) to a zip written by zipfile without zip64 records or a comment.
    Its local and central headers carry the sizes in a zip64 extra field."""
    with zipfile.ZipFile(archive) as zf:
        cd_offset, count = zf.start_dir, len(zf.infolist())
    data = archive.read_bytes()
    end = data.rindex(b"PK\x05\x06")
    assert len(data) - end == 22 and count < 0xFFFF, "a plain end record, no zip64, no comment"
    central = data[cd_offset:end]
    raw_name = name.encode()
    sizes = struct.pack("<2H2Q", 1, 16, size, len(stream))  # zip64 extra: both sizes
    dos_date, unknown = 0x21, 0xFFFFFFFF  # 1980-01-01 00:00 (ZIP_EPOCH); sizes in the extra
    local = struct.pack(
        "<4s5H3L2H", b"PK\x03\x04", 45, 0, zipfile.ZIP_DEFLATED, 0, dos_date, crc,
        unknown, unknown, len(raw_name), len(sizes),
    )  # fmt: skip
    entry = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", (3 << 8) | 45, 45, 0, zipfile.ZIP_DEFLATED, 0, dos_date,
        crc, unknown, unknown, len(raw_name), len(sizes), 0, 0, 0, 0o644 << 16, cd_offset,
    )  # fmt: skip
    new_central = central + entry + raw_name + sizes
    new_cd_offset = cd_offset + len(local) + len(raw_name) + len(sizes) + len(stream)
    record = struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, count + 1, count + 1, len(new_central),
        new_cd_offset, 0,
    )  # fmt: skip
    with open(archive, "wb") as f:
        f.write(data[:cd_offset] + local + raw_name + sizes)
        f.write(stream)
        f.write(new_central + record)


def make_bomb(src: Path | None, dst: Path) -> None:
    """A valid EP archive plus one DEFLATED member that inflates to 2 GiB of zeros (its deflate
    stream and CRC made without deflating or reading 2 GiB)."""
    assert src is not None
    rewrite_archive(src, dst)
    append_deflated_member(
        dst,
        f"{dst.stem}/data/bomb.bin",
        deflated_zeros(BOMB_DECLARED_BYTES),
        BOMB_DECLARED_BYTES,
        crc32_of_zeros(BOMB_DECLARED_BYTES),
    )


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
    seconds_estimate: float = 0.0
    """Build time to plan --jobs with when the manifest has none."""


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
        "broken_bomb",
        "ep_only plus a ~2 MB DEFLATED member declaring 2 GiB",
        "ep_only",
        make_bomb,
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
    shares: tuple[str, ...] = ()
    """Work or files other targets need too: 'export:<program>', 'compile:<compile>',
    'file:<target>'. --jobs builds targets that share one in the same child."""
    seconds_estimate: float = 0.0
    """Build time to plan --jobs with, beyond SHARED_SECONDS, when the manifest has none."""


SHARED_SECONDS = {"export": 1.0, "compile": 8.0, "file": 0.0}
"""Rough cost of one export / compile (a fresh build on 2 cores), to balance --jobs."""


def package_shares(name: str) -> tuple[str, ...]:
    """The exports and compiles package `name` (a fixtures/models.py recipe) needs."""
    from fixtures.models import COMPILES, package

    shares: list[str] = []
    for part in package(name).models.values():
        if part.exported:
            shares.append(f"export:{part.exported}")
        if part.compiled:
            shares += [f"compile:{part.compiled}", f"export:{COMPILES[part.compiled].program}"]
    return tuple(dict.fromkeys(shares))


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
                shares=(*package_shares(pkg.name), f"file:{pkg.name}{suffix}"),
                seconds_estimate=0.2,
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
                shares=(f"file:{broken.source}",) if broken.source else (),
                seconds_estimate=broken.seconds_estimate,
            )
        )
    return targets


def select(
    targets: list[Target], only: list[str] | None, *, with_shared: bool = False
) -> list[Target]:
    """Targets named in `only` plus what they depend on, in build order. `with_shared` adds
    the rest of their share groups (what their export, compile or file makes anyway) and every
    target that shares nothing (sample inputs, packages broken from scratch: milliseconds
    each, less than a builder's start), so that a test session asking for fixtures one by one
    starts a builder once per export or compile."""
    if not only:
        return targets
    by_name = {t.name: t for t in targets}
    unknown = sorted(set(only) - set(by_name))
    if unknown:
        raise SystemExit(f"unknown fixture(s): {', '.join(unknown)}; try --list")
    todo = list(only)
    if with_shared:
        named = set(only)
        for group in share_groups(targets):
            if any(targets[i].name in named for i in group):
                todo += [targets[i].name for i in group]
        todo += [t.name for t in targets if not t.shares]
    wanted: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(by_name[name].depends)
    return [t for t in targets if t.name in wanted]


def manifest_entry(target: Target, seconds: float, size: int, key: str) -> dict[str, Any]:
    return {
        "kind": target.kind,
        "summary": target.summary,
        "files": {target.filename: size},
        "seconds": round(seconds, 2),
        "key": key,
        **target.details,
    }


def build(
    out: Path,
    targets: list[Target],
    key: str,
    *,
    force: set[str],
    torch_version: str,
    jobs: int = 1,
    device: str = "cpu",
) -> int:
    """Build what is stale or named in `force`; returns how many targets were built.

    With jobs > 1, the stale packages (and the broken packages derived from them) are built
    by child processes first when they form two groups or more (see plan_jobs)."""
    manifest = load_manifest(out)
    entries: dict[str, Any] = manifest.get("fixtures", {})
    rebuilt: set[str] = set()
    total_start = time.perf_counter()
    width = max(len(t.name) for t in targets)
    prefixes = {
        t.name: f"[{index:2}/{len(targets)}] {t.name:<{width}}"
        for index, t in enumerate(targets, 1)
    }

    def is_stale(target: Target, changed: set[str]) -> bool:
        stale_dep = any(d in changed for d in target.depends)
        forced = target.name in force
        return forced or stale_dep or not is_up_to_date(out, entries.get(target.name), key)

    def finished(target: Target, seconds: float, size: int) -> None:
        entries[target.name] = manifest_entry(target, seconds, size, key)
        rebuilt.add(target.name)
        manifest.update(
            schema_version=MANIFEST_SCHEMA_VERSION,
            torch_version=torch_version,
            fixtures=dict(sorted(entries.items())),
        )
        save_manifest(out, manifest)  # after each target: an interrupted build resumes
        log(f"{prefixes[target.name]}  built in {seconds:.1f} s ({size:,} bytes)")

    if jobs > 1:
        stale: set[str] = set()
        for target in targets:  # dependencies come first
            if is_stale(target, stale):
                stale.add(target.name)
        by_name = {t.name: t for t in targets}
        for_children = [
            t
            for t in targets
            if t.name in stale
            and (
                t.kind == "package"
                or (
                    t.kind == "broken"
                    and t.depends
                    and all(d in stale and by_name[d].kind == "package" for d in t.depends)
                )
            )
        ]
        weights = {
            name: float(entry["seconds"])
            for name, entry in entries.items()
            if isinstance(entry, dict) and isinstance(entry.get("seconds"), (int, float))
        }
        plan = plan_jobs(for_children, weights, jobs)
        if len(plan) > 1:
            run_jobs(out, device, plan, prefixes, finished)

    for target in targets:
        if target.name in rebuilt:  # by a child
            continue
        prefix = prefixes[target.name]
        if not is_stale(target, rebuilt):
            log(f"{prefix}  up to date")
            continue
        log(f"{prefix}  building ...")
        start = time.perf_counter()
        with atomic_output(out / target.filename) as tmp:
            target.write(out, tmp)
        seconds = time.perf_counter() - start
        size = (out / target.filename).stat().st_size
        finished(target, seconds, size)
    log(
        f"{len(rebuilt)} built, {len(targets) - len(rebuilt)} up to date, "
        f"{time.perf_counter() - total_start:.1f} s total -> {out}"
    )
    return len(rebuilt)


# ---------------------------------------------------------------------------------------
# --jobs: child processes (the planner is torch-free)
# ---------------------------------------------------------------------------------------


def default_jobs() -> int:
    """The CPUs this process may run on (what `nproc` says), at most 4."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def share_groups(targets: list[Target]) -> list[list[int]]:
    """The indices of `targets` grouped by what they share (Target.shares, transitively): one
    group is built from one export, compile or source file."""
    parent = list(range(len(targets)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_with: dict[str, int] = {}
    for i, target in enumerate(targets):
        for share in target.shares:
            j = first_with.setdefault(share, i)
            parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(targets)):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def plan_jobs(targets: list[Target], weights: dict[str, float], jobs: int) -> list[list[Target]]:
    """Split `targets` into at most `jobs` lists, one per child process, each in build order.

    Targets that share an export, a compile or a file (Target.shares) land in one list: a
    child exports and compiles once, as a single process does, and builds a broken package
    after its source. The groups go to the least loaded list, longest first; a group weighs
    the manifest's previous "seconds" of its targets when all have one, else an estimate.
    """
    groups = share_groups(targets)

    def weight(members: list[int]) -> float:
        names = [targets[i].name for i in members]
        if all(n in weights for n in names):
            return sum(weights[n] for n in names)
        shares = {s for i in members for s in targets[i].shares}
        return sum(targets[i].seconds_estimate for i in members) + sum(
            SHARED_SECONDS.get(s.partition(":")[0], 0.0) for s in shares
        )

    ordered = sorted(groups, key=lambda m: (-weight(m), m[0]))
    bins: list[list[int]] = [[] for _ in range(max(1, min(jobs, len(ordered))))]
    loads = [0.0] * len(bins)
    for members in ordered:
        lightest = loads.index(min(loads))
        bins[lightest] += members
        loads[lightest] += weight(members)
    return [[targets[i] for i in sorted(b)] for b in bins if b]


class JobFailed(Exception):
    """A child process failed; the message says which, with the end of its stderr."""


class _Terminated(BaseException):
    """SIGTERM while children run: stop them, then die of SIGTERM."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated


@dataclass
class _Job:
    number: int
    targets: list[Target]
    proc: subprocess.Popen[bytes]
    reported: set[str] = field(default_factory=set)
    buffers: dict[int, bytes] = field(default_factory=dict)
    open_fds: set[int] = field(default_factory=set)
    stderr_tail: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=60)
    )

    @property
    def names(self) -> str:
        return ", ".join(t.name for t in self.targets)


def run_jobs(
    out: Path,
    device: str,
    plan: list[list[Target]],
    prefixes: dict[str, str],
    finished: Callable[[Target, float, int], None],
) -> None:
    """Build each list of `plan` in a child process; `finished` records each reported file.

    Raises JobFailed when a child fails, after stopping the others; KeyboardInterrupt and
    SIGTERM stop them too. What the children reported before that stays recorded."""
    script = str(Path(__file__).resolve())
    jobs: list[_Job] = []
    selector = selectors.DefaultSelector()
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous_sigterm = signal.getsignal(signal.SIGTERM)
    if in_main_thread:
        signal.signal(signal.SIGTERM, _raise_terminated)

    def handle(job: _Job, fd: int, line: bytes) -> None:
        text = line.decode(errors="replace").rstrip("\r")
        if fd != job.proc.stdout.fileno():  # type: ignore[union-attr]
            job.stderr_tail.append(text)
            log(f"  [job {job.number}] {text}")
            return
        by_name = {t.name: t for t in job.targets}
        name, seconds, size = (text.split() + ["", "", ""])[:3]
        target = by_name.get(name)
        if target is None or name in job.reported:
            raise JobFailed(f"job {job.number} reported {text!r}; it builds {job.names}")
        on_disk = (out / target.filename).stat().st_size
        if str(on_disk) != size:
            raise JobFailed(f"job {job.number} reported {text!r}, {target.filename} has {on_disk}")
        job.reported.add(name)
        finished(target, float(seconds), on_disk)

    def pump(timeout: float) -> None:
        for key, _ in selector.select(timeout):
            job, fd = key.data
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                selector.unregister(fd)
                job.open_fds.discard(fd)
                rest = job.buffers.pop(fd, b"")
                if rest and fd != job.proc.stdout.fileno():  # type: ignore[union-attr]
                    handle(job, fd, rest)  # a report without its newline is dropped
                continue
            *lines, job.buffers[fd] = (job.buffers.get(fd, b"") + chunk).split(b"\n")
            for line in lines:
                handle(job, fd, line)

    def stop(grace: float = 10.0) -> None:
        live = [job for job in jobs if job.proc.returncode is None or job.open_fds]
        if not live:
            return
        for job in live:
            with contextlib.suppress(OSError):
                job.proc.stdin.close()  # type: ignore[union-attr]
            with contextlib.suppress(OSError):
                os.killpg(job.proc.pid, signal.SIGTERM)  # the child, its compiler
        deadline = time.monotonic() + grace
        killed = False
        while any(job.proc.poll() is None or job.open_fds for job in live):
            if time.monotonic() > deadline:
                if killed:
                    break  # a grandchild keeps a pipe open: give up on its output
                for job in live:
                    with contextlib.suppress(OSError):
                        os.killpg(job.proc.pid, signal.SIGKILL)
                killed, deadline = True, time.monotonic() + 5.0
            with contextlib.suppress(JobFailed):
                pump(0.1)
        for job in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                job.proc.wait(timeout=5)
        # a child killed mid-write leaves its private .tmp-* folder; the lock is still ours
        for leftover in out.glob(".tmp-*"):
            shutil.rmtree(leftover, ignore_errors=True)

    try:
        for number, targets in enumerate(plan, 1):
            names = [t.name for t in targets]
            proc = subprocess.Popen(
                [sys.executable, script, "--child", "--out", str(out), "--device", device]
                + ["--only", *names],
                stdin=subprocess.PIPE,  # closed when this process ends: the child stops
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # Ctrl-C reaches this process only, which stops it
            )
            job = _Job(number, targets, proc)
            jobs.append(job)
            for stream in (proc.stdout, proc.stderr):
                assert stream is not None
                job.open_fds.add(stream.fileno())
                selector.register(stream.fileno(), selectors.EVENT_READ, (job, stream.fileno()))
            for target in targets:
                log(f"{prefixes[target.name]}  building in job {number} ...")
        pending = list(jobs)
        while pending:
            pump(0.5)
            for job in list(pending):
                code = job.proc.poll()
                if code is None:
                    continue
                stdout_fd = job.proc.stdout.fileno()  # type: ignore[union-attr]
                if code != 0:
                    deadline = time.monotonic() + 5.0  # its last reports, its traceback
                    while job.open_fds and time.monotonic() < deadline:
                        pump(0.1)
                    tail = "\n".join(job.stderr_tail)
                    raise JobFailed(
                        f"job {job.number} ({job.names}) failed with exit status {code}; "
                        f"the end of its stderr:\n{tail}"
                    )
                if stdout_fd in job.open_fds:
                    continue  # read its last reports first
                missing = [t.name for t in job.targets if t.name not in job.reported]
                if missing:
                    raise JobFailed(f"job {job.number} ended without building {missing}")
                pending.remove(job)
    finally:
        try:
            stop()
        finally:
            selector.close()
            for job in jobs:
                for stream in (job.proc.stdin, job.proc.stdout, job.proc.stderr):
                    with contextlib.suppress(OSError):
                        if stream is not None:
                            stream.close()
            if in_main_thread:
                signal.signal(signal.SIGTERM, previous_sigterm or signal.SIG_DFL)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds: atomic_output removes its temporary folder


def _stop_when_parent_ends() -> None:
    """A child's stdin is a pipe from its parent: at EOF the parent is gone or stopping it."""
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass
    me = os.getpid()
    for signum in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(OSError):
            if os.getpgrp() == me:
                os.killpg(me, signum)  # with the compiler it runs
            else:
                os.kill(me, signum)
        time.sleep(10)


def run_child(out: Path, targets: Iterable[Target]) -> int:
    """--child: build `targets` into `out` without the lock or the manifest (the parent holds
    both) and print `name seconds size` on stdout as each file is in place."""
    sys.stdout.flush()
    report = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever else writes to stdout (torch, the compiler) goes to stderr
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if stat.S_ISFIFO(os.fstat(0).st_mode):
        threading.Thread(target=_stop_when_parent_ends, daemon=True).start()
    for target in targets:
        start = time.perf_counter()
        with atomic_output(out / target.filename) as tmp:
            target.write(out, tmp)
        seconds = time.perf_counter() - start
        size = (out / target.filename).stat().st_size
        report.write(f"{target.name} {seconds:.6f} {size}\n")
        report.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        help="output directory (default: .fixture-cache/torch-<version>/ at the repo root)",
    )
    parser.add_argument("--only", nargs="+", metavar="NAME", help="build these (and deps)")
    parser.add_argument(
        "--with-shared",
        action="store_true",
        help="with --only: also the fixtures made from the same export, compile or file",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument("--list", action="store_true", help="list fixtures and exit")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cuda builds <name>_cuda.pt2 variants of the cuda-capable ones",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="build packages in up to N processes (default: the CPUs, at most 4; 1: this one)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.child and not (args.out and args.only):
        parser.error("--child needs --out and --only")

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
    if args.child:
        by_name = {t.name: t for t in targets}
        try:
            code = run_child(out, [by_name[name] for name in args.only])
        except SystemExit as stopped:  # SIGTERM
            code = stopped.code if isinstance(stopped.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # skips seconds of torch teardown; every file is in place or removed
    key = build_key(torch.__version__, args.device)
    selected = select(targets, args.only, with_shared=args.with_shared)
    jobs = args.jobs if args.jobs is not None else default_jobs()
    with build_lock(out):
        # --force rebuilds what --only names (or everything), not the dependencies
        force = set(args.only or [t.name for t in selected]) if args.force else set()
        try:
            build(
                out,
                selected,
                key,
                force=force,
                torch_version=torch.__version__,
                jobs=jobs,
                device=args.device,
            )
        except JobFailed as failed:
            log(f"build_fixtures.py: {failed}")
            return 1
    print(out)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except _Terminated:  # stopped the children; now end as SIGTERM would have
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        raise
