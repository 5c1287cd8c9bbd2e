"""What several renderers share: the combined verdict of many reports, and finding text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aotipre.findings import ExitCode, Finding, Report, Severity, Verdict

_VERDICT_OF_EXIT = {
    ExitCode.PASS: Verdict.PASS,
    ExitCode.GATE_FAILED: Verdict.FAIL,
    ExitCode.CANNOT_CHECK: Verdict.ERROR,
}


def worst_exit_code(reports: Sequence[Report]) -> ExitCode:
    """The exit code of a run over many packages: the worst of theirs (could not check > fail)."""
    return max((r.exit_code for r in reports), default=ExitCode.PASS)


def combined_verdict(reports: Sequence[Report]) -> Verdict:
    return _VERDICT_OF_EXIT[worst_exit_code(reports)]


def package_labels(reports: Sequence[Report]) -> list[str]:
    """What names each report's package to a person: its path, and for a path checked more
    than once (a manifest's entries with other inputs or models) `#2`, `#3`... on the later
    ones, the keys shards and `merge` give them (aotipre/fleet/shard.py)."""
    return numbered([r.package_path for r in reports])


def numbered(names: Sequence[str]) -> list[str]:
    """`names` made unique: the second and later of one name get `#2`, `#3`... (here, not in
    aotipre/fleet/shard.py, which a check that is not sharded never imports)."""
    seen: set[str] = set()
    out = []
    for name in names:
        key, n = name, 1
        while key in seen:
            n += 1
            key = f"{name}#{n}"
        seen.add(key)
        out.append(key)
    return out


def combined_counts(reports: Sequence[Report]) -> dict[str, int]:
    """Findings per severity over all reports."""
    out = {s.value: 0 for s in Severity}
    for report in reports:
        for key, n in report.counts().items():
            out[key] += n
    return out


def counts_text(counts: dict[str, int]) -> str:
    """`3 error, 1 warning, 0 info`."""
    return ", ".join(f"{counts[s.value]} {s.value}" for s in reversed(list(Severity)))


def gpu_label(gpu: Mapping[str, Any]) -> str:
    """Report.gpu for a header line: `0 NVIDIA H100 80GB HBM3 (GPU-5a1c...)`."""
    from aotipre.fleet.gpus import Gpu

    index = gpu.get("index")
    index = index if isinstance(index, int) else None
    return Gpu(index, str(gpu.get("name", "?")), str(gpu.get("uuid", "?"))).label


def fails_gate(finding: Finding, report: Report) -> bool:
    return finding.severity.rank >= report.fail_on.rank


def by_severity(findings: Sequence[Finding]) -> list[Finding]:
    """Most severe first; the report's order otherwise (stable)."""
    return sorted(findings, key=lambda f: -f.severity.rank)


def finding_text(finding: Finding, *, evidence: bool = True) -> str:
    """The message, then `hint: ...` and the quoted evidence lines, one per line."""
    lines = [finding.message]
    if finding.hint:
        lines.append(f"hint: {finding.hint}")
    if evidence:
        lines.extend(f"> {line}" for line in finding.evidence)
    return "\n".join(lines)
