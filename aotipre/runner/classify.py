"""Pure parsers of worker logs: AOTI runtime-check messages, kernel names, failure kinds."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from aotipre.pt2.dtypes import C10_DTYPES

__all__ = [
    "Failure",
    "InputCheck",
    "classify_compile_failure",
    "classify_load_failure",
    "classify_run_failure",
    "decisive_lines",
    "is_generic_api_failure",
    "kernel_names",
    "parse_input_checks",
    "python_frames",
    "stderr_error_messages",
    "watchdog_fired",
]

# c10/core/DeviceType.h
C10_DEVICE_TYPES: dict[int, str] = {
    0: "cpu", 1: "cuda", 2: "mkldnn", 3: "opengl", 4: "opencl", 5: "ideep", 6: "hip",
    7: "fpga", 8: "maia", 9: "xla", 10: "vulkan", 11: "metal", 12: "xpu", 13: "mps",
    14: "meta", 15: "hpu", 16: "ve", 17: "lazy", 18: "ipu", 19: "mtia", 20: "privateuseone",
}  # fmt: skip

_IDX = r"input_handles\[(?P<index>\d+)\]: "
_INPUT_CHECK_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "dtype",
        re.compile(
            _IDX + r"unmatched dtype, expected: (?P<expected>\d+)(?:\(at::k(?P<name>\w+)\))?, "
            r"but got: (?P<actual>\d+)"
        ),
    ),
    (
        "static_dim",
        re.compile(
            _IDX + r"unmatched dim value at (?P<dim>\d+), expected: (?P<expected>-?\d+), "
            r"but got: (?P<actual>-?\d+)"
        ),
    ),
    (
        "dim_too_small",
        re.compile(
            _IDX + r"dim value is too small at (?P<dim>\d+), expected it to be >= "
            r"(?P<expected>-?\d+), but got: (?P<actual>-?\d+)"
        ),
    ),
    (
        "dim_too_large",
        re.compile(
            _IDX + r"dim value is too large at (?P<dim>\d+), expected to be <= "
            r"(?P<expected>-?\d+), but got: (?P<actual>-?\d+)"
        ),
    ),
    (
        "stride",
        re.compile(
            _IDX + r"unmatched stride value at (?P<dim>\d+), expected: (?P<expected>-?\d+), "
            r"but got: (?P<actual>-?\d+)"
        ),
    ),
    (
        "device",
        re.compile(
            _IDX + r"unmatched device type, expected: (?P<expected>\d+)(?:\((?P<name>\w+)\))?, "
            r"but got: (?P<actual>\d+)"
        ),
    ),
    (
        "input_count",
        re.compile(r"expected inputs vector size to be (?P<expected>\d+), but got (?P<actual>\d+)"),
    ),
    (
        "kwargs",
        re.compile(
            r"kwarg keyword mismatch: Got the following keywords \[(?P<actual>[^\]]*)\] "
            r"but expected \[(?P<expected>[^\]]*)\]"
        ),
    ),
)
# Inductor's assert_size_stride guard (shared or derived dims that disagree), e.g.
# `expected size 17==16, stride 1==1 at dim=1`; the first number is the actual value.
_SIZE_STRIDE = re.compile(
    r"expected size (?P<size_actual>-?\d+)==(?P<size_expected>-?\d+), "
    r"stride (?P<stride_actual>-?\d+)==(?P<stride_expected>-?\d+) at dim=(?P<dim>\d+)"
)
_SIZE_STRIDE_OP = re.compile(r"Error in op: (?P<op>\S+)")

_KERNEL = re.compile(
    r"\b(cpp_fused_\w+|cpp_CppKernelProxy_\w+|triton_(?:poi|per|red|tem|for|spl|unk|mm|bmm)_\w+"
    r"|triton_\w*fused_\w+)"
)
_RAISED_FROM = re.compile(r"Exception raised from (\w+) at ")
_BEFORE_LAUNCH = re.compile(r"\[ before_launch: (\w+) \]")
_GENERIC_API = re.compile(r"\b\w+\(.*\) API call failed at \S+")
_STDERR_ERROR = re.compile(r"^Error: (.+)$", re.MULTILINE)
_WATCHDOG = re.compile(r"^Timeout \((\d+:\d\d:\d\d(?:\.\d+)?)\)!$", re.MULTILINE)
_PY_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+),? in (?P<func>\S+)')
_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Failed|Exit)\b: ?.*")

_DEVICE_FAULT = re.compile(
    r"device-side assert triggered|illegal memory access|misaligned address"
    r"|cudaErrorIllegalAddress|cudaErrorInvalidAddressSpace|unspecified launch failure"
    r"|CUBLAS_STATUS_INTERNAL_ERROR|CUBLAS_STATUS_EXECUTION_FAILED|Assertion `.*` failed",
)
_KERNEL_CHECK = re.compile(r"index out of bounds|Exception raised from (?:cpp|triton)_")

# Lines worth quoting, in the order of how much they say.
_DECISIVE = re.compile(
    r"input_handles\[\d+\]|expected inputs vector size|kwarg keyword mismatch"
    r"|expected size -?\d+==|index out of bounds|Exception raised from|Assertion `"
    r"|device-side assert|illegal memory access|CUDA error|CUBLAS_STATUS|cuda\w*Error"
    r"|terminate called|what\(\):|Fatal Python error|Segmentation fault|Aborted"
    r"|API call failed|: error:|^Error: |^Timeout \(|\[ before_launch:|Incorrect device"
    r"|not compiled with CUDA|Failed to find a generated|Failed to initialize zip"
    r"|undefined symbol|cannot open shared object|Error\b.*:|Exception\b.*:"
)
_THREAD_COORDS = re.compile(r"block: \[[\d,]+\], thread: \[[\d,]+\]")
_NOISE = re.compile(
    r"^\s*frame #\d+|^\s*<omitting python frames>|^Traceback \(most recent call last\)"
    r"|^\s*\^+\s*$|^\s*File \"|Extension modules:|This error most often comes from"
    r"|Use torch\.library\.opcheck|See https://pytorch\.org|FutureWarning|UserWarning"
    r"|DeprecationWarning|^\s*warnings\.warn|^@@aotipre "
)


@dataclass(frozen=True)
class InputCheck:
    """One message of AOTI's runtime input check (AOTI_RUNTIME_CHECK_INPUTS) or its call guards."""

    kind: str
    """dtype, static_dim, dim_too_small, dim_too_large, stride, device, input_count, kwargs,
    size_stride."""
    tensor_index: int | None
    """`input_handles[i]`: the index among the model's tensor inputs."""
    dim: int | None
    expected: Any
    actual: Any
    line: str
    """The message, verbatim (one line)."""


