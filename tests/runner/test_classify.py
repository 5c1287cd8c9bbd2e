"""Log parsers of aotipre.runner.classify on text samples from torch 2.11 and 2.13."""

from __future__ import annotations

import pytest

from aotipre.runner.classify import (
    classify_compile_failure,
    classify_load_failure,
    classify_run_failure,
    decisive_lines,
    is_generic_api_failure,
    kernel_names,
    parse_input_checks,
    python_frames,
    stderr_error_messages,
    watchdog_fired,
)

# torch 2.13: the message is in the exception, and also on stderr as `Error: ...`
T213_DTYPE_EXC = "input_handles[0]: unmatched dtype, expected: 4(at::kLong), but got: 6"
T213_DTYPE_LOG = "Error: input_handles[0]: unmatched dtype, expected: 4(at::kLong), but got: 6\n"

# torch 2.11: a generic exception; the real message only on stderr
T211_GENERIC = (
    "run_func_(container_handle_, input_handles.data(), input_handles.size(), "
    "output_handles.data(), output_handles.size(), cuda_stream_handle, proxy_executor_handle_) "
    "API call failed at /pytorch/torch/csrc/inductor/aoti_runner/model_container_runner.cpp, "
    "line 147"
)
T211_LOG = (
    "Error: input_handles[1]: dim value is too large at 0, expected to be <= 64, but got: 65\n"
)

KERNEL_EXC = (
    "index out of bounds: 0 <= tmp2 < 500L\n"
    "Exception raised from cpp_fused_embedding_mul_unsqueeze_0 at /tmp/torchinductor_root/cy/"
    "cir3.kernel.cpp:27 (most recent call first):\n"
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9d (0x7f in libc10.so)\n"
    "frame #3: cpp_fused_embedding_mul_unsqueeze_0 + 0x13a (0x7f in /tmp/x/model.wrapper.so)\n"
    "frame #4: torch::aot_inductor::AOTInductorModel::run_impl(...) + 0x67d (0x7f in x.so)\n"
)

ABORT_LOG = (
    "terminate called after throwing an instance of 'c10::Error'\n"
    "  what():  index out of bounds: 0 <= tmp2 < 500L\n"
    "Exception raised from cpp_fused_embedding_sum_0 at /tmp/torchinductor_root/ab/k.cpp:27 "
    "(most recent call first):\n"
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9d (0x7f in libc10.so)\n"
    "Fatal Python error: Aborted\n\n"
    "Current thread 0x00007f3a (most recent call first):\n"
    '  File "/site-packages/torch/export/pt2_archive/_package.py", line 743 in __call__\n'
    '  File "/repo/aotipre/runner/worker.py", line 512 in call_aoti\n'
)

SEGV_LOG = (
    "Fatal Python error: Segmentation fault\n\n"
    "Current thread 0x00007fd9b1475b80 (most recent call first):\n"
    '  File "/site-packages/torch/export/pt2_archive/_package.py", line 743 in __call__\n'
    '  File "/repo/aotipre/runner/worker.py", line 512 in call_aoti\n\n'
    "Extension modules: numpy._core._multiarray_umath, torch._C (total: 2)\n"
)

WATCHDOG_LOG = (
    "Timeout (0:00:05)!\n"
    "Thread 0x00007f11 (most recent call first):\n"
    '  File "/site-packages/torch/export/pt2_archive/_package.py", line 743 in __call__\n'
    '  File "/repo/aotipre/runner/worker.py", line 512 in call_aoti\n'
)

CUDA_ASSERT_LOG = (
    "[ before_launch: triton_poi_fused_embedding_0 ]\n"
    "/tmp/torchinductor_root/ab/cabc.py:18: unknown: block: [0,0,0], thread: [32,0,0] "
    "Assertion `index out of bounds: 0 <= tmp4 < 500` failed.\n"
)
CUDA_ASSERT_EXC = (
    "CUDA error: device-side assert triggered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp"
    ":43 (most recent call first):\n"
)


