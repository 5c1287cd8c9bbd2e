"""Naming the Triton kernel a compile was launching when it faulted, from the worker's launch
markers (synthetic logs in the marker format worker.traced_triton_launches writes)."""

from __future__ import annotations

import pytest

from aotipre.runner.user_kernels import describe, faulting_launch, launches

SYNC_FAULT = """\
@@aotipre-kernel start triton_poi_fused_0 -
@@aotipre-kernel end triton_poi_fused_0 -
@@aotipre-kernel start bad_double_kernel_0 probe::bad_double
@@aotipre-kernel end bad_double_kernel_0 probe::bad_double
@@aotipre-kernel start bad_double_kernel_0 probe::bad_double
RuntimeError: CUDA error: an illegal memory access was encountered
"""
ASYNC_FAULT = """\
@@aotipre-kernel start bad_double_kernel_0 probe::bad_double
@@aotipre-kernel end bad_double_kernel_0 probe::bad_double
@@aotipre-kernel start triton_poi_fused_1 -
@@aotipre-kernel end triton_poi_fused_1 -
torch.AcceleratorError: CUDA error: an illegal memory access was encountered
"""


def test_the_launch_that_never_returned_is_named() -> None:
    launch = faulting_launch(SYNC_FAULT)
    assert launch is not None
    assert (launch.kernel, launch.op, launch.ended, launch.user) == (
        "bad_double_kernel_0",
        "probe::bad_double",
        False,
        True,
    )
    assert describe(launch) == (
        "user Triton kernel bad_double_kernel_0 (launched by probe::bad_double): "
        "the launch that never returned"
    )
    assert [k.ended for k in launches(SYNC_FAULT)] == [True, True, False]


def test_asynchronous_launches_name_the_last_user_kernel_with_a_caveat() -> None:
    launch = faulting_launch(ASYNC_FAULT)
    assert launch is not None and launch.kernel == "bad_double_kernel_0" and launch.ended
    assert "CUDA_LAUNCH_BLOCKING=1" in describe(launch)


@pytest.mark.parametrize("log", ["", "no markers here\n", "@@aotipre-kernel start\n"])
def test_no_launch_no_name(log: str) -> None:
    assert faulting_launch(log) is None
