"""Edges of the worker-log classifiers (runner/classify.py) that decide which finding a failure
becomes: limits and cuts of the quoted evidence, deduplication, precedence of the kinds.
The messages are the real ones of torch 2.13 (CPU) and 2.11 (H100) quoted in the field notes."""

from __future__ import annotations

import pytest

from aotipre.runner.classify import (
    classify_compile_failure,
    classify_load_failure,
    classify_run_failure,
    decisive_lines,
    kernel_names,
    parse_input_checks,
    python_frames,
    stderr_error_messages,
    watchdog_fired,
)

TOO_LARGE = "input_handles[0]: dim value is too large at 1, expected to be <= 128, but got: 129"
GENERIC = (
    "run_func_(container_handle_, ...) API call failed at model_container_runner.cpp, line 147"
)


def test_input_check_fields() -> None:
    (c,) = parse_input_checks(TOO_LARGE)
    assert (c.kind, c.tensor_index, c.dim, c.expected, c.actual) == (
        "dim_too_large",
        0,
        1,
        128,
        129,
    )
    assert c.line == TOO_LARGE
    (c,) = parse_input_checks(
        "input_handles[12]: dim value is too small at 3, expected it to be >= 2, but got: 1"
    )
    assert (c.kind, c.tensor_index, c.dim, c.expected, c.actual) == ("dim_too_small", 12, 3, 2, 1)


def test_input_checks_are_deduplicated_across_texts_but_not_merged() -> None:
    other = TOO_LARGE.replace("129", "130")
    got = parse_input_checks(TOO_LARGE, f"Error: {TOO_LARGE}\nError: {other}\n", "")
    assert [c.actual for c in got] == [129, 130]
    assert parse_input_checks("", "") == []


@pytest.mark.parametrize(
    "text, expected, actual",
    [
        ("unmatched device type, expected: 00(cpu), but got: 1", "cpu", "cuda"),
        ("unmatched device type, expected: 11, but got: 0", "cuda", "cpu"),
        ("unmatched device type, expected: 1, but got: 14", "cuda", "meta"),
        ("unmatched device type, expected: 121, but got: 99", "device type 121", "device type 99"),
        ("unmatched device type, expected: 1212, but got: 13", "xpu", "mps"),
    ],
)
def test_device_numbers(text: str, expected: str, actual: str) -> None:
    (c,) = parse_input_checks(f"input_handles[0]: {text}")
    assert (c.expected, c.actual) == (expected, actual)


def test_dtype_numbers_unknown_to_c10() -> None:
    (c,) = parse_input_checks("input_handles[1]: unmatched dtype, expected: 99, but got: 6")
    assert (c.expected, c.actual) == ("c10 dtype 99", "float32")


def test_kwargs_mismatch_lists() -> None:
    (c,) = parse_input_checks(
        "ValueError: Ran into a kwarg keyword mismatch: Got the following keywords ['x', \"y\"] but expected []"
    )
    assert (c.kind, c.expected, c.actual) == ("kwargs", [], ["x", "y"])


def test_size_stride_guard_with_op_name() -> None:
    text = "expected size 3==3, stride 16==10 at dim=0\nError in op: input"
    (c,) = parse_input_checks(text.replace("\n", " "))
    assert c.kind == "size_stride" and c.dim == 0
    assert c.expected == {"size": 3, "stride": 10} and c.actual == {"size": 3, "stride": 16}
    assert c.line.endswith("(op: input)")
    assert parse_input_checks("expected size 3==3, stride 10==10 at dim=0") == []


def test_decisive_lines_limit_cut_and_dedupe() -> None:
    lines = [f"RuntimeError: failure number {i}" for i in range(10)]
    assert decisive_lines("\n".join(lines)) == lines[:6]
    assert decisive_lines("\n".join(lines), limit=2) == lines[:2]
    long = "RuntimeError: " + "x" * 500
    (cut,) = decisive_lines(long)
    assert len(cut) == 400 and cut.endswith("...")
    (short,) = decisive_lines(long, max_chars=50)
    assert len(short) == 50
    exact = "RuntimeError: " + "y" * (400 - len("RuntimeError: "))
    assert decisive_lines(exact) == [exact]
    twice = f"{TOO_LARGE}\nError: {TOO_LARGE}"
    assert decisive_lines(twice) == [TOO_LARGE]
    threads = (
        "k.py:1: block: [0,0,0], thread: [1,0,0] Assertion `index out of bounds` failed.\n"
        "k.py:1: block: [0,0,0], thread: [2,0,0] Assertion `index out of bounds` failed.\n"
    )
    assert len(decisive_lines(threads)) == 1


