"""The doctor's result record: host facts, directories, canaries, findings, verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aotipre.doctor.canary import CanaryResult
from aotipre.doctor.cpp import CppResult
from aotipre.doctor.dirs import DirectoryProbe
from aotipre.findings import (
    SCHEMA_VERSION,
    ExitCode,
    Finding,
    Report,
    Severity,
    StageResult,
    Verdict,
)


@dataclass
class DoctorReport:
    """Everything `aotipre doctor` found; verdict and exit code follow `check`'s policy."""

    facts: dict[str, Any] = field(default_factory=dict)
    """python, platform, torch, cuda, compiler, libstdcxx (each a JSON-ready dict)."""
    directories: list[DirectoryProbe] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    """The devices the canary was asked to prove."""
    canaries: list[CanaryResult] = field(default_factory=list)
    cpp: list[CppResult] = field(default_factory=list)
    """The C++ loader on each device's compiled canary (aotipre.doctor.cpp)."""
    stages: list[StageResult] = field(default_factory=list)
    """The canaries' stages (model `canary [device]`)."""
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Diagnoses and verified fixes, one line each."""
    fail_on: Severity = Severity.ERROR
    error: str | None = None
    """Set when the doctor could not check at all (e.g. no torch worker could run)."""
    tool_version: str = ""
    duration_s: float = 0.0

    def _as_check(self) -> Report:
        return Report(
            package_path="",
            stages=self.stages,
            findings=self.findings,
            fail_on=self.fail_on,
            error=self.error,
        )

    @property
    def verdict(self) -> Verdict:
        """pass: every requested device's canary works and nothing at or above fail-on."""
        return self._as_check().verdict

    @property
    def exit_code(self) -> ExitCode:
        return self._as_check().exit_code

    def counts(self) -> dict[str, int]:
        return self._as_check().counts()

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "aotipre", "version": self.tool_version},
            "kind": "doctor",
            "verdict": self.verdict.value,
            "exit_code": int(self.exit_code),
            "fail_on": self.fail_on.value,
            "error": self.error,
            "devices": list(self.devices),
            "host": self.facts,
            "directories": [d.to_dict() for d in self.directories],
            "canaries": [c.to_dict() for c in self.canaries],
            "cpp": [c.to_dict() for c in self.cpp],
            "stages": [s.to_dict() for s in self.stages],
            "findings": [f.to_dict() for f in self.findings],
            "notes": list(self.notes),
            "summary": self.counts(),
            "duration_s": round(self.duration_s, 3),
        }
