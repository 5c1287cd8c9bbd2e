"""A worker that misbehaves before it even speaks the protocol, then becomes fake_torch_worker.py.

`python hostile_worker.py JOB.json`, configured by `$AOTIPRE_HOSTILE` (JSON), applied in order:
- `pids`: a folder; the worker records its pid there (`worker-<pid>`), and the pid of every
  process it spawns (`grandchild-<pid>`), so a test can prove none outlives the run;
- `grandchild`: true -> starts `sleep 1000` in its own process group (an orphan if the group
  is not killed);
- `escapee`: true -> starts a grandchild that calls setsid() (it leaves the process group);
  `escapee_bare`: the same, and it also runs with an empty environment;
- `extract`: true -> creates an `aotinductor_*` folder with a file in $TMPDIR, as torch's loader
  does when it extracts a package (left behind if the worker is killed);
- `stdout_bytes`: N -> writes N bytes to stdout (in 1 MiB lines) before anything else;
- `no_result`: true -> exits 0 at once, without writing a result file;
- `garbage_result`: true -> writes a result file that is not JSON, then exits 0;
- `ignore_term`: true -> ignores SIGTERM (kept across the exec), as a process that cleans up
  for a while does: only the SIGKILL after the grace period ends it.
Then it execs fake_torch_worker.py (same pid, same process group), scripted as usual by
`$AOTIPRE_FAKE_SCRIPT`. Standard library only.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_torch_worker.py")
_LINE = b"y" * (1024 * 1024 - 1) + b"\n"


def _record(folder: str | None, kind: str, pid: int) -> None:
    if folder:
        open(os.path.join(folder, f"{kind}-{pid}"), "w").close()


def main(argv: list[str]) -> int:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    config = json.loads(os.environ.get("AOTIPRE_HOSTILE") or "{}")
    pids = config.get("pids")
    _record(pids, "worker", os.getpid())
    if config.get("grandchild"):
        sleeper = subprocess.Popen(["sleep", "1000"], stdout=subprocess.DEVNULL)
        _record(pids, "grandchild", sleeper.pid)
    for key, env in (("escapee", None), ("escapee_bare", {})):
        if config.get(key):
            code = "import os, time; os.setsid(); time.sleep(1000)"
            escapee = subprocess.Popen(
                [sys.executable, "-c", code], stdout=subprocess.DEVNULL, env=env
            )
            _record(pids, "escapee", escapee.pid)
    if config.get("extract"):
        import tempfile

        folder = tempfile.mkdtemp(prefix="aotinductor_")
        with open(os.path.join(folder, "model.wrapper.so"), "wb") as f:
            f.write(b"\x7fELF")
    left = int(config.get("stdout_bytes") or 0)
    out = sys.stdout.buffer
    while left > 0:
        chunk = _LINE if left >= len(_LINE) else _LINE[-left:]
        out.write(chunk)
        left -= len(chunk)
    out.flush()
    if config.get("no_result"):
        return 0
    if config.get("garbage_result"):
        with open(os.environ["AOTIPRE_RESULT_PATH"], "w") as f:
            f.write('{"protocol": 1, "steps": {"load": ')
        return 0
    if config.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.execv(sys.executable, [sys.executable, FAKE, *argv[1:]])
    return 70  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
