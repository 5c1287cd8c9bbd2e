"""The result records of a check: findings, stage results, the report and its exit-code policy.

Why a package: what a check concludes, and the vocabulary it concludes in. This module holds the
records (Finding, StageResult, Report, the exit-code policy); codes.py the code table every finding
cites; codes_doc.py the reference rendered from that table (docs/codes.md, `aotipre explain`);
baseline.py the findings a team has accepted. Every layer imports the records and the codes; they
import the foundation and each other one way (codes and baseline read the records, codes_doc the
codes), and the records read back the perf and triage records lazily (Report.from_dict).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aotipre.foundation import jsonfields

if TYPE_CHECKING:
    from aotipre.runner.perf import PerfRecord
    from aotipre.triage.accuracy_diagnosis import AccuracyDiagnosis
    from aotipre.triage.diagnosis import Diagnosis


class Severity(str, enum.Enum):
    """How much a finding matters to the release gate."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


class Category(str, enum.Enum):
    """What a finding is about (a fixed list; reports group by it)."""

    PACKAGE = "package"
    STRUCTURE = "structure"
    DTYPE = "dtype"
    DEVICE = "device"
    SHAPE = "shape"
    DYNAMIC_RANGE = "dynamic_range"
    STRIDE = "stride"
    VERSION = "version"
    ENVIRONMENT = "environment"
    COMPILE = "compile"
    LOAD = "load"
    RUNTIME = "runtime"
    CRASH = "crash"
    ACCURACY = "accuracy"
    NAN = "nan"
    TIMEOUT = "timeout"
    PERFORMANCE = "performance"


class StageStatus(str, enum.Enum):
    """The outcome of one stage of the pipeline."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"


class Verdict(str, enum.Enum):
    """The gate's answer: pass, fail, or could not check (never a pass)."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"


class ExitCode(enum.IntEnum):
    """Process exit codes; documented in the README."""

    PASS = 0
    """No finding at or above --fail-on."""
    GATE_FAILED = 1
    """At least one finding at or above --fail-on."""
    CANNOT_CHECK = 2
    """The package or inputs could not be read, or the command line is wrong."""
    INTERNAL = 3
    """A bug in aotipre itself."""


@dataclass(frozen=True)
class Finding:
    """One thing aotipre found. Checks return these; they never print or exit."""

    code: str
    """Stable code from `aotipre.findings.codes` (e.g. AOT301)."""
    severity: Severity
    category: Category
    message: str
    """One sentence naming what is wrong, with the expected and the actual value."""
    hint: str = ""
    """What to do about it."""
    model: str | None = None
    """The model inside the package, when the finding is about one."""
    input: str | None = None
    """The input's name (e.g. `input_ids` or `kwargs['mask']`)."""
    position: int | None = None
    """The input's position in the flattened input list."""
    dim: int | None = None
    """The tensor dimension concerned."""
    expected: Any = None
    actual: Any = None
    stage: str | None = None
    """The pipeline stage that produced it (static, compile, load, run, ...)."""
    evidence: tuple[str, ...] = ()
    """Decisive log lines, quoted verbatim."""
    runtime: str | None = None
    """In a version matrix (several --python), the torch whose workers found it (`torch 2.14.1`)."""

    @property
    def subject(self) -> str:
        """A short human label of what the finding is about: model / input#pos / dim."""
        parts = []
        if self.model:
            parts.append(self.model)
        if self.input is not None:
            label = self.input
            if self.position is not None:
                label += f"#{self.position}"
            parts.append(label)
        if self.dim is not None:
            parts.append(f"dim {self.dim}")
        if not parts and self.stage:
            parts.append(self.stage)
        subject = " / ".join(parts) or "package"
        return f"{subject} [{self.runtime}]" if self.runtime else subject

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "category": self.category.value,
            "subject": self.subject,
            "message": self.message,
            "hint": self.hint,
            "model": self.model,
            "input": self.input,
            "position": self.position,
            "dim": self.dim,
            "expected": _jsonable(self.expected),
            "actual": _jsonable(self.actual),
            "stage": self.stage,
            "evidence": list(self.evidence),
            "runtime": self.runtime,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        """The finding `to_dict` wrote (`subject` is derived, not read; `expected` and `actual`
        come back as the JSON holds them). ValueError naming the field for anything else."""
        return cls(
            code=jsonfields.text(data, "code"),
            severity=Severity(jsonfields.text(data, "severity")),
            category=Category(jsonfields.text(data, "category")),
            message=jsonfields.text(data, "message"),
            hint=jsonfields.text(data, "hint", ""),
            model=jsonfields.opt_text(data, "model"),
            input=jsonfields.opt_text(data, "input"),
            position=jsonfields.opt_integer(data, "position"),
            dim=jsonfields.opt_integer(data, "dim"),
            expected=data.get("expected"),
            actual=data.get("actual"),
            stage=jsonfields.opt_text(data, "stage"),
            evidence=jsonfields.texts(data, "evidence"),
            runtime=jsonfields.opt_text(data, "runtime"),
        )