@dataclass(frozen=True)
class Failure:
    """What went wrong in one worker step, distilled from the exception, the log and the exit."""

    kind: str
    """input_check, data_bound, kernel_check, device_fault, unregistered_pytree, exception, abort, segfault, illegal_instruction,
    killed, signal, timeout (run); and the load/compile kinds of the classify_* functions."""
    summary: str
    """One line: the most telling message."""
    kernel: str | None = None
    """The generated kernel the log names (cpp_fused_..., triton_...), if any."""
    checks: tuple[InputCheck, ...] = ()
    evidence: tuple[str, ...] = ()
    """Decisive lines, verbatim."""
    signal: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Building blocks


def parse_input_checks(*texts: str) -> list[InputCheck]:
    """Every runtime input-check message in the texts, deduplicated, in order of appearance.

    Handles both torch 2.13 (message in the exception) and 2.11 (`Error: <message>` on stderr
    only): pass the exception text and the captured stderr together.
    """
    out: list[InputCheck] = []
    seen: set[tuple[Any, ...]] = set()
    for text in texts:
        if not text:
            continue
        for line in text.splitlines():
            for check in _checks_in_line(line.strip()):
                key = (
                    check.kind,
                    check.tensor_index,
                    check.dim,
                    repr(check.expected),
                    repr(check.actual),
                )
                if key not in seen:
                    seen.add(key)
                    out.append(check)
    return out