def test_decisive_lines_fallback_keeps_the_last_lines() -> None:
    text = "\n".join(f"plain line {i}" for i in range(9))
    assert decisive_lines(text) == [f"plain line {i}" for i in range(3, 9)]
    assert decisive_lines("   \n\n") == []


def test_watchdog_and_stderr_helpers() -> None:
    assert watchdog_fired("x\nTimeout (0:00:05)!\ny") == "0:00:05"
    assert watchdog_fired("Timeout (0:00:05)! and more") is None
    # a fractional --timeout: faulthandler prints the microseconds
    assert watchdog_fired("Timeout (0:00:00.050000)!\nThread 0x1") == "0:00:00.050000"
    assert stderr_error_messages(f"Error: {TOO_LARGE}\nnot: this\nError:   spaced  ") == [
        TOO_LARGE,
        "spaced",
    ]


def test_kernel_names_deduplicated_in_order() -> None:
    text = (
        "cpp_fused_add_1 cpp_fused_mul_0\n[ before_launch: cpp_fused_mul_0 ]\n"
        "[ before_launch: cpp_fused_add_1 ]\nException raised from cpp_fused_sum_2 at k.cpp:3\n"
    )
    assert kernel_names(text) == ["cpp_fused_sum_2", "cpp_fused_add_1", "cpp_fused_mul_0"]
    assert kernel_names("Exception raised from helper at x.cpp:1") == []


def test_python_frames_of_the_current_thread_only() -> None:
    dump = (
        'Thread 0x1 (most recent call first):\n  File "a.py", line 1 in other\n\n'
        'Current thread 0x2 (most recent call first):\n  File "b.py", line 7 in crash\n'
        '  File "c.py", line 9 in main\n\n  File "d.py", line 3 in after\n'
    )
    assert python_frames(dump) == ["b.py:7 in crash", "c.py:9 in main"]


def test_run_failure_precedence() -> None:
    # a timeout wins over everything the log says
    f = classify_run_failure(exc_type="RuntimeError", message=TOO_LARGE, timed_out=True)
    assert (f.kind, f.summary) == ("timeout", "the step timed out")
    # the watchdog without an exception or signal is a timeout too
    f = classify_run_failure(log='Timeout (0:00:02)!\n  File "w.py", line 3 in run\n')
    assert (f.kind, f.summary) == ("timeout", "no result after 0:00:02 in w.py:3 in run")
    assert f.evidence[0] == "Timeout (0:00:02)!"
    # ...and when the process then died by a signal: the step had run past its limit, and
    # faulthandler's dump of a busy process can itself crash (measured: a 1 s compile limit
    # under load, SIGSEGV right after `Timeout (0:00:01)!`, 1 run in 3)
    f = classify_run_failure(log="Timeout (0:00:02)!", signal="SIGSEGV")
    assert (f.kind, f.summary) == ("timeout", "no result after 0:00:02")
    # a signal without the watchdog's line is the crash it is
    f = classify_run_failure(log="Fatal Python error: Segmentation fault", signal="SIGSEGV")
    assert f.kind == "segfault" and f.signal == "SIGSEGV" and f.summary == "killed by SIGSEGV"
    # an input check wins over a device fault in the same text
    f = classify_run_failure(
        exc_type="RuntimeError", message=f"{TOO_LARGE}\nCUDA error: illegal memory access"
    )
    assert f.kind == "input_check" and f.summary == TOO_LARGE
    f = classify_run_failure(
        exc_type="RuntimeError", message="CUDA error: an illegal memory access was encountered"
    )
    assert (f.kind, f.summary) == (
        "device_fault",
        "CUDA error: an illegal memory access was encountered",
    )
    f = classify_run_failure(exc_type="ValueError", message="bad value\nmore")
    assert (f.kind, f.summary) == ("exception", "ValueError: bad value")
    assert classify_run_failure().summary == "the call failed"
    f = classify_run_failure(message="index out of bounds: 0 <= tmp2 < 500L")
    assert (f.kind, f.summary) == ("kernel_check", "index out of bounds: 0 <= tmp2 < 500L")


