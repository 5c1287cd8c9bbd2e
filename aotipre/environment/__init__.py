"""The deployment's side, torch-free: this host or a `--target`, the Python interpreters
the workers run in, and the torch releases aotipre supports.

Why a package: the static checks (checks/target.py), the dynamic stages (the device gate, the
device index) and the fleet ask the same questions of where a package will run; host.py answers
them from /proc, nvidia-smi, the C and C++ libraries and the installed torch's files (or from a
`--target`'s description), runtimes.py from interpreters probed in a subprocess (`--python`),
versions.py from the supported releases as data. None imports torch; they import the
foundation, host.py the binary readers (binaries/: a libtorch folder's exports) and runtimes.py
runner/proc.py (to start its probe).
"""