def _checks_in_line(line: str) -> list[InputCheck]:
    body = line[len("Error: ") :] if line.startswith("Error: ") else line
    found: list[InputCheck] = []
    for kind, pattern in _INPUT_CHECK_PATTERNS:
        m = pattern.search(body)
        if m is None:
            continue
        groups = m.groupdict()
        index = int(groups["index"]) if groups.get("index") is not None else None
        dim = int(groups["dim"]) if groups.get("dim") is not None else None
        expected: Any
        actual: Any
        if kind == "dtype":
            expected = C10_DTYPES.get(int(groups["expected"]), f"c10 dtype {groups['expected']}")
            actual = C10_DTYPES.get(int(groups["actual"]), f"c10 dtype {groups['actual']}")
        elif kind == "device":
            # The expected number is printed with its digit doubled (`00(cpu)`): trust the name.
            expected = groups.get("name") or _device_name(_undouble(groups["expected"]))
            actual = _device_name(groups["actual"])
        elif kind == "kwargs":
            expected = _word_list(groups["expected"])
            actual = _word_list(groups["actual"])
        else:
            expected, actual = int(groups["expected"]), int(groups["actual"])
        found.append(InputCheck(kind, index, dim, expected, actual, m.group(0)))
        break
    for m in _SIZE_STRIDE.finditer(body):
        size_a, size_e = int(m["size_actual"]), int(m["size_expected"])
        stride_a, stride_e = int(m["stride_actual"]), int(m["stride_expected"])
        if size_a == size_e and stride_a == stride_e:
            continue
        op = _SIZE_STRIDE_OP.search(body)
        found.append(
            InputCheck(
                "size_stride",
                None,
                int(m["dim"]),
                {"size": size_e, "stride": stride_e},
                {"size": size_a, "stride": stride_a},
                m.group(0) + (f" (op: {op['op']})" if op else ""),
            )
        )
    return found


def _undouble(number: str) -> str:
    """The generated check prints the expected device type twice (`00(cpu)`, `11(cuda)`)."""
    half = len(number) // 2
    if len(number) % 2 == 0 and number[:half] == number[half:]:
        return number[:half]
    return number


def _device_name(number: str) -> str:
    return C10_DEVICE_TYPES.get(int(number), f"device type {number}")


def _word_list(text: str) -> list[str]:
    return [w.strip().strip("'\"") for w in text.split(",") if w.strip()]


def kernel_names(text: str) -> list[str]:
    """Generated kernels the log names, most telling first.

    Order: `Exception raised from <kernel>` (the kernel that threw), the last
    `[ before_launch: <kernel> ]` (the intermediate-value printer's last launch before a fault),
    then any other mention (stack frames, assertion lines), in order of appearance.
    """
    names: list[str] = []

    def add(name: str) -> None:
        if name not in names:
            names.append(name)

    for m in _RAISED_FROM.finditer(text):
        if _KERNEL.fullmatch(m.group(1)):
            add(m.group(1))
    launches = _BEFORE_LAUNCH.findall(text)
    if launches:
        add(launches[-1])
    for m in _KERNEL.finditer(text):
        add(m.group(1))
    return names


def is_generic_api_failure(text: str) -> bool:
    """torch 2.11's `run_func_(...) API call failed at .../model_container_runner.cpp`."""
    return bool(_GENERIC_API.search(text or ""))


def stderr_error_messages(text: str) -> list[str]:
    """The `Error: <message>` lines AOTI writes to stderr (the real message on torch 2.11)."""
    return [m.strip() for m in _STDERR_ERROR.findall(text or "")]


def watchdog_fired(text: str) -> str | None:
    """The limit (`0:00:05`) when the worker's faulthandler watchdog fired, else None."""
    m = _WATCHDOG.search(text or "")
    return m.group(1) if m else None


def python_frames(text: str) -> list[str]:
    """`file:line in func` of the Python frames in a faulthandler dump or traceback.

    In a dump of all threads, only the block of the thread that crashed (`Current thread`)
    is used, when there is one.
    """
    lines = (text or "").splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Current thread ")), None)
    if start is not None:
        block = []
        for line in lines[start + 1 :]:
            if not line.strip():
                break
            block.append(line)
        lines = block
    out = []
    for line in lines:
        m = _PY_FRAME.match(line)
        if m:
            out.append(f"{m['file']}:{m['line']} in {m['func']}")
    return out


def decisive_lines(*texts: str, limit: int = 6, max_chars: int = 400) -> list[str]:
    """The few lines that say what happened, verbatim (deduplicated, stack frames dropped).

    Lines matching known error patterns come first, in order of appearance; when none match,
    the last non-noise lines are used. Long lines are cut at `max_chars`.
    """
    picked: list[str] = []
    fallback: list[str] = []
    seen: set[str] = set()
    for text in texts:
        for raw in (text or "").splitlines():
            line = raw.rstrip()
            stripped = line.strip()
            if not stripped or _NOISE.search(line):
                continue
            key = stripped[len("Error: ") :] if stripped.startswith("Error: ") else stripped
            key = _THREAD_COORDS.sub("", key)  # one CUDA assertion line per thread: keep one
            if key in seen:
                continue
            seen.add(key)
            shown = stripped if len(stripped) <= max_chars else stripped[: max_chars - 3] + "..."
            if _DECISIVE.search(stripped):
                picked.append(shown)
            else:
                fallback.append(shown)
    if picked:
        return picked[:limit]
    return fallback[-limit:]


