"""Build aotipre/binaries/torch_table.json: what each torch release offers an AOTI package.

For every release given (a wheel file, or an installed `torch` folder), it records

- `shim`: the `aoti_*` C shim functions its libraries export (libtorch_cpu.so, libtorch_cuda.so
  when the build has CUDA; read from their dynamic symbol tables with aotipre's own ELF reader,
  nothing is loaded or installed), and
- `entry_points`: the `AOTInductor*` functions a package .so built by that release defines
  (the definitions in torch/_inductor/codegen/aoti_runtime/interface.cpp, which inductor
  compiles into every package).

aotipre uses the first to say whether a target torch can dlopen a package (every shim function
the .so imports must be exported) and both to bound the torch release that produced an
AOTI-only package. Usage (see docs/targets.md, "The torch table"):

    pip download torch==2.12.0 --no-deps -d wheels/
    python scripts/build_torch_table.py wheels/torch-2.1*.whl .venv/lib/python3.11/site-packages/torch
    python scripts/build_torch_table.py --check wheels/torch-2.14.1-*.whl   # compare, write nothing

Without a wheel, a release can be read from its sources (`--sources`): the functions declared
`AOTI_TORCH_EXPORT` in the C shim headers an x86 CUDA wheel builds (SHIM_HEADERS) stand in for
the exports, interface.cpp gives the entry points. DIR is a pytorch checkout at the release tag
(only those files are needed) or an installed torch folder (its include/ copy of the headers):

    python scripts/build_torch_table.py --sources pytorch/ --version 2.15.0
    python scripts/build_torch_table.py --check --sources .venv/lib/python3.11/site-packages/torch \
        --version 2.13.0   # the method against the wheel-derived 2.13 row

Declared is a superset of exported at worst (a declaration under an #if the build left off),
the safe direction for the dlopen check. Checked on torch 2.13.0: the headers of the installed
2.13.0+cpu wheel give exactly the 506 names of the cu130 wheel's 2.13 row. Such a row is marked
`"derived": "sources"` in `releases`.

A release already in the table and not given keeps its entry (the table is merged).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aotipre.binaries.elf import ElfFile  # noqa: E402
from aotipre.binaries.source import open_file  # noqa: E402

TABLE = REPO / "aotipre" / "binaries" / "torch_table.json"
LIBRARIES = ("libtorch_cpu.so", "libtorch_cuda.so", "libtorch_xpu.so")
INTERFACE = "_inductor/codegen/aoti_runtime/interface.cpp"
DEFINITION = re.compile(r"^AOTIRuntimeError\s+(AOTInductor\w+)\s*\(", re.M)
SHIM_DIR = "torch/csrc/inductor/aoti_torch"
# The C shim headers whose functions libtorch_cpu.so / libtorch_cuda.so of an x86 CUDA wheel
# define. Not shim_mps.h, shim_xpu.h, c_shim_mps.h, c_shim_xpu.h: other builds' backends (the
# installed 2.13 headers declare 229 such names, none exported by the cu130 wheel).
SHIM_HEADERS = re.compile(r"^(c/shim(_\w+)?\.h|generated/c_shim_\w+\.h)$")
OTHER_BACKENDS = re.compile(r"_(mps|xpu)\.h$")
EXPORT_DECL = re.compile(r"\bAOTI_TORCH_EXPORT\b[^;{}()]*?\b(aoti_\w+)\s*\(")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def release_of(version: str) -> str:
    major, minor = version.split("+")[0].split(".")[:2]
    return f"{major}.{minor}"


def read_wheel(path: Path) -> dict:
    with zipfile.ZipFile(path) as zf, tempfile.TemporaryDirectory(prefix="torch-table-") as tmp:
        names = set(zf.namelist())
        version = re.search(
            r"__version__\s*=\s*'([^']+)'", zf.read("torch/version.py").decode()
        ).group(1)
        interface = zf.read(f"torch/{INTERFACE}").decode()
        shim: set[str] = set()
        libs = []
        for lib in LIBRARIES:
            member = f"torch/lib/{lib}"
            if member not in names:
                continue
            target = Path(tmp) / lib
            with zf.open(member) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 24)
            shim |= exports(target)
            libs.append(lib)
            target.unlink()
    return entry(version, path.name, libs, shim, interface)


def read_installed(folder: Path) -> dict:
    version = re.search(r"__version__\s*=\s*'([^']+)'", (folder / "version.py").read_text()).group(
        1
    )
    shim: set[str] = set()
    libs = []
    for lib in LIBRARIES:
        if (folder / "lib" / lib).is_file():
            shim |= exports(folder / "lib" / lib)
            libs.append(lib)
    interface = (folder / INTERFACE).read_text()
    return entry(version, f"installed torch {version}", libs, shim, interface)


def read_sources(folder: Path, version: str) -> dict:
    """A release from its sources: a pytorch checkout, or an installed torch folder."""
    if (folder / SHIM_DIR).is_dir() and (folder / "torch" / INTERFACE).is_file():
        shim_dir, interface = folder / SHIM_DIR, folder / "torch" / INTERFACE
    elif (folder / "include" / SHIM_DIR).is_dir() and (folder / INTERFACE).is_file():
        shim_dir, interface = folder / "include" / SHIM_DIR, folder / INTERFACE
    else:
        raise SystemExit(
            f"{folder}: neither a pytorch checkout ({SHIM_DIR}/, torch/{INTERFACE}) "
            "nor an installed torch folder"
        )
    headers = sorted(
        rel
        for rel in (p.relative_to(shim_dir).as_posix() for p in shim_dir.rglob("*.h"))
        if SHIM_HEADERS.match(rel) and not OTHER_BACKENDS.search(rel)
    )
    shim = set()
    for rel in headers:
        shim |= declared((shim_dir / rel).read_text(encoding="utf-8"))
    got = entry(version, f"sources {folder.name}", [], shim, interface.read_text(encoding="utf-8"))
    got["source"] = (
        f"torch {version} sources ({folder.name}): AOTI_TORCH_EXPORT declarations of "
        f"{SHIM_DIR}/{{{', '.join(headers)}}}; torch/{INTERFACE}"
    )
    got["cuda"] = any("cuda" in h for h in headers)
    got["derived"] = "sources"
    return got


def declared(header: str) -> set[str]:
    """The `aoti_*` functions a header declares AOTI_TORCH_EXPORT (any #if branch)."""
    return set(EXPORT_DECL.findall(COMMENT.sub(" ", header)))


def exports(library: Path) -> set[str]:
    with open_file(library) as src:
        symbols = ElfFile(src).dynamic_symbols()
    return {s.name for s in symbols if s.defined and s.name.startswith("aoti_")}


def entry(version: str, source: str, libs: list[str], shim: set[str], interface: str) -> dict:
    points = sorted(set(DEFINITION.findall(interface)))
    if not shim or not points:
        raise SystemExit(f"{source}: no shim exports or no entry points found")
    return {
        "version": version,
        "source": f"{source}: {', '.join(libs)} exports; torch/{INTERFACE}",
        "cuda": "libtorch_cuda.so" in libs,
        "shim": sorted(shim),
        "entry_points": points,
    }


def to_table(releases: dict[str, dict]) -> dict:
    order = sorted(releases, key=lambda r: tuple(int(x) for x in r.split(".")))
    shim: dict[str, list[str]] = {}
    points: dict[str, list[str]] = {}
    for rel in order:
        for name in releases[rel]["shim"]:
            shim.setdefault(name, []).append(rel)
        for name in releases[rel]["entry_points"]:
            points.setdefault(name, []).append(rel)
    return {
        "schema_version": 1,
        "generated_by": "scripts/build_torch_table.py",
        "releases": {
            rel: {
                k: releases[rel][k]
                for k in ("version", "source", "cuda", "derived")
                if k in releases[rel]
            }
            for rel in order
        },
        "entry_points": dict(sorted(points.items())),
        "shim": dict(sorted(shim.items())),
    }


def from_table(table: dict) -> dict[str, dict]:
    out = {}
    for rel, meta in table.get("releases", {}).items():
        out[rel] = {
            **meta,
            "shim": [n for n, rels in table["shim"].items() if rel in rels],
            "entry_points": [n for n, rels in table["entry_points"].items() if rel in rels],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheels", nargs="*", type=Path, help="torch wheels or torch folders")
    parser.add_argument(
        "--sources",
        type=Path,
        help="read one release from its sources (a pytorch checkout or a torch folder)",
    )
    parser.add_argument("--version", help="the release --sources holds, e.g. 2.15.0")
    parser.add_argument("--check", action="store_true", help="compare with the table only")
    parser.add_argument("--output", type=Path, default=TABLE)
    args = parser.parse_args(argv)
    if bool(args.sources) != bool(args.version):
        parser.error("--sources and --version go together")
    if not args.wheels and not args.sources:
        parser.error("give torch wheels or folders, or --sources DIR --version X.Y.Z")
    current = json.loads(args.output.read_text()) if args.output.is_file() else {}
    releases = from_table(current) if current else {}
    status = 0
    todo: list[tuple[Path, bool]] = [(w, False) for w in args.wheels]
    if args.sources:
        todo.append((args.sources, True))
    for src, from_sources in todo:
        if from_sources:
            got = read_sources(src, args.version)
        else:
            got = read_wheel(src) if src.is_file() else read_installed(src)
        rel = release_of(got["version"])
        print(
            f"{src.name}: torch {got['version']}: {len(got['shim'])} shim "
            f"{'declarations' if from_sources else 'exports'}, "
            f"{len(got['entry_points'])} entry points"
        )
        if args.check:
            known = releases.get(rel)
            if known is None:
                print(f"  torch {rel} is not in the table")
                status = 1
                continue
            for key in ("shim", "entry_points"):
                have, want = set(got[key]), set(known[key])
                if not got["cuda"] and known.get("cuda"):  # a CPU build of a CUDA release
                    want = {n for n in want if "_cuda" not in n}
                    have = {n for n in have if "_cuda" not in n}
                if have != want:
                    status = 1
                    print(
                        f"  {key}: {len(want - have)} in the table only, {len(have - want)} here only"
                    )
                    for name in sorted(want ^ have)[:20]:
                        print(f"    {'table' if name in want else 'here '}: {name}")
                else:
                    print(f"  {key}: the table agrees ({len(have)})")
            continue
        if rel in releases and releases[rel].get("derived") != "sources" and from_sources:
            print(f"  keeping the wheel-derived entry for torch {rel} (--check to compare)")
            continue
        if rel in releases and releases[rel].get("cuda") and not got["cuda"]:
            print(f"  keeping the CUDA build's entry for torch {rel} (this one has no CUDA)")
            continue
        releases[rel] = got
    if not args.check:
        args.output.write_text(json.dumps(to_table(releases), indent=1) + "\n")
        print(f"wrote {os.path.relpath(args.output)}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