def test_parses_every_runtime_check_message() -> None:
    text = "\n".join(
        [
            "input_handles[0]: unmatched dtype, expected: 6(at::kFloat), but got: 7",
            "input_handles[0]: unmatched dim value at 1, expected: 4, but got: 5",
            "input_handles[0]: dim value is too small at 0, expected it to be >= 2, but got: 1",
            "input_handles[0]: dim value is too large at 0, expected to be <= 64, but got: 65",
            "input_handles[0]: unmatched stride value at 0, expected: 4, but got: 1",
            "input_handles[0]: unmatched device type, expected: 00(cpu), but got: 14",
            "expected inputs vector size to be 1, but got 2",
            "ValueError: Ran into a kwarg keyword mismatch: Got the following keywords ['x'] but "
            "expected []",
        ]
    )
    checks = parse_input_checks(text)
    got = [(c.kind, c.tensor_index, c.dim, c.expected, c.actual) for c in checks]
    assert got == [
        ("dtype", 0, None, "float32", "float64"),
        ("static_dim", 0, 1, 4, 5),
        ("dim_too_small", 0, 0, 2, 1),
        ("dim_too_large", 0, 0, 64, 65),
        ("stride", 0, 0, 4, 1),
        ("device", 0, None, "cpu", "meta"),
        ("input_count", None, None, 1, 2),
        ("kwargs", None, None, [], ["x"]),
    ]


def test_doubled_device_digit_is_decoded() -> None:
    (check,) = parse_input_checks(
        "input_handles[2]: unmatched device type, expected: 11, but got: 0"
    )
    assert (check.expected, check.actual) == ("cuda", "cpu")


def test_size_stride_guard_reports_only_the_differing_dims() -> None:
    text = (
        "expected size 3==3, stride 17==16 at dim=0; expected size 17==16, stride 1==1 at dim=1\n"
        "Error in op: input\n"
    )
    checks = parse_input_checks(text)
    assert [(c.kind, c.dim) for c in checks] == [("size_stride", 0), ("size_stride", 1)]
    assert checks[1].expected == {"size": 16, "stride": 1}
    assert checks[1].actual == {"size": 17, "stride": 1}
    assert not parse_input_checks("expected size 3==3, stride 4==4 at dim=0")


def test_torch_213_exception_and_stderr_echo_give_one_finding() -> None:
    fail = classify_run_failure(exc_type="RuntimeError", message=T213_DTYPE_EXC, log=T213_DTYPE_LOG)
    assert fail.kind == "input_check"
    assert len(fail.checks) == 1
    assert fail.checks[0].expected == "int64" and fail.checks[0].actual == "float32"
    assert fail.evidence == (T213_DTYPE_EXC,)


def test_torch_211_generic_message_uses_stderr_error_line() -> None:
    assert is_generic_api_failure(T211_GENERIC)
    assert stderr_error_messages(T211_LOG) == [T211_LOG[len("Error: ") :].strip()]
    fail = classify_run_failure(exc_type="RuntimeError", message=T211_GENERIC, log=T211_LOG)
    assert fail.kind == "input_check"
    (check,) = fail.checks
    assert (check.kind, check.tensor_index, check.dim, check.expected, check.actual) == (
        "dim_too_large",
        1,
        0,
        64,
        65,
    )


def test_torch_211_generic_message_without_a_check_quotes_the_real_error() -> None:
    log = "Error: something else went wrong in the model\n"
    fail = classify_run_failure(exc_type="RuntimeError", message=T211_GENERIC, log=log)
    assert fail.kind == "exception"
    assert fail.summary == "something else went wrong in the model"


def test_torch_211_kernel_check_takes_its_message_from_stderr() -> None:
    log = "Error: " + KERNEL_EXC
    fail = classify_run_failure(exc_type="RuntimeError", message=T211_GENERIC, log=log)
    assert fail.kind == "kernel_check"
    assert fail.kernel == "cpp_fused_embedding_mul_unsqueeze_0"
    assert fail.summary == "index out of bounds: 0 <= tmp2 < 500L"
    assert any(line.startswith("Exception raised from cpp_fused") for line in fail.evidence)
    assert not any("API call failed" in line for line in fail.evidence)


