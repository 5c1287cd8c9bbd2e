"""The torch releases as an AOTI package meets them: which `aoti_*` shim functions each exports
and which `AOTInductor*` entry points a package it builds defines. The data is
torch_table.json, made by scripts/build_torch_table.py from the released wheels (docs/targets.md,
"The torch table"); it is read on first use only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

TABLE = Path(__file__).with_name("torch_table.json")


@dataclass(frozen=True)
class Table:
    releases: tuple[str, ...]
    """Oldest first, e.g. ('2.11', '2.12', '2.13', '2.14')."""
    sources: dict[str, str]
    entry_points: dict[str, frozenset[str]]
    """Entry point -> the releases whose packages define it."""
    shim: dict[str, frozenset[str]]
    """Shim function -> the releases whose libtorch exports it."""
    derived: dict[str, str] = field(default_factory=dict)
    """Release -> "wheel" (read from its libraries) or "sources" (its shim headers)."""

    def exports(self, release: str) -> frozenset[str] | None:
        if release not in self.releases:
            return None
        return frozenset(name for name, rels in self.shim.items() if release in rels)


@lru_cache(maxsize=1)
def load_table() -> Table:
    data = json.loads(TABLE.read_text(encoding="utf-8"))
    releases = tuple(sorted(data["releases"], key=release_key))
    return Table(
        releases=releases,
        sources={r: data["releases"][r]["source"] for r in releases},
        entry_points={k: frozenset(v) for k, v in data["entry_points"].items()},
        shim={k: frozenset(v) for k, v in data["shim"].items()},
        derived={r: data["releases"][r].get("derived", "wheel") for r in releases},
    )


def release_key(release: str) -> tuple[int, ...]:
    out = []
    for part in release.split("+")[0].split(".")[:2]:
        out.append(int(part) if part.isdigit() else 0)
    return tuple(out)


@dataclass(frozen=True)
class ProducerRange:
    """The torch releases that could have built a package, with the evidence."""

    releases: tuple[str, ...]
    """Consistent releases of the table, oldest first (empty: none of them)."""
    newer_than_table: bool
    """The .so defines entry points no release in the table defines: built by a newer torch."""
    evidence: tuple[str, ...]

    @property
    def text(self) -> str:
        table = load_table()
        if self.newer_than_table:
            return f"newer than {table.releases[-1]} (the newest release in aotipre's table)"
        if not self.releases:
            return "no release of aotipre's table (2.11-" + table.releases[-1] + ") matches"
        first, last = self.releases[0], self.releases[-1]
        if last == table.releases[-1]:
            return f"{first} or newer" if first != last else f"{first} or newer"
        return first if first == last else f"{first}-{last}"


def producer_range(entry_points: tuple[str, ...], imports: tuple[str, ...]) -> ProducerRange:
    """Which releases could have produced a .so defining `entry_points` and importing `imports`.

    A release R is consistent when the package defines every entry point R's interface.cpp
    defines and none that R lacks, and R's libtorch exports every shim function it imports
    (inductor of release R only emits calls R's shim offers).
    """
    table = load_table()
    defined = set(entry_points)
    unknown = sorted(defined - set(table.entry_points))
    if unknown:
        return ProducerRange(
            (),
            True,
            (f"defines {', '.join(unknown[:3])}, which no release up to {table.releases[-1]} has",),
        )
    consistent = []
    evidence: list[str] = []
    for rel in table.releases:
        mine = {n for n, rels in table.entry_points.items() if rel in rels}
        missing = sorted(mine - defined)
        extra = sorted(defined - mine)
        shim_missing = sorted(
            n for n in imports if n.startswith("aoti_") and rel not in table.shim.get(n, ())
        )
        if not missing and not extra and not shim_missing:
            consistent.append(rel)
        elif extra:
            evidence.append(f"not {rel}: defines {extra[0]} (from a later release)")
        elif missing:
            evidence.append(f"not {rel}: lacks {missing[0]}, which {rel} packages define")
        else:
            evidence.append(f"not {rel}: imports {shim_missing[0]}, which {rel} does not export")
    return ProducerRange(tuple(consistent), False, tuple(evidence))
