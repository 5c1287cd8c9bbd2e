"""Native stack frames of a crash: a backtrace helper to preload, log parsing, frame classes."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aotipre.runner.classify import python_frames
from aotipre.runner.proc import run_process

# A crash in native code leaves only Python frames in faulthandler's dump (before Python 3.14).
# To name the crashing C++ function, `aotipre doctor` re-runs a crashing canary load with a tiny
# helper preloaded: a C (not C++) shared library, so preloading it does not pull in any libstdc++
# and cannot hide a libstdc++ mismatch. Its constructor installs handlers for fatal signals that
# print `backtrace_symbols_fd()` lines between two markers, then re-raise with the default
# action, so the process still dies by the same signal. faulthandler (enabled later by the
# worker) chains to it: it dumps the Python frames, restores this handler and re-raises.
#
# By then the signal comes from faulthandler's raise(), and unwinding from there to the crash
# can itself crash (seen with torch 2.14.1's packages: backtrace() faults, nothing is printed).
# So the worker, once faulthandler is on, calls `aotipre_backtrace_install()`: a first handler
# that prints the faulting instruction from the signal's own context (one frame, no unwinding),
# puts faulthandler's handler back and returns; the faulting instruction runs again and faults
# into faulthandler, then into the backtrace above, as before.

BACKTRACE_HELPER_SOURCE = r"""
#define _GNU_SOURCE
#include <execinfo.h>
#include <ucontext.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void aotipre_say(const char *text) {
  ssize_t ignored = write(2, text, strlen(text));
  (void)ignored;
}

/* The C++ runtime libraries mapped at the time of the crash (two libstdc++ copies is a finding) */
static void aotipre_runtimes(void) {
  char buf[4096], line[1024];
  size_t len = 0;
  ssize_t n, i;
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    for (i = 0; i < n; i++) {
      if (len < sizeof line - 1) line[len++] = buf[i];
      if (buf[i] != '\n') continue;
      line[len] = 0;
      if (strstr(line, "libstdc++") || strstr(line, "libgcc_s") || strstr(line, "libc++.so")) {
        aotipre_say("@@aotipre mapped ");
        aotipre_say(line);
      }
      len = 0;
    }
  }
  close(fd);
}

static void aotipre_backtrace(int sig) {
  void *frames[64];
  int n = backtrace(frames, 64);
  aotipre_say("\n@@aotipre native backtrace\n");
  backtrace_symbols_fd(frames, n, 2);
  aotipre_runtimes();
  aotipre_say("@@aotipre end of native backtrace\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

static struct sigaction aotipre_previous[32];

static void aotipre_first(int sig, siginfo_t *info, void *context) {
  (void)info;
#if defined(__x86_64__)
  {
    void *pc = (void *)((ucontext_t *)context)->uc_mcontext.gregs[REG_RIP];
    aotipre_say("\n@@aotipre faulting instruction\n");
    backtrace_symbols_fd(&pc, 1, 2);
    aotipre_runtimes();
  }
#else
  (void)context;
#endif
  sigaction(sig, &aotipre_previous[sig], 0);
}

/* Called by the worker after faulthandler.enable(): a first, one-shot handler in front of it */
void aotipre_backtrace_install(void) {
  struct sigaction sa;
  int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
  unsigned i;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = aotipre_first;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, &aotipre_previous[sigs[i]]);
}

__attribute__((constructor)) static void aotipre_backtrace_init(void) {
  void *warm[2];
  struct sigaction sa;
  int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  unsigned i;
  backtrace(warm, 2); /* load libgcc_s now, not inside the handler */
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = aotipre_backtrace;
  sa.sa_flags = SA_NODEFER | SA_RESETHAND;
  for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, 0);
}
"""
BEGIN = "@@aotipre native backtrace"
FAULTING = "@@aotipre faulting instruction"
"""Printed by the helper's first handler, followed by one backtrace_symbols line: the faulting
instruction, read from the signal's context (it survives when unwinding does not)."""
MAPPED = "@@aotipre mapped "
END = "@@aotipre end of native backtrace"
_BUILD_TIMEOUT_S = 60.0