def test_torch_211_generic_failure_without_a_real_message_stays_generic() -> None:
    f = classify_run_failure(exc_type="RuntimeError", message=GENERIC, log=f"Error: {GENERIC}\n")
    assert f.kind == "exception" and GENERIC in f.summary


def test_load_failure_kinds_and_fallbacks() -> None:
    assert classify_load_failure(timed_out=True).kind == "timeout"
    f = classify_load_failure(signal="SIGSEGV", log='  File "l.py", line 2 in load\n')
    assert (f.kind, f.summary, f.signal) == ("crash", "killed by SIGSEGV while loading", "SIGSEGV")
    f = classify_load_failure(
        exc_type="OSError", message="libfoo.so: cannot open shared object file"
    )
    assert f.kind == "abi" and f.summary == "libfoo.so: cannot open shared object file"
    f = classify_load_failure(
        exc_type="RuntimeError", message="", log="Incorrect device passed to aoti_runner_cpu"
    )
    assert f.kind == "wrong_device"
    f = classify_load_failure(
        exc_type="RuntimeError", message="Error in dlopen: x.so: invalid ELF header"
    )
    assert (f.kind, f.summary) == (
        "other",
        "RuntimeError: Error in dlopen: x.so: invalid ELF header",
    )
    assert classify_load_failure().summary == "loading failed"


def test_compile_failure_summary_and_cuts() -> None:
    f = classify_compile_failure(timed_out=True)
    assert (f.kind, f.summary, f.evidence) == ("timeout", "the compile did not finish in time", ())
    log = "\n".join(f"k{i}.cpp:1:2: error: bad {i}" for i in range(6))
    f = classify_compile_failure(exc_type="CppCompileError", message="C++ compile error", log=log)
    assert f.kind == "error"
    assert f.summary == "CppCompileError: C++ compile error (k0.cpp:1:2: error: bad 0)"
    assert list(f.evidence[:4]) == [f"k{i}.cpp:1:2: error: bad {i}" for i in range(4)]
    assert not any("bad 4" in e for e in f.evidence)
    long = classify_compile_failure(exc_type="E", message="m" * 600)
    assert len(long.summary) == 400 and long.summary.endswith("...")
    crash = classify_compile_failure(signal="SIGKILL")
    assert (crash.kind, crash.summary) == ("crash", "killed by SIGKILL while compiling")
    fault = classify_compile_failure(
        exc_type="RuntimeError", message="CUDA error: misaligned address"
    )
    assert fault.kind == "device_fault"
    assert classify_compile_failure().summary == "the compile failed"


def test_size_stride_line_is_the_guard_message() -> None:
    (c,) = parse_input_checks("expected size 3==3, stride 16==10 at dim=0 Error in op: input")
    assert c.line == "expected size 3==3, stride 16==10 at dim=0 (op: input)"
    (c,) = parse_input_checks("expected size 7==6, stride 4==4 at dim=0")
    assert c.line == "expected size 7==6, stride 4==4 at dim=0"


def test_a_two_digit_device_number_is_not_undoubled() -> None:
    (c,) = parse_input_checks("input_handles[0]: unmatched device type, expected: 12, but got: 0")
    assert c.expected == "xpu"


@pytest.mark.parametrize(
    "exc_type, message, summary",
    [
        (None, "plain error text\nsecond line", "plain error text"),
        ("KeyError", "", "KeyError"),
        ("KeyError", None, "KeyError"),
        (None, "", "the call failed"),
    ],
)
def test_exception_summary(exc_type: str | None, message: str | None, summary: str) -> None:
    f = classify_run_failure(exc_type=exc_type, message=message)
    assert (f.kind, f.summary) == ("exception", summary)


def test_timeout_evidence_holds_the_watchdog_line_once_and_two_frames() -> None:
    log = (
        "Timeout (0:00:02)!\n"
        "RuntimeError: something before\n"
        "Current thread 0x1 (most recent call first):\n"
        '  File "a.py", line 1 in f\n  File "b.py", line 2 in g\n  File "c.py", line 3 in h\n'
    )
    f = classify_run_failure(log=log, timed_out=True)
    assert f.evidence == (
        "Timeout (0:00:02)!",
        "RuntimeError: something before",
        "a.py:1 in f",
        "b.py:2 in g",
    )