def _first_line(text: str) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _exception_line(exc_type: str | None, message: str | None) -> str:
    first = _first_line(message or "")
    if exc_type and first:
        return f"{exc_type}: {first}"
    return exc_type or first


# --------------------------------------------------------------------------------------------
# Classifiers


_SIGNAL_KINDS = {
    "SIGABRT": "abort",
    "SIGSEGV": "segfault",
    "SIGBUS": "segfault",
    "SIGILL": "illegal_instruction",
    "SIGKILL": "killed",
    "SIGFPE": "signal",
}


_DATA_BOUND = re.compile(
    r"Expected ([us]\d{1,9}) (<=|>=|<|>|==|!=) (-?\d{1,30}) but received (-?\d{1,30})"
)
"""The compiled model's check of a data-dependent bound (`torch._check(n <= 16)` on
`n = idx.item()`): `Expected u0 <= 16 but received 20` (torch 2.13)."""


def classify_run_failure(
    *,
    exc_type: str | None = None,
    message: str | None = None,
    log: str = "",
    signal: str | None = None,
    timed_out: bool = False,
) -> Failure:
    """Classify a failed model call (run, eager or probe step).

    `exc_type`/`message`: the Python exception the worker caught (None after a crash);
    `log`: the stderr captured while the step ran (plus anything else worth searching);
    `signal`: e.g. `SIGSEGV` when the process died by one; `timed_out`: the step overran.
    """
    text = "\n".join(t for t in (message or "", log) if t)
    kernels = kernel_names(text)
    kernel = kernels[0] if kernels else None
    checks = tuple(parse_input_checks(message or "", log))
    evidence = tuple(decisive_lines(message or "", log))

    # the watchdog fired: a timeout, even when the process then died by a signal (faulthandler
    # dumping the threads of a busy compile or model can itself crash, as measured under load)
    if timed_out or (exc_type is None and watchdog_fired(log)):
        limit = watchdog_fired(log)
        frames = python_frames(log)
        where = f" in {frames[0]}" if frames else ""
        summary = f"no result after {limit}{where}" if limit else "the step timed out"
        ev = tuple(line for line in evidence if not line.startswith("Timeout ("))
        ev = (f"Timeout ({limit})!",) + ev if limit else ev
        return Failure("timeout", summary, kernel, checks, ev + tuple(frames[:2]))

    if signal is not None:
        kind = _SIGNAL_KINDS.get(signal, "signal")
        what = re.search(r"what\(\):\s*(.+)", text)
        summary = what.group(1).strip() if what else f"killed by {signal}"
        frames = python_frames(log)
        ev = evidence + tuple(f for f in frames[:1] if f not in evidence)
        return Failure(kind, summary, kernel, checks, ev, signal=signal)

    line = _exception_line(exc_type, message)
    first = _first_line(message or "")
    if is_generic_api_failure(message or ""):
        # torch 2.11: the exception says only `run_func_(...) API call failed`; the real
        # message is the `Error: ...` line on stderr
        real = [m for m in stderr_error_messages(log) if not is_generic_api_failure(m)]
        if real:
            first = line = real[0]
            evidence = tuple(decisive_lines(log))
    if checks:
        return Failure("input_check", checks[0].line, kernel, checks, evidence)
    bound = _DATA_BOUND.search(text)
    if bound:
        # the model's own torch._check on a value read from its inputs (`x.item()`), which
        # the compiled code enforces at every call: the input's value, not a kernel, is at fault
        return Failure(
            "data_bound",
            bound.group(0),
            None,
            (),
            evidence,
            extra={
                "symbol": bound.group(1),
                "relation": bound.group(2),
                "bound": int(bound.group(3)),
                "value": int(bound.group(4)),
            },
        )
    unregistered = _UNREGISTERED_PYTREE.search(text)
    if unregistered:
        # Python-side: the package's call spec names a pytree type this process never
        # registered; the compiled code ran, the outputs could not be rebuilt (no kernel)
        type_name = unregistered.group(1) or unregistered.group(2)
        return Failure(
            "unregistered_pytree",
            _line_containing(text, unregistered.group(0)) or line,
            None,
            (),
            evidence,
            extra={"type": type_name},
        )
    if _DEVICE_FAULT.search(text):
        m = _DEVICE_FAULT.search(text)
        assert m is not None
        return Failure(
            "device_fault", _line_containing(text, m.group(0)) or line, kernel, (), evidence
        )
    if _KERNEL_CHECK.search(text) or (kernel is not None and "Exception raised from" in text):
        return Failure("kernel_check", first or line, kernel, (), evidence)
    return Failure("exception", line or "the call failed", kernel, (), evidence)


