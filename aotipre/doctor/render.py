"""Renderers of a DoctorReport: `table` for people, `json` for scripts (complete, versioned)."""

from __future__ import annotations

from typing import Any

from aotipre.doctor.dirs import human_bytes
from aotipre.doctor.report import DoctorReport
from aotipre.findings import Severity
from aotipre.report.json_format import dumps
from aotipre.report.sanitize import sanitized
from aotipre.report.table import findings_table
from aotipre.report.tabular import tabulate

FORMATS = ("table", "json")
_WIDTH = 96


def render(report: DoctorReport, fmt: str) -> str:
    """The report in `fmt`, its strings cleaned first (report.sanitize): host names, paths,
    compiler output and worker logs come from the machine and must not control the terminal."""
    if fmt == "json":
        return dumps(sanitized(report, human=False).to_dict())
    if fmt == "table":
        return render_table(sanitized(report))
    raise ValueError(f"unknown doctor format {fmt!r} (use {', '.join(FORMATS)})")


def render_table(report: DoctorReport) -> str:
    f = report.facts
    host = f.get("host") or {}
    lines = [
        f"aotipre doctor: {host.get('node') or 'this machine'} ({host.get('system')}, "
        f"{host.get('machine')}{', ' + host['libc'] if host.get('libc') else ''})",
        "",
    ]
    rows: list[list[str]] = []
    py = f.get("python") or {}
    worker = f.get("worker") or {}
    rows.append(["python", f"{py.get('version')} ({py.get('executable')})"])
    if worker.get("executable") and worker.get("executable") != py.get("executable"):
        rows.append(["", f"worker: {worker.get('python')} ({worker.get('executable')})"])
    rows.append(["torch", _torch_text(f.get("torch"))])
    for bug in f.get("torch_known_bugs") or ():
        rows.append(
            ["", f"known bug #{bug.get('issue')} ({bug.get('applies_to')}): {bug.get('what')}"]
        )
    rows.append(["cuda", _cuda_text(f.get("cuda"), f.get("torch"), f.get("nvidia_smi"))])
    rows.extend(_compiler_rows(f.get("compiler")))
    rows.extend(_libstdcxx_rows(f.get("libstdcxx")))
    lines.append(tabulate(rows, tablefmt="plain", maxcolwidths=[None, _WIDTH]))
    if report.directories:
        lines.append("")
        drows = []
        for d in report.directories:
            exec_text = _yes_no(d.executable)
            if d.noexec:
                exec_text = "no (noexec)"
            if not d.needs_exec:
                exec_text += " (not needed)"
            mount = f"{d.mount_point} ({','.join(d.mount_options)})" if d.mount_point else ""
            drows.append(
                [
                    d.role,
                    d.path if d.probed == d.path else f"{d.path} (absent; probed {d.probed})",
                    human_bytes(d.free_bytes),
                    _yes_no(d.writable),
                    exec_text,
                    mount,
                ]
            )
        lines.append(
            tabulate(
                drows,
                headers=["directory", "path", "free", "writable", "exec", "mount"],
                maxcolwidths=[None, 44, None, None, None, 30],
            )
        )
    if report.canaries:
        lines.append("")
        crows = []
        for c in report.canaries:
            detail = c.headline
            compile_stage = next((s for s in c.stages if s.name == "compile"), None)
            if compile_stage is not None and "cache hit" in compile_stage.detail:
                detail += " (compile cache hit)"
            site = c.crash_site
            if site is not None:
                detail += f"\ncrashing frame: {site.frame or '?'}\n({site.description})"
                if site.runtimes:
                    detail += "\nmapped at the crash: " + ", ".join(site.runtimes)
            crows.append([c.device, c.status, f"{c.duration_s:.1f}s", detail])
        lines.append(
            tabulate(
                crows,
                headers=["device", "canary", "time", "detail"],
                maxcolwidths=[None, None, None, 80],
            )
        )
    if report.cpp:
        lines.append("")
        rows = [
            [c.device, c.status, f"{c.duration_s:.1f}s", f"{c.summary} (harness {c.build})"]
            if c.build
            else [c.device, c.status, f"{c.duration_s:.1f}s", c.summary]
            for c in report.cpp
        ]
        lines.append(
            tabulate(
                rows,
                headers=["device", "C++ loader", "time", "detail"],
                maxcolwidths=[None, None, None, 80],
            )
        )
    if report.notes:
        lines.append("")
        lines.extend(f"note: {n}" for n in report.notes)
    lines.append("")
    if report.findings:
        lines.append(findings_table(report.findings, subject_width=24, message_width=72))
        lines.append("")
    counts = report.counts()
    summary = ", ".join(f"{counts[s.value]} {s.value}" for s in reversed(list(Severity)))
    devices = ", ".join(report.devices) or "none"
    lines.append(
        f"verdict: {report.verdict.value.upper()} (exit {int(report.exit_code)}; {summary}; "
        f"fail-on {report.fail_on.value}; devices {devices}; {report.duration_s:.1f}s)"
    )
    if report.error:
        lines.append(f"could not check: {report.error}")
    return "\n".join(lines) + "\n"


