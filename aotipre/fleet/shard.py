"""CI shards: which packages job I of N checks (`check --shard I/N`), the same on every runner.

A package is known by its key: its path relative to the manifest's folder (or, without a
manifest, to the working directory), with `/` separators, and `#2`, `#3`... for the second
and later entries of the same path. Keys are sorted by their SHA-256 and dealt round-robin to
the shards, so the assignment depends only on the set of keys and N: not on the order of the
manifest or the command line, the machine, its checkout folder or the working directory (as
long as the manifest is named from it). Shards differ in size by one package at most. A
package's targets, models and inputs stay with it on one shard (a job is one package).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from aotipre.foundation.errors import UsageError
from aotipre.report.common import numbered

MAX_SHARDS = 10_000
"""Most shards a run may be split into."""

_PAIR = re.compile(r"\s*(\d{1,9})\s*/\s*(\d{1,9})\s*")
_HINT = "use I/N, e.g. --shard 2/3 for the second of 3 shards, or --shard auto"

ENV_VARIABLES = (
    "AOTIPRE_SHARD",
    "BUILDKITE_PARALLEL_JOB",
    "JOB_COMPLETION_INDEX",
    "SLURM_ARRAY_TASK_ID",
)
"""What `--shard auto` reads, in this order (docs/ci.md): AOTIPRE_SHARD=I/N (set it from a
GitHub Actions matrix), Buildkite's parallel job, a Kubernetes indexed Job (with
AOTIPRE_SHARD_COUNT: Kubernetes has no variable for the count), a Slurm job array."""


@dataclass(frozen=True)
class Shard:
    """One of `count` CI jobs that share a run's packages."""

    index: int
    """1-based: shard 1 of 3 is `1/3`."""
    count: int
    source: str
    """Where it was read: `--shard`, or the CI variable (`BUILDKITE_PARALLEL_JOB`, ...)."""

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, env: Mapping[str, str] | None = None) -> Shard:
    """`2/3` -> Shard(2, 3, "--shard"); `auto` -> the shard the CI's variables name (`env`,
    default os.environ). UsageError (one line, with a hint) for anything else."""
    if text.strip().lower() == "auto":
        return _from_env(os.environ if env is None else env)
    index, count = _pair(text, f"--shard {text!r}")
    return Shard(index, count, "--shard")


def _pair(text: str, where: str) -> tuple[int, int]:
    match = _PAIR.fullmatch(text)
    if match is None:
        raise UsageError(f"{where} is not I/N", hint=_HINT)
    return _checked(int(match.group(1)), int(match.group(2)), where)


def _checked(index: int, count: int, where: str) -> tuple[int, int]:
    if count < 1 or count > MAX_SHARDS:
        raise UsageError(f"{where}: the shard count must be 1 to {MAX_SHARDS}, not {count}")
    if not 1 <= index <= count:
        raise UsageError(f"{where}: shard {index} of {count} does not exist", hint=_HINT)
    return index, count


def _number(env: Mapping[str, str], name: str) -> int:
    value = env.get(name)
    if value is None or not value.strip():
        raise UsageError(f"--shard auto: {name} is not set")
    if not re.fullmatch(r"\s*\d{1,9}\s*", value):
        raise UsageError(f"--shard auto: {name}={value!r} is not a number")
    return int(value)