def test_kernel_exception_names_the_kernel_without_stack_frames() -> None:
    fail = classify_run_failure(exc_type="RuntimeError", message=KERNEL_EXC)
    assert fail.kind == "kernel_check"
    assert fail.kernel == "cpp_fused_embedding_mul_unsqueeze_0"
    assert fail.summary == "index out of bounds: 0 <= tmp2 < 500L"
    assert fail.evidence[0] == "index out of bounds: 0 <= tmp2 < 500L"
    assert not any(line.startswith("frame #") for line in fail.evidence)


def test_abort_names_kernel_and_what() -> None:
    fail = classify_run_failure(log=ABORT_LOG, signal="SIGABRT")
    assert fail.kind == "abort"
    assert fail.kernel == "cpp_fused_embedding_sum_0"
    assert fail.summary == "index out of bounds: 0 <= tmp2 < 500L"
    assert "terminate called after throwing an instance of 'c10::Error'" in fail.evidence
    assert "Fatal Python error: Aborted" in fail.evidence


def test_segfault_quotes_the_fatal_line_and_innermost_frame() -> None:
    fail = classify_run_failure(log=SEGV_LOG, signal="SIGSEGV")
    assert fail.kind == "segfault"
    assert fail.kernel is None
    assert fail.evidence[0] == "Fatal Python error: Segmentation fault"
    assert fail.evidence[-1].endswith("_package.py:743 in __call__")
    assert not any("Extension modules" in line for line in fail.evidence)


@pytest.mark.parametrize("signal,kind", [("SIGILL", "illegal_instruction"), ("SIGKILL", "killed")])
def test_other_signals(signal: str, kind: str) -> None:
    assert classify_run_failure(log="", signal=signal).kind == kind


def test_watchdog_timeout_is_a_timeout_with_the_hanging_frame() -> None:
    assert watchdog_fired(WATCHDOG_LOG) == "0:00:05"
    assert watchdog_fired("no timeout here") is None
    fail = classify_run_failure(log=WATCHDOG_LOG)
    assert fail.kind == "timeout"
    assert "0:00:05" in fail.summary and "__call__" in fail.summary
    assert fail.evidence[0] == "Timeout (0:00:05)!"
    fail = classify_run_failure(log="", timed_out=True)
    assert fail.kind == "timeout"


def test_cuda_device_side_assert_names_the_last_launched_kernel() -> None:
    fail = classify_run_failure(
        exc_type="RuntimeError", message=CUDA_ASSERT_EXC, log=CUDA_ASSERT_LOG
    )
    assert fail.kind == "device_fault"
    assert fail.kernel == "triton_poi_fused_embedding_0"
    more = CUDA_ASSERT_LOG.replace("thread: [32,0,0]", "thread: [33,0,0]")
    again = classify_run_failure(
        exc_type="RuntimeError", message=CUDA_ASSERT_EXC, log=CUDA_ASSERT_LOG + more
    )
    assert sum("Assertion `" in line for line in again.evidence) == 1
    assert "device-side assert triggered" in fail.summary
    assert any("Assertion `index out of bounds" in line for line in fail.evidence)


def test_kernel_names_order() -> None:
    text = (
        "frame #3: cpp_fused_add_1 + 0x10\n"
        "[ before_launch: cpp_fused_mul_0 ]\n[ before_launch: cpp_fused_embedding_2 ]\n"
        "Exception raised from cpp_fused_embedding_2 at k.cpp:1\n"
        "Exception raised from c10_cuda_check_implementation at x.cpp:43\n"
    )
    assert kernel_names(text) == ["cpp_fused_embedding_2", "cpp_fused_add_1", "cpp_fused_mul_0"]
    assert kernel_names("triton_per_fused_sum_3 and triton_red_fused_1") == [
        "triton_per_fused_sum_3",
        "triton_red_fused_1",
    ]


