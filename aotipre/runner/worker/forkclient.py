"""The process aotipre starts for a job that the fork server may run (runner/forkserver.py):
`python -I -S forkclient.py SOCKET JOB.json WORKER_ARGV...`.

It hands its job, environment, folder and stdio to the server (zygote.py), which forks the
worker, and then stands for that worker towards aotipre's process runner: SIGTERM, SIGINT and
SIGHUP are passed on to the worker's process group, and it ends as the worker ended (its exit
code, or the same signal). If it is killed, the server kills the worker. When the server cannot
take the job (no server, another environment), it execs WORKER_ARGV: the fresh worker aotipre
would have started. Standard library only, and no import of the worker package.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

_LOST = 75
"""The exit code when the server went away before saying how the worker ended."""


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        sys.stderr.write("usage: forkclient.py SOCKET JOB.json WORKER_ARGV...\n")
        return 64
    sock_path, job, fallback = argv[1], argv[2], argv[3:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    replies = None
    here = os.getcwd()
    try:
        # by its name from its folder: a socket's path may hold 107 bytes, a TMPDIR more
        os.chdir(os.path.dirname(sock_path) or ".")
        try:
            conn.connect(os.path.basename(sock_path))
        finally:
            os.chdir(here)
        request = {"job": job, "env": dict(os.environ), "cwd": here}
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        replies = conn.makefile("rb")
        answer = json.loads(replies.readline() or b"{}")
    except (OSError, ValueError):
        answer = {}
    pid = answer.get("pid") if isinstance(answer, dict) else None
    if not isinstance(pid, int):
        conn.close()
        os.execv(fallback[0], fallback)  # the server cannot take it: a fresh worker
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: _pass_on(pid, signum))
    assert replies is not None
    while True:
        try:
            line = replies.readline()
            break
        except InterruptedError:
            continue
    try:
        ended = json.loads(line) if line else {}
    except ValueError:
        ended = {}
    if "signal" in ended:
        number = int(ended["signal"])
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        return 128 + number  # a signal that does not end a process
    if "exit" in ended:
        return int(ended["exit"])
    sys.stderr.write("forkclient: the fork server ended before the worker did\n")
    return _LOST


def _pass_on(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