# `/path/libx.so(_ZN3fooEv+0x1c) [0x7f..]`, `/path/libx.so(+0x1c) [0x7f..]` (backtrace_symbols)
_GLIBC_FRAME = re.compile(
    r"^(?P<object>[^\s(]+)\((?P<symbol>[^+)]*)(?:\+(?P<offset>0x[0-9a-fA-F]+))?\)\s*"
    r"\[(?P<address>0x[0-9a-fA-F]+)\]"
)
# gdb: `#3  0x00007f.. in torch::aot_inductor::parse_device_str(...) () from /path/x.so`
_GDB_FRAME = re.compile(
    r"^#\d+\s+(?:0x[0-9a-fA-F]+\s+in\s+)?(?P<symbol>[^\s(][^(]*?(?:\([^)]*\))?)\s*(?:\(\))?"
    r"(?:\s+(?:from|at)\s+(?P<object>\S+))?\s*$"
)
# faulthandler (Python >= 3.14): `  Binary file "/path/x.so", at _ZN3fooEv+0x1c [0x7f..]`
_PY_C_FRAME = re.compile(
    r'^\s*Binary file "(?P<object>[^"]+)"(?:, at (?P<symbol>[^+\s]+)(?:\+(?P<offset>0x[0-9a-fA-F]+))?)?'
)
# libc10's own backtrace in a c10::Error: `frame #3: torch::aot_inductor::... + 0x1c (0x7f.. in /path)`
_C10_FRAME = re.compile(
    r"^frame #\d+: (?P<symbol>.+?) \+ 0x[0-9a-fA-F]+ \(0x[0-9a-fA-F]+ in (?P<object>[^)]+)\)"
)

FRAME_CLASSES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "aoti-device-parser",
        re.compile(r"parse_device_str"),
        "torch::aot_inductor::parse_device_str (the AOTI model's device-string parser, which "
        "runs std::regex compiled into the model .so)",
    ),
    (
        "std-regex",
        re.compile(
            r"std::__detail::_(?:Scanner|Compiler|Executor|NFA|StateSeq|BracketMatcher)"
            r"|std::(?:__cxx11::)?(?:basic_regex|regex_traits)|_ZNSt8__detail\d*_(?:Scanner|Compiler|Executor)"
            r"|_ZNSt7__cxx1111basic_regex|_ZNSt7__cxx1112regex_traits"
        ),
        "std::regex internals (libstdc++ template code instantiated in more than one library)",
    ),
    (
        "libstdcxx-locale",
        re.compile(r"std::locale|std::ctype|std::(?:__cxx11::)?collate|_ZNSt6locale|_ZNKSt5ctype"),
        "libstdc++ locale facets (std::locale, std::ctype)",
    ),
    (
        "aoti-runtime",
        re.compile(
            r"torch::aot_inductor::|AOTIModelPackageLoader|AOTIModelContainerRunner"
            r"|AOTInductorModel|_ZN5torch12aot_inductor"
        ),
        "the AOTI runtime (model container or package loader)",
    ),
    (
        "dynamic-loader",
        re.compile(r"\b_dl_\w+|\bdlopen|\bdl_open_worker|ld-linux"),
        "the dynamic loader (dlopen of the model .so)",
    ),
    ("cuda-driver", re.compile(r"libcuda\.so|\bcu[A-Z]\w+"), "the CUDA driver"),
)


@dataclass(frozen=True)
class Frame:
    """One native frame: the function (demangled when possible) and the object it is in."""

    symbol: str
    object: str

    def __str__(self) -> str:
        where = os.path.basename(self.object) if self.object else "?"
        return f"{short_symbol(self.symbol) or '??'} in {where}"