def _from_env(env: Mapping[str, str]) -> Shard:
    """The first CI variable family of ENV_VARIABLES that is set."""
    if env.get("AOTIPRE_SHARD", "").strip():
        index, count = _pair(env["AOTIPRE_SHARD"], f"AOTIPRE_SHARD={env['AOTIPRE_SHARD']!r}")
        return Shard(index, count, "AOTIPRE_SHARD")
    if env.get("BUILDKITE_PARALLEL_JOB", "").strip():
        index = _number(env, "BUILDKITE_PARALLEL_JOB") + 1
        count = _number(env, "BUILDKITE_PARALLEL_JOB_COUNT")
        where = "--shard auto (BUILDKITE_PARALLEL_JOB, 0-based)"
        return Shard(*_checked(index, count, where), "BUILDKITE_PARALLEL_JOB")
    if env.get("JOB_COMPLETION_INDEX", "").strip():
        if not env.get("AOTIPRE_SHARD_COUNT", "").strip():
            raise UsageError(
                "--shard auto: JOB_COMPLETION_INDEX is set but AOTIPRE_SHARD_COUNT is not",
                hint="set AOTIPRE_SHARD_COUNT to the indexed Job's completions",
            )
        index = _number(env, "JOB_COMPLETION_INDEX") + 1
        count = _number(env, "AOTIPRE_SHARD_COUNT")
        where = "--shard auto (JOB_COMPLETION_INDEX, 0-based)"
        return Shard(*_checked(index, count, where), "JOB_COMPLETION_INDEX")
    if env.get("SLURM_ARRAY_TASK_ID", "").strip():
        offset = _number(env, "SLURM_ARRAY_TASK_ID") - _number(env, "SLURM_ARRAY_TASK_MIN")
        step = _number(env, "SLURM_ARRAY_TASK_STEP") if env.get("SLURM_ARRAY_TASK_STEP") else 1
        count = _number(env, "SLURM_ARRAY_TASK_COUNT")
        where = "--shard auto (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN)"
        if offset < 0 or step < 1 or offset % step:
            raise UsageError(
                f"{where}: task {offset} past the first is not one of a range with step {step}",
                hint="shard with a contiguous array (--array=0-N or 0-N:STEP)",
            )
        return Shard(*_checked(offset // step + 1, count, where), "SLURM_ARRAY_TASK_ID")
    raise UsageError(
        "--shard auto: no CI shard variable is set (AOTIPRE_SHARD, BUILDKITE_PARALLEL_JOB, "
        "JOB_COMPLETION_INDEX with AOTIPRE_SHARD_COUNT, SLURM_ARRAY_TASK_ID)",
        hint="give --shard I/N, or set AOTIPRE_SHARD=I/N",
    )


def package_keys(packages: Sequence[str], base: str | os.PathLike[str]) -> list[str]:
    """The key of each package in `packages` (in their order): its path relative to `base`,
    POSIX, numbered as `numbered` does."""
    root = os.path.abspath(base)
    out = []
    for package in packages:
        try:
            rel = os.path.relpath(os.path.abspath(package), root)
        except ValueError:  # another drive (Windows): nothing relative to say
            rel = os.path.abspath(package)
        out.append(PurePath(rel).as_posix())
    return numbered(out)


def assign(keys: Iterable[str], count: int) -> dict[str, int]:
    """key -> its shard (1-based): the keys in the order of their SHA-256, dealt round-robin.
    Depends only on the set of keys and `count`."""
    import hashlib  # imported here: only a sharded run deals keys (`check`'s start-up time)

    ordered = sorted(
        set(keys), key=lambda k: (hashlib.sha256(k.encode("utf-8", "surrogateescape")).digest(), k)
    )
    return {key: i % count + 1 for i, key in enumerate(ordered)}


@dataclass(frozen=True)
class ShardPlan:
    """A sharded run: every package of the whole run with its shard, and this shard's own."""

    shard: Shard
    packages: tuple[tuple[str, str, int], ...]
    """(key, package path as reports show it, shard) for every package, in the run's order."""

    @property
    def keys(self) -> tuple[str, ...]:
        """This shard's keys, in the run's order (that of its reports)."""
        return tuple(key for key, _, index in self.packages if index == self.shard.index)

    def to_dict(self) -> dict[str, Any]:
        """The `shard` block of a shard's JSON report (what `aotipre merge` reads)."""
        return {
            "index": self.shard.index,
            "count": self.shard.count,
            "source": self.shard.source,
            "plan": {key: {"shard": index, "package": path} for key, path, index in self.packages},
            "keys": list(self.keys),
        }


def plan_shards(shard: Shard, packages: Sequence[str], base: str | os.PathLike[str]) -> ShardPlan:
    """The plan of a run over `packages` (in the run's order), keyed relative to `base`."""
    keys = package_keys(packages, base)
    assignment = assign(keys, shard.count)
    return ShardPlan(
        shard, tuple((key, path, assignment[key]) for key, path in zip(keys, packages))
    )