_UNREGISTERED_PYTREE = re.compile(
    r"Deserializing (\S+?) in pytree is not registered|No registered serialization name for "
    r"<class '([^']+)'>"
)
"""torch.utils._pytree.treespec_loads / treespec_dumps of a type not registered in this
process (torch 2.11-2.13 wording)."""


def _line_containing(text: str, needle: str) -> str:
    for line in text.splitlines():
        if needle in line:
            return line.strip()
    return ""


_LOAD_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("wrong_device", re.compile(r"Incorrect device passed|Invalid device|invalid device ordinal")),
    (
        "cuda_missing",
        re.compile(
            r"not compiled with CUDA|Found no NVIDIA driver|No CUDA GPUs are available"
            r"|CUDA driver initialization failed|no CUDA-capable device|cudaErrorNoDevice"
            r"|CUDA driver version is insufficient"
        ),
    ),
    (
        "model_not_found",
        re.compile(r"Failed to find a generated cpp file or so file for model|Model \S+ not found"),
    ),
    ("archive", re.compile(r"Failed to initialize zip archive|PytorchStreamReader failed")),
    ("abi", re.compile(r"undefined symbol|cannot open shared object|version `\S+' not found")),
)


def classify_load_failure(
    *,
    exc_type: str | None = None,
    message: str | None = None,
    log: str = "",
    signal: str | None = None,
    timed_out: bool = False,
) -> Failure:
    """Classify a failed load: wrong_device, cuda_missing, model_not_found, archive, abi, other,
    crash (a signal) or timeout."""
    evidence = tuple(decisive_lines(message or "", log))
    if timed_out:
        return Failure("timeout", "loading did not finish in time", None, (), evidence)
    if signal is not None:
        frames = python_frames(log)
        ev = evidence + tuple(f for f in frames[:1] if f not in evidence)
        return Failure("crash", f"killed by {signal} while loading", None, (), ev, signal=signal)
    text = f"{message or ''}\n{log}"
    line = _exception_line(exc_type, message)
    for kind, pattern in _LOAD_KINDS:
        m = pattern.search(text)
        if m is not None:
            return Failure(kind, _line_containing(text, m.group(0)) or line, None, (), evidence)
    return Failure("other", line or "loading failed", None, (), evidence)


_GXX_ERROR = re.compile(r"^(?:\S+:\d+:\d+: )?(?:fatal )?error: .+", re.MULTILINE)


def classify_compile_failure(
    *,
    exc_type: str | None = None,
    message: str | None = None,
    log: str = "",
    signal: str | None = None,
    timed_out: bool = False,
) -> Failure:
    """Classify a failed compile; evidence keeps the C++ compiler's `error:` lines and the last
    exception line instead of the whole traceback."""
    text = f"{message or ''}\n{log}"
    kernels = kernel_names(text)
    if timed_out:
        return Failure("timeout", "the compile did not finish in time", None, (), ())
    gxx = [m.group(0).strip() for m in _GXX_ERROR.finditer(text)]
    exc_lines = [line.strip() for line in text.splitlines() if _EXC_LINE.match(line.strip())]
    evidence: list[str] = []
    for line in gxx[:4] + exc_lines[-2:]:
        short = line if len(line) <= 400 else line[:397] + "..."
        if short not in evidence:
            evidence.append(short)
    if not evidence:
        evidence = decisive_lines(message or "", log)
    if signal is not None:
        summary = f"killed by {signal} while compiling"
        kind = "crash"
    else:
        summary = _exception_line(exc_type, message) or "the compile failed"
        if gxx:
            summary = f"{summary} ({gxx[0]})" if gxx[0] not in summary else summary
        kind = "device_fault" if _DEVICE_FAULT.search(text) else "error"
    return Failure(
        kind,
        summary if len(summary) <= 400 else summary[:397] + "...",
        kernels[0] if kernels else None,
        (),
        tuple(evidence),
        signal=signal,
    )