def short_symbol(symbol: str, limit: int = 60) -> str:
    """A demangled name without its parameter list when it is long: `ns::f(...)`."""
    if len(symbol) <= limit or not symbol.endswith(")"):
        return symbol
    depth = 0
    for i in range(len(symbol) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(symbol[i], 0)
        if depth == 0:
            return symbol[:i] + "(...)"
    return symbol


@dataclass(frozen=True)
class CrashSite:
    """Where a crash happened, as far as the log tells."""

    frame_class: str | None
    """A FRAME_CLASSES id (`std-regex`, `aoti-device-parser`, ...), or None when no frame matched."""
    description: str
    """The class in words, or the best frame we have."""
    frame: str | None
    """The frame that matched, demangled."""
    frames: tuple[str, ...] = ()
    """The first native frames after the signal handler, demangled."""
    python: tuple[str, ...] = field(default=())
    """The Python frames of the crashing thread (faulthandler)."""
    runtimes: tuple[str, ...] = ()
    """The C++ runtime libraries (libstdc++, libgcc_s) mapped when it crashed (the helper)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "frame_class": self.frame_class,
            "description": self.description,
            "frame": self.frame,
            "frames": list(self.frames),
            "python": list(self.python),
            "runtimes": list(self.runtimes),
        }


def build_backtrace_helper(compiler: str | None, directory: str) -> str | None:
    """Compile the helper into `directory`; its path, or None when no C compiler builds it.

    A C compiler next to the C++ one is preferred (`gcc` for `g++`); the C++ driver works too, with
    `-x c` and `--as-needed` so that libstdc++ is not recorded as needed.
    """
    source = os.path.join(directory, "aotipre_backtrace.c")
    target = os.path.join(directory, "libaotipre_backtrace.so")
    with open(source, "w") as f:
        f.write(BACKTRACE_HELPER_SOURCE)
    for cc in _c_compilers(compiler):
        outcome = run_process(
            [cc, "-x", "c", "-O1", "-shared", "-fPIC", source, "-o", target, "-Wl,--as-needed"],
            timeout_s=_BUILD_TIMEOUT_S,
            cwd=directory,
        )
        if outcome.ok and os.path.isfile(target):
            return target
    return None


def _c_compilers(compiler: str | None) -> list[str]:
    names: list[str] = []
    if compiler:
        base = os.path.basename(compiler)
        for cxx, cc in (("g++", "gcc"), ("clang++", "clang"), ("c++", "cc")):
            if cxx in base:
                names.append(os.path.join(os.path.dirname(compiler), base.replace(cxx, cc)))
    names += ["cc", "gcc"]
    if compiler:
        names.append(compiler)
    found: list[str] = []
    for name in names:
        exe = shutil.which(name)
        if exe is not None and exe not in found:
            found.append(exe)
    return found


def native_frames(log: str) -> list[Frame]:
    """Native frames in a log, in the order printed (most recent call first).

    Understands the helper's block (glibc backtrace_symbols), gdb `bt`, faulthandler's C stack
    (Python >= 3.14) and c10's `frame #N:` lines. Within the helper's block, the frames of the
    handler itself and of the signal trampoline are dropped.
    """
    lines = log.splitlines()
    frames: list[Frame] = []
    faulting = _faulting_line(lines)
    if BEGIN in log:
        lines = _after_handler(_first_block(log))
    elif faulting:
        lines = []
    if faulting and not (lines and _same_frame(lines[0], faulting)):
        lines = [faulting, *lines]
    for line in lines:
        text = line.strip()
        m = _GLIBC_FRAME.match(text) or _PY_C_FRAME.match(text) or _C10_FRAME.match(text)
        if m is None and text.startswith("#"):
            m = _GDB_FRAME.match(text)
        if m is None:
            continue
        symbol = (m.groupdict().get("symbol") or "").strip()
        obj = (m.groupdict().get("object") or "").strip()
        offset = m.groupdict().get("offset")
        if not symbol and offset and obj:
            symbol = f"+{offset}"
        frames.append(Frame(symbol, obj))
    return _demangle(_symbolize(frames))


def _faulting_line(lines: list[str]) -> str | None:
    for i, line in enumerate(lines[:-1]):
        if line.strip() == FAULTING:
            return lines[i + 1].strip()
    return None


def _same_frame(a: str, b: str) -> bool:
    """Two backtrace_symbols lines of one address (the unwound crash frame may report the
    return address's symbol the same way)."""
    return a.strip().split("[")[-1] == b.strip().split("[")[-1]


def _first_block(log: str) -> list[str]:
    """The lines of the helper's first block (the first fatal signal is the crash)."""
    block: list[str] = []
    inside = False
    for line in log.splitlines():
        if line.startswith(BEGIN) and not inside:
            inside = True
        elif line.startswith(END) and inside:
            break
        elif inside:
            block.append(line)
    return block


def _after_handler(block: list[str]) -> list[str]:
    """The frames of the interrupted code: after the helper's own frames comes the signal
    trampoline that called it; the frames after that trampoline's last appearance (faulthandler
    re-raises from inside its own handler, so it can appear twice) are where the crash happened."""
    lines = [line.strip() for line in block if line.strip()]
    first = next((i for i, ln in enumerate(lines) if "libaotipre_backtrace" not in ln), None)
    if first is None:
        return []
    trampoline = lines[first]
    last = max(i for i, ln in enumerate(lines) if ln == trampoline)
    return lines[last + 1 :]


def classify_frames(frames: Sequence[Frame], log: str = "") -> CrashSite | None:
    """The crash site: the first frame (most recent first) of a known class, else the first."""
    python = tuple(python_frames(log))
    shown = tuple(str(f) for f in frames[:12])
    for i, frame in enumerate(frames):
        class_id = _frame_class(frame)
        if class_id is None:
            continue
        description = next(d for c, _, d in FRAME_CLASSES if c == class_id)
        caller = next(
            (
                f
                for f in frames[i + 1 : i + 24]
                if _frame_class(f) in ("aoti-device-parser", "aoti-runtime")
                and _frame_class(f) != class_id
            ),
            None,
        )
        if caller is not None:
            description += f", called from {short_symbol(caller.symbol)}"
        return CrashSite(class_id, description, str(frame), shown, python)
    named = next((f for f in frames if f.symbol and not f.symbol.startswith("+")), None)
    if named is not None:
        return CrashSite(None, "native code of no known class", str(named), shown, python)
    if python:
        return CrashSite(
            None, f"native code called from Python at {python[0]}", None, shown, python
        )
    return None


def _frame_class(frame: Frame) -> str | None:
    text = f"{frame.symbol} {frame.object}"
    for class_id, pattern, _ in FRAME_CLASSES:
        if pattern.search(text):
            return class_id
    return None


def crash_site(log: str) -> CrashSite | None:
    """classify_frames(native_frames(log), log) with the mapped runtimes, or None when the log
    names nothing."""
    site = classify_frames(native_frames(log), log)
    if site is None:
        return None
    return dataclasses.replace(site, runtimes=mapped_runtimes(log))


def mapped_runtimes(log: str) -> tuple[str, ...]:
    """The distinct library paths of the helper's `@@aotipre mapped <maps line>` lines (of its
    backtrace block, else those its faulting-instruction handler printed)."""
    found: list[str] = []
    lines = _first_block(log) or log.splitlines()  # unwinding can fail: the first handler's
    for line in lines:
        if line.startswith(MAPPED):
            fields = line[len(MAPPED) :].split(None, 5)
            path = fields[5].strip() if len(fields) == 6 else ""
            if path and path not in found:
                found.append(path)
    return tuple(found)


def libstdcxx_copies(site: CrashSite) -> list[str]:
    """The distinct libstdc++ files (by real path) among the runtimes mapped at the crash."""
    copies: list[str] = []
    for path in site.runtimes:
        if "libstdc++" in os.path.basename(path):
            real = os.path.realpath(path)
            if real not in copies:
                copies.append(real)
    return copies


def _symbolize(frames: list[Frame]) -> list[Frame]:
    """Name offset-only frames (hidden functions) from the object's symbol table with addr2line,
    when binutils is installed and the object still exists; the first 16 frames only."""
    tool = shutil.which("addr2line")
    if tool is None:
        return frames
    wanted: dict[str, list[str]] = {}
    for f in frames[:16]:
        if f.symbol.startswith("+0x") and os.path.isfile(f.object):
            wanted.setdefault(f.object, []).append(f.symbol[1:])
    names: dict[tuple[str, str], str] = {}
    for obj, offsets in wanted.items():
        out = run_process([tool, "-f", "-C", "-e", obj, *offsets], timeout_s=10.0)
        lines = out.stdout_tail.splitlines() if out.ok else []
        for offset, name in zip(offsets, lines[0::2]):
            if name.strip() and name.strip() != "??":
                names[(obj, offset)] = name.strip()
    if not names:
        return frames
    return [
        Frame(names.get((f.object, f.symbol[1:]), f.symbol), f.object)
        if f.symbol.startswith("+0x")
        else f
        for f in frames
    ]


def _demangle(frames: list[Frame]) -> list[Frame]:
    """Demangle `_Z...` names with c++filt when it is installed (binutils); else keep them."""
    mangled = sorted({f.symbol for f in frames if f.symbol.startswith("_Z")})[:64]
    tool = shutil.which("c++filt")
    if not mangled or tool is None:
        return frames
    out = run_process([tool, *mangled], timeout_s=10.0)
    if not out.ok:
        return frames
    names = out.stdout_tail.splitlines()
    if len(names) != len(mangled):
        return frames
    table = dict(zip(mangled, names))
    return [Frame(table.get(f.symbol, f.symbol), f.object) for f in frames]