def test_python_frames() -> None:
    assert python_frames(SEGV_LOG) == [
        "/site-packages/torch/export/pt2_archive/_package.py:743 in __call__",
        "/repo/aotipre/runner/worker.py:512 in call_aoti",
    ]
    tb = 'Traceback (most recent call last):\n  File "/a.py", line 3, in <module>\n'
    assert python_frames(tb) == ["/a.py:3 in <module>"]
    all_threads = (
        "Fatal Python error: Segmentation fault\n\n"
        "Thread 0x00007f01 (most recent call first):\n"
        '  File "/usr/lib/python3.12/threading.py", line 359 in wait\n\n'
        "Current thread 0x00007f02 (most recent call first):\n"
        '  File "/site-packages/torch/export/pt2_archive/_package.py", line 1045 in _load_aoti\n'
        '  File "/repo/aotipre/runner/worker.py", line 300 in load_package_like_torch\n\n'
        "Extension modules: torch._C (total: 1)\n"
    )
    assert python_frames(all_threads) == [
        "/site-packages/torch/export/pt2_archive/_package.py:1045 in _load_aoti",
        "/repo/aotipre/runner/worker.py:300 in load_package_like_torch",
    ]


def test_decisive_lines_fall_back_to_the_last_lines() -> None:
    assert decisive_lines("hello\nworld\nlast words\n", limit=2) == ["world", "last words"]
    long = "RuntimeError: " + "x" * 1000
    (line,) = decisive_lines(long)
    assert len(line) == 400 and line.endswith("...")


@pytest.mark.parametrize(
    "message,kind",
    [
        ("Incorrect device passed to aoti_runner_cpu", "wrong_device"),
        ("Torch not compiled with CUDA enabled", "cuda_missing"),
        ("Found no NVIDIA driver on your system.", "cuda_missing"),
        (
            "Failed to find a generated cpp file or so file for model 'nope' in the zip archive. "
            "Available models: model",
            "model_not_found",
        ),
        ("Failed to initialize zip archive: failed finding central directory", "archive"),
        ("/tmp/x/model.wrapper.so: undefined symbol: aoti_torch_foo", "abi"),
        ("something unexpected", "other"),
    ],
)
def test_load_failure_kinds(message: str, kind: str) -> None:
    fail = classify_load_failure(exc_type="RuntimeError", message=message)
    assert fail.kind == kind
    if kind != "other":
        assert message.split("\n")[0][:30] in fail.summary


def test_load_crash_and_timeout() -> None:
    fail = classify_load_failure(log=SEGV_LOG, signal="SIGSEGV")
    assert fail.kind == "crash" and "SIGSEGV" in fail.summary
    assert classify_load_failure(timed_out=True).kind == "timeout"


def test_compile_failure_keeps_compiler_errors_not_the_traceback() -> None:
    message = (
        "CppCompileError: C++ compile error\n\nCommand:\ng++ /tmp/x/c.cpp -shared -fPIC -o c.so\n\n"
        "Output:\n/tmp/x/c.cpp: In function 'void kernel(float*)':\n"
        "/tmp/x/c.cpp:12:5: error: 'tmp9' was not declared in this scope\n"
        "   12 |     tmp9 = 1;\n"
    )
    log = (
        "Traceback (most recent call last):\n"
        '  File "/site-packages/torch/_inductor/codecache.py", line 100, in compile\n'
        "torch._inductor.exc.InductorError: CppCompileError: C++ compile error\n"
    )
    fail = classify_compile_failure(exc_type="InductorError", message=message, log=log)
    assert fail.kind == "error"
    assert fail.evidence[0] == "/tmp/x/c.cpp:12:5: error: 'tmp9' was not declared in this scope"
    assert "torch._inductor.exc.InductorError: CppCompileError: C++ compile error" in fail.evidence
    assert not any(line.startswith("File ") for line in fail.evidence)
    assert "was not declared" in fail.summary


def test_compile_crash_and_device_fault() -> None:
    assert classify_compile_failure(signal="SIGSEGV").kind == "crash"
    fail = classify_compile_failure(
        exc_type="RuntimeError", message="CUDA error: an illegal memory access was encountered"
    )
    assert fail.kind == "device_fault"
