"""Containment of a worker's process tree: it dies with aotipre (PR_SET_PDEATHSIG), every
descendant is found and killed with it, even one that left its session (a token in the
environment, and the worker as subreaper of its descendants), and its temporary files live in a
folder of its own (TMPDIR) that is removed after it.

What remains (documented in RELIABILITY.md): a descendant that both leaves the session and
clears its environment, and whose parent chain up to the worker is gone, is found only while the
worker lives (it is a subreaper, so orphans stay its children). If aotipre itself is SIGKILLed,
the worker dies (PDEATHSIG) but its descendants and temporary folders are not cleaned.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal as _signal
import tempfile
import threading
from collections.abc import Callable, Mapping

from aotipre.foundation import tempdirs

TREE_ENV = "AOTIPRE_TREE"
"""Set in each child's environment to a token of its own: every descendant inherits it, so one
that left the process group (setsid) is still found and killed (`sweep_tree`)."""


def _load_prctl() -> Callable[..., int] | None:
    if not os.path.exists("/proc/self/status"):
        return None  # Linux only
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):
        return None
    return prctl


_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def child_setup(parent: int) -> Callable[[], None] | None:
    """What the child runs between fork and exec: die with the parent thread (SIGKILL), and
    adopt its own orphaned descendants. Only a pre-resolved C call and getppid: nothing that
    takes a lock another thread of the parent could hold at fork time."""
    prctl = _PRCTL
    if prctl is None:
        return None
    sigkill = int(_signal.SIGKILL)

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
        prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the death signal was armed
            os._exit(70)

    return setup


_token_count = 0
_token_lock = threading.Lock()


def new_token() -> str:
    global _token_count
    with _token_lock:
        _token_count += 1
        return f"{os.getpid()}-{_token_count}-{os.urandom(4).hex()}"


def _tree_members(root: int, token: str) -> set[int]:
    """Processes of `root`'s tree: its descendants by parent links (while it lives, it adopts
    orphans among them), and any process whose environment carries its token (one that left the
    session and lost its parent). Only processes this user may inspect are seen."""
    parents: dict[int, int] = {}
    marked: set[int] = set()
    needle = f"{TREE_ENV}={token}".encode()
    me = os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for entry in entries:
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid in (me, root):
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat_line = f.read()
            parents[pid] = int(stat_line[stat_line.rindex(b")") + 2 :].split()[1])
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read(1 << 20).split(b"\0"):
                    marked.add(pid)
        except (OSError, ValueError, IndexError):
            continue
    found = set(marked)
    frontier = [root, *marked]
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    while frontier:
        for kid in children.get(frontier.pop(), ()):
            if kid not in found:
                found.add(kid)
                frontier.append(kid)
    return found


def sweep_tree(root: int, token: str, rounds: int = 3) -> None:
    """SIGKILL every member of `root`'s tree but `root` itself (its group is signalled by the
    caller); a few rounds, for members that forked while being killed."""
    if not token:
        return
    for _ in range(rounds):
        members = _tree_members(root, token)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, _signal.SIGKILL)


USER_TMPDIR_ENV = "AOTIPRE_USER_TMPDIR"
"""The TMPDIR the child would have had (worker.host.users_tempdir compiles under it)."""


def private_tmp(env: dict[str, str]) -> str | None:
    """Point the child's TMPDIR, TMP and TEMP at a new folder; keep Inductor's cache, and its
    precompiled headers, where torch would put them for the original TMPDIR. Returns the folder
    (None if none could be made: the child then runs with the environment it was given)."""
    original = _tempdir_of(env)
    try:
        folder = tempdirs.make_dir("aotipre-worker-", dir=original)
    except OSError:
        return None
    user = re.sub(r'[\\/:*?"<>|]', "_", _username(env))
    users_inductor = os.path.join(original, f"torchinductor_{user}")
    if "TORCHINDUCTOR_CACHE_DIR" not in env:
        env["TORCHINDUCTOR_CACHE_DIR"] = users_inductor
    _share_headers(folder, users_inductor)
    env["TMPDIR"] = env["TMP"] = env["TEMP"] = folder
    env[USER_TMPDIR_ENV] = original
    return folder


def _share_headers(folder: str, users_inductor: str) -> None:
    """Inductor keeps its precompiled C++ headers under `<tempfile.gettempdir()>/torchinductor_
    <user>/precompiled_headers` whatever TORCHINDUCTOR_CACHE_DIR says (worker/host.py,
    users_tempdir): a link of that name in the private folder to the user's folder lets a child
    that compiles outside a worker (the minifier's repro.py, run again) reuse them as the user's
    own process does, instead of rebuilding them (two headers, ~10 s of g++ on a 2-core VM).
    Nothing when the user's folder does not exist yet (no compile has made headers to reuse);
    removing the private folder removes the link, never what it points to."""
    if not os.path.isdir(users_inductor):
        return
    with contextlib.suppress(OSError):
        os.symlink(users_inductor, os.path.join(folder, os.path.basename(users_inductor)))


def remove_private_tmp(folder: str | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _tempdir_of(env: Mapping[str, str]) -> str:
    """tempfile.gettempdir() as a process with `env` would compute it."""
    for var in ("TMPDIR", "TEMP", "TMP"):
        value = env.get(var)
        if value and os.path.isdir(value) and os.access(value, os.W_OK | os.X_OK):
            return os.path.abspath(value)
    return tempfile.gettempdir()  # none set in `env`: the same fallbacks as this process


def _username(env: Mapping[str, str]) -> str:
    """getpass.getuser() as a process with `env` would compute it (torch's cache-dir naming)."""
    for var in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if env.get(var):
            return env[var]
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return f"uid_{os.getuid()}"
