"""The doctor's torch-free probes: mount table, directories, libstdc++ files, native frames."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aotipre.doctor.dirs import mount_of, parse_mountinfo, probe_directory
from aotipre.doctor.frames import build_backtrace_helper, crash_site, native_frames
from aotipre.doctor.toolchain import inspect_library, version_key

MOUNTINFO = """\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
28 27 0:25 / /mnt/with\\040space ro,nosuid,nodev - tmpfs tmp ro,size=4k
29 27 0:26 / /scratch rw,nosuid,nodev,noexec,relatime shared:5 - tmpfs tmpfs rw
30 29 0:27 / /scratch/inner rw,relatime - tmpfs tmpfs rw
"""


def test_mountinfo_parsing_and_lookup() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    assert [m.mount_point for m in mounts] == ["/", "/mnt/with space", "/scratch", "/scratch/inner"]
    assert mount_of("/scratch/x/y", mounts).mount_point == "/scratch"  # type: ignore[union-attr]
    assert "noexec" in mount_of("/scratch/x", mounts).options  # type: ignore[union-attr]
    assert mount_of("/scratch/inner/z", mounts).mount_point == "/scratch/inner"  # type: ignore[union-attr]
    assert mount_of("/scratchy", mounts).mount_point == "/"  # type: ignore[union-attr]
    assert mount_of("/mnt/with space/a", mounts).fstype == "tmpfs"  # type: ignore[union-attr]


def test_probe_of_a_missing_directory_uses_its_parent(tmp_path: Path) -> None:
    probe = probe_directory(str(tmp_path / "a" / "b"), "cache", needs_exec=True, mountinfo=None)
    assert not probe.exists and probe.probed == str(tmp_path)
    assert probe.writable and probe.executable and probe.free_bytes
    assert not list(tmp_path.iterdir())  # the probe leaves nothing behind


@pytest.fixture
def noexec_mount(tmp_path: Path) -> Iterator[Path]:
    """A real tmpfs mounted noexec (needs root with CAP_SYS_ADMIN; skipped otherwise)."""
    target = tmp_path / "noexec"
    target.mkdir()
    mount = shutil.which("mount")
    if mount is None or os.geteuid() != 0:
        pytest.skip("mounting needs root and mount(8)")
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", "noexec,size=1m", "tmpfs", str(target)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.decode().strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=False)


def test_a_real_noexec_mount_is_detected(noexec_mount: Path) -> None:
    probe = probe_directory(str(noexec_mount), "package extraction (TMPDIR)", needs_exec=True)
    assert probe.writable and probe.executable is False and probe.noexec
    assert probe.mount_point == str(noexec_mount)
    # the empirical probe alone sees it too (no mount table)
    blind = probe_directory(str(noexec_mount), "x", needs_exec=True, mountinfo=None)
    assert blind.executable is False and "does not run" in (blind.error or "")


def test_libstdcxx_versions_from_the_file(tmp_path: Path) -> None:
    lib = tmp_path / "libstdc++.so.6.0.33"
    lib.write_bytes(b"x\x00GLIBCXX_3.4.9\x00GLIBCXX_3.4.33\x00GLIBCXX_3.4.4\x00CXXABI_1.3.15\x00")
    link = tmp_path / "libstdc++.so.6"
    link.symlink_to(lib.name)
    info = inspect_library(str(link))
    assert (info.so_version, info.glibcxx, info.cxxabi) == ("6.0.33", "3.4.33", "1.3.15")
    assert info.real_path == str(lib)
    assert inspect_library(str(tmp_path / "missing.so")).error
    assert version_key("3.4.10") > version_key("3.4.9") > version_key(None)


def test_frames_from_gdb_c10_and_python314_logs() -> None:
    gdb = (
        "#0  0x00007f1 in std::__detail::_Scanner<char>::_M_scan_normal() () from /x/w.so\n"
        "#1  0x00007f2 in torch::aot_inductor::parse_device_str(std::string const&, int&, int&)"
        " () from /x/w.so\n"
    )
    site = crash_site(gdb)
    assert site is not None and site.frame_class == "std-regex"
    assert "called from torch::aot_inductor::parse_device_str" in site.description
    c10 = "frame #4: torch::inductor::AOTIModelPackageLoader::load_metadata() + 0x2a (0x7f in /t/libtorch_cpu.so)\n"
    assert crash_site(c10).frame_class == "aoti-runtime"  # type: ignore[union-attr]
    py314 = '  Binary file "/x/w.so", at _ZN5torch12aot_inductor16parse_device_strEv+0x1c [0x7f3]\n'
    assert crash_site(py314).frame_class == "aoti-device-parser"  # type: ignore[union-attr]
    python_only = (
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n"
        '  File "/t/package.py", line 9 in load_package\n'
    )
    only = crash_site(python_only)
    assert only is not None and only.frame_class is None
    assert "called from Python at /t/package.py:9 in load_package" in only.description
    assert crash_site("nothing here") is None


def _defines(obj: str, symbol: str) -> bool:
    """Whether `obj`'s own symbol table (what addr2line reads; gone when the file is stripped)
    names `symbol`, as `nm` (binutils, like addr2line) lists it."""
    nm = shutil.which("nm")
    if nm is None or not os.path.isfile(obj):
        return False
    out = subprocess.run([nm, obj], capture_output=True, text=True, check=False).stdout
    return any(line.split()[-1:] == [symbol] for line in out.splitlines())


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no cc")
def test_backtrace_helper_names_the_crashing_native_frame(tmp_path: Path) -> None:
    helper = build_backtrace_helper(shutil.which("g++"), str(tmp_path))
    assert helper is not None
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # ldd lists preloads too
    needed = subprocess.run(
        ["ldd", helper], capture_output=True, text=True, check=False, env=env
    ).stdout
    assert "libstdc++" not in needed  # preloading it must not change which libstdc++ is used
    crash = "import faulthandler, ctypes; faulthandler.enable(); ctypes.string_at(0)"
    proc = subprocess.run(
        [sys.executable, "-c", crash],
        env=dict(os.environ, LD_PRELOAD=helper),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == -11  # still dies by SIGSEGV
    frames = native_frames(proc.stderr)
    assert frames and "libc" in frames[0].object  # the faulting read, not the handler
    # ctypes' string_at (a hidden function) is named when addr2line can read it from the
    # object's symbol table: not from a stripped _ctypes module (Debian's and Ubuntu's Pythons)
    if shutil.which("addr2line") and any(_defines(f.object, "string_at") for f in frames[:3]):
        assert any("string_at" in f.symbol for f in frames[:3]), frames[:3]
    site = crash_site(proc.stderr)
    assert site is not None and "string_at" in " ".join(site.python)
    assert any("libgcc_s" in path for path in site.runtimes)  # mapped when it crashed


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no cc")
def test_the_first_handler_names_the_faulting_instruction(tmp_path: Path) -> None:
    """What the worker does in the doctor's re-run: faulthandler on, then the helper's
    faulting-instruction handler in front of it; the process still dies by SIGSEGV, with
    faulthandler's Python frames and the helper's block too."""
    helper = build_backtrace_helper(shutil.which("g++"), str(tmp_path))
    assert helper is not None
    crash = (
        "import faulthandler, ctypes; faulthandler.enable(); "
        "ctypes.CDLL(None).aotipre_backtrace_install(); ctypes.string_at(0)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", crash],
        env=dict(os.environ, LD_PRELOAD=helper),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == -11
    lines = proc.stderr.splitlines()
    assert lines.index("@@aotipre faulting instruction") < lines.index("@@aotipre native backtrace")
    frames = native_frames(proc.stderr)
    assert frames and "libc" in frames[0].object
    site = crash_site(proc.stderr)
    assert site is not None and "string_at" in " ".join(site.python)


def test_a_torch_2_14_crash_whose_unwinding_failed_is_still_named() -> None:
    """Real log (torch 2.14.1, the canary's parse_device_str patched to read address 0): the
    helper's backtrace() itself faulted, so only the faulting-instruction line names the frame."""
    log = (Path(__file__).parent / "data" / "doctor" / "torch214_canary_load_crash.log").read_text()
    assert "@@aotipre native backtrace" not in log
    site = crash_site(log)
    assert site is not None and site.frame_class == "aoti-device-parser"
    assert any("_load_aoti" in frame for frame in site.python)
