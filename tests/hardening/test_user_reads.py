"""Issue #30 (P1.2): every read of a user-named file goes through the safe readers.

`aotipre.foundation.safeio.read_text` / `require_file` (text: a regular file, bounded, never blocking on a
FIFO, strict UTF-8, one line naming the file) and `aotipre.binaries.source.open_file`
(binaries). An AST scan of aotipre/ fails on any new plain `open()`, `io.open`, `os.open` or
`.read_text()` / `.read_bytes()` / `.open()` that is not in ALLOWED with its reason. Then the
cases that used to hang or print a traceback: a `--target libtorch=` folder whose version file
is a FIFO, not UTF-8, a directory or a link loop; `image=` links that point at this host's
files or out of the image."""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.environment.host import parse_target
from aotipre.foundation.errors import UsageError
from aotipre.foundation.safeio import read_text, require_file

PACKAGE = Path(__file__).resolve().parents[2] / "aotipre"
OUT_OF_SCOPE = ("aotipre/runner/worker/",)
"""The worker opens the files its job names (aotipre wrote the job); it is checked there."""
SAFE_RECEIVERS = frozenset(
    {"safeio", "archive", "self.archive", "pkg.archive", "ep.archive", "zf", "self.zf", "self._zf"}
)
"""`X.read_text()` / `X.open()` on these is the safe reader itself, an Archive (members read
bounded), or a zipfile member."""