def _yes_no(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")


def _torch_text(t: Any) -> str:
    if not isinstance(t, dict):
        return "unknown (no torch worker ran)"
    build = f"CUDA {t['cuda']} build" if t.get("cuda") else "CPU-only build"
    if t.get("hip"):
        build = f"ROCm {t['hip']} build"
    extra = []
    if isinstance(t.get("built_with"), str):
        extra.append(f"built with {t['built_with']}")
    if t.get("cxx11_abi") is True:
        extra.append("C++11 ABI")
    elif t.get("cxx11_abi") is False:
        extra.append("pre-C++11 ABI")
    return f"{t.get('version')}, {build}" + (f" ({', '.join(extra)})" if extra else "")


def _cuda_text(c: Any, t: Any, smi: Any) -> str:
    smi = smi if isinstance(smi, dict) else {}
    gpus = smi.get("gpus") or []
    parts = []
    if isinstance(c, dict):
        if c.get("available") is True:
            api = c.get("driver_api")
            api_text = (
                f", driver API {api // 1000}.{api % 1000 // 10}" if isinstance(api, int) else ""
            )
            parts.append(f"available to torch: {c.get('device_count')} device(s){api_text}")
        elif isinstance(t, dict) and not t.get("cuda"):
            parts.append("not available (CPU-only torch build)")
        else:
            parts.append("not available to torch")
    for g in gpus:
        parts.append(
            f"GPU {g['index']}: {g['name']}, compute capability {g['capability']}, "
            f"{g['memory_mib']} MiB, driver {g['driver']}"
        )
    if isinstance(c, dict):
        for d in c.get("devices") or []:
            parts.append(
                f"cuda:{d['index']}: {d['name']}, compute capability {d['capability']}, "
                f"{human_bytes(d.get('memory_bytes'))}"
            )
    if not gpus and smi.get("note"):
        parts.append(smi["note"])
    return "\n".join(parts) or "unknown"


def _compiler_rows(c: Any) -> list[list[str]]:
    if not isinstance(c, dict):
        return [["compiler", "unknown"]]
    name = c.get("name") or "none"
    where = f" -> {c['path']}" if c.get("path") else ""
    version = f": {c['version']}" if c.get("version") else ""
    if c.get("works"):
        state = f"builds a shared library ({c.get('build_s', 0):.2f}s)"
    else:
        state = f"DOES NOT WORK: {c.get('error')}"
    return [
        ["compiler", f"{name}{where}{version}"],
        ["", state],
        ["", f"chosen by {c.get('how')}"],
    ]


def _libstdcxx_rows(lib: Any) -> list[list[str]]:
    if not isinstance(lib, dict):
        return []
    rows = []
    comp = lib.get("compiler")
    rows.append(
        ["libstdc++", f"compiler's: {_lib_text(comp) if comp else 'not reported by the compiler'}"]
    )
    for loaded in lib.get("loaded") or []:
        same = comp is not None and loaded.get("real_path") == comp.get("real_path")
        rows.append(
            ["", f"loaded by torch: {_lib_text(loaded)}" + (": the same file" if same else "")]
        )
    if not lib.get("loaded"):
        rows.append(["", "loaded by torch: unknown"])
    return rows


def _lib_text(lib: dict[str, Any]) -> str:
    if lib.get("error"):
        return f"{lib.get('path')} ({lib['error']})"
    glibcxx = lib.get("glibcxx")
    return f"{lib.get('real_path')} (GLIBCXX up to {glibcxx or '?'})"