@dataclass(frozen=True)
class StageResult:
    """One stage of the pipeline (static checks, compile, load, run, ...)."""

    name: str
    status: StageStatus
    duration_s: float = 0.0
    detail: str = ""
    """Why it was skipped, or a one-line summary."""
    model: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables that mattered for this stage."""
    command: tuple[str, ...] = ()
    processes: tuple[str, ...] = ()
    """The worker processes that ran this stage's steps, in order (`worker job0 (pid 4242)`;
    a second one when the first died or a stage needs a fresh process); empty for the stages
    that ran in aotipre's own process."""
    runtime: str | None = None
    """The torch whose worker ran this stage (`torch 2.13.0+cpu`); None for the stages that
    only read the package (inspect, inputs, static)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model,
            "status": self.status.value,
            "duration_s": round(self.duration_s, 3),
            "detail": self.detail,
            "env": dict(self.env),
            "command": list(self.command),
            "processes": list(self.processes),
            "runtime": self.runtime,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StageResult:
        """The stage `to_dict` wrote (its duration to the millisecond, as the JSON keeps it)."""
        env = jsonfields.mapping(data, "env", {})
        if not all(isinstance(v, str) for v in env.values()):
            raise ValueError("env: expected an object of strings")
        return cls(
            name=jsonfields.text(data, "name"),
            status=StageStatus(jsonfields.text(data, "status")),
            duration_s=float(jsonfields.number(data, "duration_s", 0.0)),
            detail=jsonfields.text(data, "detail", ""),
            model=jsonfields.opt_text(data, "model"),
            env=dict(env),
            command=jsonfields.texts(data, "command"),
            processes=jsonfields.texts(data, "processes"),
            runtime=jsonfields.opt_text(data, "runtime"),
        )


SCHEMA_VERSION = 1


@dataclass
class Report:
    """Everything a check produced; renderers turn it into text, JSON, ..."""

    package_path: str
    package: dict[str, Any] | None = None
    """The inspected package (PackageInfo.to_dict()), or None when it could not be read."""
    stages: list[StageResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    fail_on: Severity = Severity.ERROR
    error: str | None = None
    """Set when the check could not run at all (bad package, bad inputs)."""
    inputs_source: str | None = None
    """Where the sample inputs came from: a file, the archive, or none."""
    tool_version: str = ""
    host: dict[str, Any] | None = None
    """The host (this machine or --target) the compatibility checks ran against."""
    diagnosis: list[Diagnosis] = field(default_factory=list)
    """Crash triage's conclusion, one per model whose run crashed and was escalated."""
    accuracy: list[AccuracyDiagnosis] = field(default_factory=list)
    """Accuracy triage's conclusion, one per model whose outputs differed and were escalated."""
    targets: list[dict[str, Any]] = field(default_factory=list)
    """One row per model and target: can it load there (aotipre.checks.target.TargetRow)."""
    config: str | None = None
    """The configuration file the CLI applied (and any it passed over as untrusted); None for
    a library call, which reads no file."""
    performance: list[tuple[PerfRecord, PerfRecord | None]] = field(default_factory=list)
    """The perf stage's measurements, one per model: (the package's, the --against baseline's)."""
    runtimes: list[dict[str, Any]] = field(default_factory=list)
    """The interpreters the workers ran in (python, python_version, torch, torch_path), one per
    --python (aotipre.environment.runtimes); empty when no worker ran or the caller chose the interpreter."""
    gpu: dict[str, Any] | None = None
    """The GPU the package's workers were pinned to (aotipre.fleet.gpus.Gpu.to_dict(): index, name,
    uuid) when a run spread packages over GPUs (-j, --gpus); None: not pinned."""

    @property
    def verdict(self) -> Verdict:
        if self.error is not None:
            return Verdict.ERROR
        if any(f.severity.rank >= self.fail_on.rank for f in self.findings):
            return Verdict.FAIL
        if any(s.status is StageStatus.ERROR for s in self.stages):
            return Verdict.ERROR
        return Verdict.PASS

    @property
    def exit_code(self) -> ExitCode:
        return {
            Verdict.PASS: ExitCode.PASS,
            Verdict.FAIL: ExitCode.GATE_FAILED,
            Verdict.ERROR: ExitCode.CANNOT_CHECK,
        }[self.verdict]

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Severity}
        for f in self.findings:
            out[f.severity.value] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "aotipre", "version": self.tool_version},
            "verdict": self.verdict.value,
            "exit_code": int(self.exit_code),
            "fail_on": self.fail_on.value,
            "error": self.error,
            "package_path": self.package_path,
            "inputs_source": self.inputs_source,
            "config": self.config,
            "package": self.package,
            "host": self.host,
            "targets": self.targets,
            "stages": [s.to_dict() for s in self.stages],
            "findings": [f.to_dict() for f in self.findings],
            "diagnosis": [d.to_dict() for d in self.diagnosis],
            "accuracy": [a.to_dict() for a in self.accuracy],
            "performance": [
                {**rec.to_dict(), "against": base.to_dict() if base is not None else None}
                for rec, base in self.performance
            ],
            "runtimes": list(self.runtimes),
            "gpu": self.gpu,
            "summary": self.counts(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        """The report `to_dict` wrote, as exact as the JSON allows: rendered in any format it
        gives the bytes the original gave, but for durations, which the JSON keeps to the
        millisecond. What `to_dict` derives (verdict, exit code, subjects, summary, perf totals)
        is not read. ValueError naming the field for a value of the wrong type, or for a
        schema_version other than SCHEMA_VERSION."""
        from aotipre.runner.perf import PerfRecord
        from aotipre.triage.accuracy_diagnosis import AccuracyDiagnosis
        from aotipre.triage.diagnosis import Diagnosis

        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"schema_version {version!r}, not {SCHEMA_VERSION}")
        performance: list[tuple[PerfRecord, PerfRecord | None]] = []
        for entry in jsonfields.objects(data, "performance"):
            against = jsonfields.opt_mapping(entry, "against")
            base = PerfRecord.from_dict(against) if against is not None else None
            performance.append((PerfRecord.from_dict(entry), base))
        return cls(
            package_path=jsonfields.text(data, "package_path"),
            package=jsonfields.opt_mapping(data, "package"),
            stages=[StageResult.from_dict(s) for s in jsonfields.objects(data, "stages")],
            findings=[
                Finding.from_dict(f) for f in jsonfields.objects(data, "findings", required=True)
            ],
            fail_on=Severity(jsonfields.text(data, "fail_on")),
            error=jsonfields.opt_text(data, "error"),
            inputs_source=jsonfields.opt_text(data, "inputs_source"),
            tool_version=jsonfields.text(jsonfields.mapping(data, "tool", {}), "version", ""),
            host=jsonfields.opt_mapping(data, "host"),
            diagnosis=[Diagnosis.from_dict(d) for d in jsonfields.objects(data, "diagnosis")],
            accuracy=[AccuracyDiagnosis.from_dict(a) for a in jsonfields.objects(data, "accuracy")],
            targets=[dict(t) for t in jsonfields.objects(data, "targets")],
            config=jsonfields.opt_text(data, "config"),
            performance=performance,
            runtimes=[dict(r) for r in jsonfields.objects(data, "runtimes")],
            gpu=jsonfields.opt_mapping(data, "gpu"),
        )


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)