ALLOWED: dict[tuple[str, str], str] = {
    # the safe readers and writers themselves
    ("aotipre.foundation.safeio", "read_text"): "the safe text reader (O_NONBLOCK, fstat, bounded)",
    (
        "aotipre.foundation.safeio",
        "_write_in_place",
    ): "opens a special output without O_CREAT/O_TRUNC",
    ("aotipre.foundation.safeio", "ensure_std_fds"): "/dev/null and descriptors 1 and 2",
    ("aotipre.foundation.safeio", "_silence"): "/dev/null",
    ("aotipre.binaries.source", "open_file"): "the safe binary reader (O_NONBLOCK, fstat)",
    ("aotipre.inputs.weights", "_open"): "--weights: O_NONBLOCK, fstat regular, as safeio",
    ("aotipre.pt2.archive", "_open_regular"): "the package reader: O_NONBLOCK, fstat regular",
    ("aotipre.pt2.archive", "FolderArchive.read"): "folder member, walked: regular, no link",
    ("aotipre.pt2.archive", "FolderArchive.chunks"): "folder member, walked: regular, no link",
    ("aotipre.pt2.archive", "FolderArchive.crc_ok"): "folder member, walked: regular, no link",
    ("aotipre.inputs.load", "_open"): "--inputs: O_NONBLOCK, fstat regular, as safeio",
    (
        "aotipre.fleet.engines.ray",
        "_started_with",
    ): "/proc/self/environ: the kernel's, not the user's",
    # user-named, read again after the safe open above checked them
    ("aotipre.inputs.values", "_storage_bytes"): "--inputs again, after load_sample_inputs",
    ("aotipre.runner.stages.compile", "_inputs_digest"): "--inputs, after load_sample_inputs",
    # aotipre's package data, the kernel's and the system's files
    ("aotipre.binaries.versions", "load_table"): "torch_table.json shipped in aotipre",
    ("aotipre.environment.host", "_local_flags"): "/proc/cpuinfo",
    ("aotipre.environment.host", "_local_driver"): "/proc/driver/nvidia/version",
    ("aotipre.doctor.canary", "_machine_id"): "/etc/machine-id",
    ("aotipre.doctor.dirs", "probe_directory"): "the mount table (/proc/self/mountinfo)",
    ("aotipre.runner.contain", "_tree_members"): "/proc/PID/stat and environ",
    ("aotipre.foundation.tempdirs", "_read_small"): "/proc/PID/stat and the boot id (bounded)",
    ("aotipre.doctor.toolchain", "inspect_library"): "the libstdc++ the compiler or torch names",
    ("aotipre.report.github", "append_step_summary"): "$GITHUB_STEP_SUMMARY (the CI's file)",
    # files aotipre wrote itself: its work folders and its caches
    ("aotipre.doctor.canary", "run_worker_job"): "a worker's step log in aotipre's work folder",
    ("aotipre.doctor.canary", "compiled_canary"): "a compile-cache entry aotipre wrote",
    ("aotipre.doctor.canary", "cached_result"): "a canary result aotipre cached",
    ("aotipre.doctor.canary", "store_result"): "writes aotipre's canary cache (then renames)",
    ("aotipre.doctor.frames", "build_backtrace_helper"): "writes C source in its temp folder",
    ("aotipre.doctor.toolchain", "probe_compiler"): "writes C++ source in its temp folder",
    ("aotipre.runner.loadcost", "_cpu_identity"): "/proc/cpuinfo (bounded)",
    ("aotipre.runner.loadcost", "read"): "a probe record aotipre cached (trust-checked, bounded)",
    ("aotipre.runner.loadcost", "write"): "writes a probe record (O_EXCL|O_NOFOLLOW, 0600)",
    ("aotipre.runner.cache", "file_sha256"): "a package already opened by the package reader",
    ("aotipre.runner.cache", "write_manifest"): "writes a cache manifest (O_NOFOLLOW, 0600)",
    ("aotipre.runner.cache", "verify_entry"): "a cache manifest aotipre wrote (bounded)",
    ("aotipre.runner.cache", "entry_problem"): "a cache record aotipre wrote, path-checked",
    ("aotipre.runner.cache", "CompileCache.commit"): "writes a cache record (O_NOFOLLOW, 0600)",
    (
        "aotipre.runner.stages.shims",
        "cached_ops",
    ): "a cache record aotipre wrote, checked before the hit",
    ("aotipre.cpp.harness", "_identity"): "a build record aotipre wrote in its cache (bounded)",
    ("aotipre.runner.launch", "run_job_file"): "writes a job file in aotipre's work folder",
    ("aotipre.runner.prewarm", "Prewarmed.hand"): "writes a job file in its private folder",
    ("aotipre.triage.accuracy", "_Triage._inputs"): "writes the archive's sample inputs in "
    "accuracy triage's private folder",
    (
        "aotipre.foundation.tempdirs",
        "_write_record",
    ): "writes an owner record (O_EXCL|O_NOFOLLOW, 0600)",
    (
        "aotipre.foundation.tempdirs",
        "_read_record",
    ): "an owner record: O_NOFOLLOW, fstat regular, bounded",
    (
        "aotipre.foundation.tempdirs",
        "_is_stale",
    ): "opens a temp folder (O_DIRECTORY|O_NOFOLLOW) to fstat it",
    ("aotipre.runner.proc", "_read_result"): "a worker's result file (size-bounded)",
    ("aotipre.runner.stages.compile_fault", "_read"): "a sanitizer log a worker wrote",
    ("aotipre.runner.stages.jobs", "died"): "a worker's step log in aotipre's work folder",
    ("aotipre.runner.stages.perf", "measure_baseline"): "writes inputs in its work folder",
    ("aotipre.triage.parsers", "read_lines"): "a worker's log",
    ("aotipre.triage.state", "TriageState._inputs"): "writes inputs in the triage work folder",
    ("aotipre.triage.state", "read_log"): "a worker's log",
    ("aotipre.program", "draft_report"): "the JSON its own forked draft_export worker wrote in "
    "aotipre's private folder (bounded: 1 MiB)",
    ("aotipre.program", "_in_forked_worker"): "/dev/null, and the forked worker's result JSON it "
    "writes in aotipre's private folder",
}