def test_kernel_check_when_a_frame_names_the_kernel() -> None:
    message = (
        "bad thing\nException raised from run_impl at model.cpp:3 (most recent call first):\n"
        "frame #3: cpp_fused_add_0 + 0xa8 (0x1 in /tmp/x.wrapper.so)"
    )
    f = classify_run_failure(exc_type="RuntimeError", message=message)
    assert (f.kind, f.kernel, f.summary) == ("kernel_check", "cpp_fused_add_0", "bad thing")
    # a kernel named without an exception raised from code: an exception
    f = classify_run_failure(exc_type="RuntimeError", message="bad thing in cpp_fused_add_0")
    assert (f.kind, f.kernel) == ("exception", "cpp_fused_add_0")
    # an exception raised from code, no kernel named: an exception
    f = classify_run_failure(
        exc_type="RuntimeError", message="bad\nException raised from run_impl at m.cpp:3"
    )
    assert (f.kind, f.kernel) == ("exception", None)


def test_load_evidence_quotes_the_message_and_the_first_frame() -> None:
    f = classify_load_failure(
        exc_type="RuntimeError", message="Incorrect device passed to aoti_runner_cpu"
    )
    assert f.evidence == ("Incorrect device passed to aoti_runner_cpu",)
    log = (
        "Fatal Python error: Segmentation fault\n"
        "Current thread 0x1 (most recent call first):\n"
        '  File "load.py", line 5 in load\n  File "main.py", line 9 in main\n'
    )
    f = classify_load_failure(signal="SIGSEGV", log=log)
    assert f.evidence == ("Fatal Python error: Segmentation fault", "load.py:5 in load")


def test_compile_evidence_limits_and_fallback() -> None:
    text = "\n".join(
        ["k.cpp:1:1: error: " + "e" * 450, "k.cpp:2:1: error: " + "f" * (400 - 18)]
        + [f"RuntimeError: failure {i}" for i in range(3)]
    )
    f = classify_compile_failure(exc_type="CppCompileError", message="compile failed", log=text)
    first, second, *rest = f.evidence  # a line of 450 characters is cut, one of 400 is not
    assert len(first) == 400 and first.endswith("...")
    assert len(second) == 400 and not second.endswith("...")
    assert rest == ["RuntimeError: failure 1", "RuntimeError: failure 2"]  # the last two
    # no compiler or exception lines: the decisive lines of the message
    f = classify_compile_failure(message="the build went wrong somewhere")
    assert f.evidence == ("the build went wrong somewhere",)
    # the kernel the log names
    f = classify_compile_failure(exc_type="E", message="in cpp_fused_relu_0: bad")
    assert f.kernel == "cpp_fused_relu_0"
    # the summary is cut only past 400 characters
    exact = classify_compile_failure(exc_type="E", message="m" * 397)
    assert len(exact.summary) == 400 and not exact.summary.endswith("...")
    over = classify_compile_failure(exc_type="E", message="m" * 398)
    assert len(over.summary) == 400 and over.summary.endswith("...")


def test_a_compiler_line_one_past_the_limit_is_cut() -> None:
    line = "k.cpp:1:1: error: " + "e" * (401 - 18)
    (quoted,) = classify_compile_failure(exc_type=None, message="", log=line).evidence
    assert len(line) == 401 and len(quoted) == 400 and quoted.endswith("...")


DESERIALIZE = "Deserializing mymodule.Point in pytree is not registered."
NO_NAME = (
    "No registered serialization name for <class 'mymodule.Point'> found. Please update your "
    "_register_pytree_node call with a `serialized_type_name` kwarg."
)


@pytest.mark.parametrize("message", [DESERIALIZE, NO_NAME])
def test_an_unregistered_pytree_type_is_named(message: str) -> None:
    # torch.utils._pytree's two wordings (treespec_loads / treespec_dumps): the Python side
    # could not rebuild the outputs; the summary is the line that says so, not the exception
    # line, and the type is named without its `<class '...'>` wrapper
    f = classify_run_failure(
        exc_type="NotImplementedError",
        message=message,
        log="[aoti] outputs computed\n",
    )
    assert (f.kind, f.kernel, f.checks) == ("unregistered_pytree", None, ())
    assert f.extra == {"type": "mymodule.Point"}
    assert f.summary == message
