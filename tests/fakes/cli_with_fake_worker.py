"""`python cli_with_fake_worker.py WORKER.py ARGS...`: the real aotipre CLI, with WORKER.py in
place of launch.WORKER_PATH (e.g. fake_torch_worker.py, scripted by $AOTIPRE_FAKE_SCRIPT).

Lets a test drive the whole command (option parsing, Ctrl-C handling, exit codes) against a
worker that crashes or hangs on demand, without torch.
"""

from __future__ import annotations

import sys

from aotipre.cli import main
from aotipre.runner import launch

if __name__ == "__main__":
    launch.WORKER_PATH = sys.argv[1]
    sys.exit(main(sys.argv[2:]))