def plain_reads(path: Path, module: str) -> list[tuple[str, str, int]]:
    """(module, function, line) of each plain open or read call in `path`."""
    found: list[tuple[str, str, int]] = []
    scope: list[str] = []

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
            scope.append(node.name)
            self.generic_visit(node)
            scope.pop()

        visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

        def visit_ClassDef(self, node: ast.ClassDef) -> None:
            scope.append(node.name)
            self.generic_visit(node)
            scope.pop()

        def visit_Call(self, node: ast.Call) -> None:
            f = node.func
            plain = isinstance(f, ast.Name) and f.id == "open"
            if isinstance(f, ast.Attribute):
                receiver = ast.unparse(f.value)
                if f.attr == "open" and receiver in ("io", "os", "codecs", "builtins"):
                    plain = True
                elif f.attr in ("open", "read_text", "read_bytes") and receiver not in (
                    SAFE_RECEIVERS | {"io", "os", "codecs", "builtins"}
                ):
                    plain = True
            if plain:
                found.append((module, ".".join(scope) or "<module>", node.lineno))
            self.generic_visit(node)

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def scan() -> list[tuple[str, str, int]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith(OUT_OF_SCOPE):
            continue
        found += plain_reads(path, rel.removesuffix(".py").replace("/", "."))
    return found


def test_no_new_plain_read_of_a_file() -> None:
    new = [f"{m}:{line} in {fn}()" for m, fn, line in scan() if (m, fn) not in ALLOWED]
    assert not new, (
        "plain open()/read_text()/read_bytes() outside the safe readers: read a user-named "
        "file with aotipre.foundation.safeio.read_text / require_file (text) or binaries.source.open_file "
        "(binaries); add a file aotipre itself wrote to ALLOWED with its reason:\n  "
        + "\n  ".join(new)
    )


def test_every_allowed_read_still_exists() -> None:
    """The allow-list stays exact: an entry whose call is gone is removed."""
    seen = {(m, fn) for m, fn, _ in scan()}
    assert not sorted(set(ALLOWED) - seen)
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_scan_catches_each_form(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "import io, os\nfrom pathlib import Path\n"
        "def a(p):\n    return open(p).read()\n"
        "def b(p):\n    return Path(p).read_text()\n"
        "def c(p):\n    return p.read_bytes()\n"
        "class K:\n    def d(self, p):\n        return io.open(p)\n"
        "def e(p):\n    return os.open(p, 0)\n"
        "def f(p):\n    with Path(p).open() as fh:\n        return fh\n"
        "def ok(archive, safeio, p):\n    return archive.read_text(p), safeio.read_text(p, 's', 1)\n"
    )
    got = [fn for _, fn, _ in plain_reads(src, "m")]
    assert got == ["a", "b", "c", "K.d", "e", "f"]


# --- path probes: stat, is_dir, exists, resolve ---------------------------------------------

PROBES = frozenset({"stat", "lstat", "is_dir", "is_file", "exists", "is_symlink", "resolve"})
"""`Path` methods that raise on a path they cannot probe (Python 3.11: `is_dir`, `is_file`,
`exists` on ENAMETOOLONG or EACCES; `resolve` on a link loop; `stat` on anything); `os.stat`
and `os.lstat` likewise. `os.path.isdir` / `isfile` / `exists` never raise."""
NO_IO_RECEIVERS = frozenset({"os.path", "safeio", "info", "i"})
"""The safe probes (aotipre.foundation.safeio), os.path's, and zipfile ZipInfo (`info.is_dir()`)."""
DIR_ENTRIES = frozenset({"entry", "e"})
"""os.scandir entries: `entry.is_dir(follow_symlinks=False)` reads the listing's d_type."""

ALLOWED_PROBES: dict[tuple[str, str], str] = {
    ("aotipre.fleet.batch", "load_manifest"): "resolves the manifest read_toml has just read",
    ("aotipre.fleet.batch", "keep_shard"): "resolves the manifest load_manifest has read",
    ("aotipre.config", "load_config"): "resolves the config file read_toml has just read",
    ("aotipre.pt2.reader", "_read"): "the package the archive reader has opened",
    (
        "aotipre.runner.cache",
        "seal_files",
    ): "files a build wrote in aotipre's cache; raises OSError",
    ("aotipre.serving.pbtxt", "model_config_pb2"): "tritonclient's installed package folder",
}


def _guards(handler: ast.ExceptHandler, attr: str) -> bool:
    """Whether `handler` catches what probe `attr` raises (OSError; a loop's RuntimeError too
    for `resolve`)."""
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    names = {ast.unparse(k) for k in kinds}
    if names & {"Exception", "BaseException"}:
        return True
    return "OSError" in names and (attr != "resolve" or "RuntimeError" in names)


def unguarded_probes(path: Path, module: str) -> list[tuple[str, str, int]]:
    """(module, function, line) of each path probe in `path` that no enclosing `try` guards."""
    found: list[tuple[str, str, int]] = []
    scope: list[str] = []
    guards: list[list[ast.ExceptHandler]] = []

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
            scope.append(node.name)
            self.generic_visit(node)
            scope.pop()

        visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

        def visit_ClassDef(self, node: ast.ClassDef) -> None:
            scope.append(node.name)
            self.generic_visit(node)
            scope.pop()

        def visit_Try(self, node: ast.Try) -> None:
            guards.append(node.handlers)
            for statement in node.body:
                self.visit(statement)
            guards.pop()
            for other in (*node.handlers, *node.orelse, *node.finalbody):
                self.visit(other)

        def visit_Call(self, node: ast.Call) -> None:
            f = node.func
            if isinstance(f, ast.Attribute):
                receiver = ast.unparse(f.value)
                probe = (
                    f.attr in ("stat", "lstat")
                    if receiver == "os"
                    else f.attr in PROBES and receiver not in NO_IO_RECEIVERS
                )
                if receiver in DIR_ENTRIES and any(
                    k.arg == "follow_symlinks" and ast.unparse(k.value) == "False"
                    for k in node.keywords
                ):
                    probe = False
                if probe and not any(_guards(h, f.attr) for hs in guards for h in hs):
                    found.append((module, ".".join(scope) or "<module>", node.lineno))
            self.generic_visit(node)

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def probe_scan() -> list[tuple[str, str, int]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith(OUT_OF_SCOPE):
            continue
        found += unguarded_probes(path, rel.removesuffix(".py").replace("/", "."))
    return found


def test_no_new_unguarded_path_probe() -> None:
    new = [f"{m}:{line} in {fn}()" for m, fn, line in probe_scan() if (m, fn) not in ALLOWED_PROBES]
    assert not new, (
        "Path.stat/is_dir/is_file/exists/resolve or os.stat outside a try that catches OSError: "
        "probe a user-given path with aotipre.foundation.safeio.probe / is_dir / is_file / exists / "
        "resolved; add one on a path already opened, or aotipre's own, to ALLOWED_PROBES with "
        "its reason:\n  " + "\n  ".join(new)
    )


def test_every_allowed_probe_still_exists() -> None:
    seen = {(m, fn) for m, fn, _ in probe_scan()}
    assert not sorted(set(ALLOWED_PROBES) - seen)
    assert all(reason.strip() for reason in ALLOWED_PROBES.values())


def test_the_probe_scan_catches_each_form(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "import os\nfrom pathlib import Path\n"
        "def a(p):\n    return Path(p).is_dir()\n"
        "def b(p):\n    return p.exists()\n"
        "def c(p):\n    return os.stat(p)\n"
        "def d(p):\n    try:\n        return p.resolve()\n    except OSError:\n        pass\n"
        "def e(p):\n    try:\n        return p.stat()\n    except ValueError:\n        pass\n"
        "def ok(p, info, safeio):\n    try:\n        p.stat()\n    except OSError:\n        pass\n"
        "    return os.path.isdir(p), info.is_dir(), safeio.is_dir(p)\n"
        "def f(entry):\n    return entry.is_dir(follow_symlinks=False), entry.is_dir()\n"
    )
    assert [fn for _, fn, _ in unguarded_probes(src, "m")] == ["a", "b", "c", "d", "e", "f"]


@pytest.mark.parametrize("command", ["check", "inspect"])
def test_a_folder_package_at_the_path_length_limit_is_one_line(
    tmp_path: Path, command: str
) -> None:
    folder = tmp_path
    while len(str(folder)) < 4096 - 220:  # a folder whose members' paths exceed PATH_MAX
        folder /= "d" * 200
    folder /= "p" * (4090 - len(str(folder)))
    folder.mkdir(parents=True)
    args = [sys.executable, "-m", "aotipre", command, str(folder), "--no-config"]
    r = subprocess.run(
        [*args, *(["--static-only"] if command == "check" else [])],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.startswith("aotipre: error: ") and r.stderr.count("\n") == 1


# --- the safe reader's messages --------------------------------------------------------------


def test_no_such_file_is_said_only_of_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    expected = {
        "missing": "does not exist",
        "loop": "is a symbolic link loop",
        "dangling": "is a symbolic link to a file that does not exist",
        "dir": "is a directory",
        "fifo": "is not a regular file",
    }
    for name, says in expected.items():
        with pytest.raises(UsageError) as err:
            read_text(tmp_path / name, f"file {name}", 100)
        assert says in str(err.value) and "\n" not in str(err.value), (name, err.value)
        if name != "missing":
            assert "does not exist" not in str(err.value).replace(says, ""), name
    assert require_file(tmp_path / "dir", "d", folder_ok=True)


def test_the_bundle_package_message_names_a_link_loop(tmp_path: Path) -> None:
    from aotipre.pt2.bundle import write_bundle

    (tmp_path / "loop.pt2").symlink_to("loop.pt2")
    with pytest.raises(UsageError, match="is a symbolic link loop"):
        write_bundle(str(tmp_path / "loop.pt2"), str(tmp_path / "out.pt2"))


# --- --target libtorch=: the version files ------------------------------------------------


def _elf_library() -> Path | None:
    """A real shared library (its dynamic symbols are read): torch's libc10, else libm."""
    spec = importlib.util.find_spec("torch")
    candidates = []
    if spec is not None and spec.submodule_search_locations:
        candidates.append(Path(spec.submodule_search_locations[0]) / "lib" / "libc10.so")
    candidates += [Path("/lib/x86_64-linux-gnu/libm.so.6"), Path("/usr/lib64/libm.so.6")]
    return next((c for c in candidates if c.is_file()), None)


@pytest.fixture
def libtorch(tmp_path: Path) -> Path:
    lib = _elf_library()
    if lib is None:
        pytest.skip("no shared library to stand for libtorch_cpu.so")
    (tmp_path / "lt" / "lib").mkdir(parents=True)
    shutil.copyfile(lib, tmp_path / "lt" / "lib" / "libtorch_cpu.so")
    return tmp_path / "lt"


def _inspect(pkg: Callable[[str], Path], folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aotipre", "inspect", str(pkg("ep_only")), "--no-config",
         "--target", f"cpu,libtorch={folder}"],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _one_line(r: subprocess.CompletedProcess[str], says: str) -> None:
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("aotipre: error: ") and says in r.stderr, r.stderr


def test_a_fifo_version_file_is_one_line_not_a_hang(
    pkg: Callable[[str], Path], libtorch: Path
) -> None:
    os.mkfifo(libtorch / "build-version")
    _one_line(_inspect(pkg, libtorch), "build-version is not a regular file")


def test_a_non_utf8_version_file_is_one_line_not_a_traceback(
    pkg: Callable[[str], Path], libtorch: Path
) -> None:
    (libtorch / "version.txt").write_bytes(b"2.13\xff\xfe\n")
    _one_line(_inspect(pkg, libtorch), "version.txt is not UTF-8 text")


@pytest.mark.parametrize("kind", ["dir", "loop"])
def test_a_version_file_that_is_no_file_says_what_it_is(
    pkg: Callable[[str], Path], libtorch: Path, kind: str
) -> None:
    if kind == "dir":
        (libtorch / "version.py").mkdir()
        says = "version.py is a directory"
    else:
        (libtorch / "version.py").symlink_to("version.py")
        says = "version.py is a symbolic link loop"
    r = _inspect(pkg, libtorch)
    _one_line(r, says)
    assert "does not exist" not in r.stderr and "no such file" not in r.stderr.lower()


def test_a_readable_version_file_is_still_read(libtorch: Path) -> None:
    (libtorch / "version.py").write_text("__version__ = '2.99.1'\n")
    target = parse_target(f"cpu,libtorch={libtorch}")
    assert target.torch is not None and target.torch.version == "2.99.1"


# --- --target image=: links resolve inside the image -------------------------------------


LIBC = Path("/lib/x86_64-linux-gnu/libc.so.6")
CXX = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")


@pytest.fixture
def image(tmp_path: Path) -> Path:
    if not (LIBC.is_file() and CXX.is_file()):
        pytest.skip("needs the Debian library paths")
    root = tmp_path / "image"
    for folder in ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "opt"):
        (root / folder).mkdir(parents=True)
    return root


def test_an_absolute_link_reads_the_images_file(image: Path) -> None:
    shutil.copyfile(LIBC, image / "opt" / "libc.so.6")  # this host has no /opt/libc.so.6
    (image / "lib/x86_64-linux-gnu/libc.so.6").symlink_to("/opt/libc.so.6")
    target = parse_target(f"cpu,image={image}")
    assert target.glibc == os.confstr("CS_GNU_LIBC_VERSION").split()[1]  # type: ignore[union-attr]


def test_an_absolute_link_never_reads_this_hosts_file(image: Path) -> None:
    shutil.copyfile(LIBC, image / "lib/x86_64-linux-gnu/libc.so.6")
    # the host's libstdc++ is there; the image's link to it leads nowhere inside the image
    (image / "usr/lib/x86_64-linux-gnu/libstdc++.so.6").symlink_to(CXX.resolve())
    target = parse_target(f"cpu,image={image}")
    assert target.glibc is not None and target.glibcxx is None


def test_a_link_out_of_the_image_is_refused(image: Path) -> None:
    (image / "lib/x86_64-linux-gnu/libc.so.6").symlink_to("../../" * 8 + str(LIBC)[1:])
    with pytest.raises(UsageError, match="leads out of the image") as err:
        parse_target(f"cpu,image={image}")
    assert "\n" not in str(err.value)


def test_a_link_loop_in_the_image_is_one_line(image: Path) -> None:
    (image / "lib/x86_64-linux-gnu/libc.so.6").symlink_to("/lib/x86_64-linux-gnu/libc.so.6")
    with pytest.raises(UsageError, match="symbolic link loop"):
        parse_target(f"cpu,image={image}")


def test_a_torch_in_the_image_is_found_through_its_links(image: Path) -> None:
    lib = _elf_library()
    if lib is None:
        pytest.skip("no shared library to stand for libtorch_cpu.so")
    shutil.copyfile(LIBC, image / "lib/x86_64-linux-gnu/libc.so.6")
    real = image / "opt" / "torch"
    (real / "lib").mkdir(parents=True)
    shutil.copyfile(lib, real / "lib" / "libtorch_cpu.so")
    (real / "version.py").write_text("__version__ = '2.98.0'\n")
    site = image / "usr/local/lib/python3.11/site-packages"
    site.mkdir(parents=True)
    (site / "torch").symlink_to("/opt/torch")  # absolute: the image's /opt/torch
    target = parse_target(f"cpu,image={image}")
    assert target.torch is not None and target.torch.version == "2.98.0"
