"""The compiled model's constants, as `inspect` reports them from wrapper.cpp, against what plain
torch's loader does with them in a fresh process: a full weight swap built from the reported
FQNs, dtypes and shapes must be accepted, and must change the outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.pt2.reader import read_package
from aotipre.pt2.spec import ConstantSpec, ModelInfo, package_to_dict
from aotipre.report.table import constants_summary

SWAP = """
import json, sys, torch
spec = json.loads(sys.argv[2])
m = torch._inductor.aoti_load_package(sys.argv[1])
(args, kwargs) = torch.load(sys.argv[3])
before = m(*args, **kwargs)
swap = {c["fqn"]: torch.full(c["shape"], 0.5, dtype=getattr(torch, c["dtype"])) for c in spec}
m.load_constants(swap, check_full_update=True)
after = m(*args, **kwargs)
leaves = lambda o: [t for t in torch.utils._pytree.tree_flatten(o)[0] if isinstance(t, torch.Tensor)]
print(json.dumps({
    "fqns": sorted(m.get_constant_fqns()),
    "changed": any(not torch.equal(a, b) for a, b in zip(leaves(before), leaves(after))),
}))
"""


@pytest.mark.parametrize("name", ["aoti", "both"])
def test_a_weight_swap_built_from_the_reported_constants_is_accepted(
    name: str, pkg: Callable[[str], Path]
) -> None:
    (model,) = read_package(pkg(name)).models
    swappable = [c.to_dict() for c in model.constants if c.swappable]
    assert [c["fqn"] for c in swappable] == ["embed.weight", "proj.weight"]
    assert swappable[0]["dtype"] == "float32" and swappable[0]["shape"] == [500, 8]
    inputs = pkg("aoti_inputs")
    out = subprocess.run(
        [sys.executable, "-c", SWAP, str(pkg(name)), json.dumps(swappable), str(inputs)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    truth = json.loads(out.stdout.splitlines()[-1])
    assert truth["fqns"] == sorted(c["fqn"] for c in swappable)  # torch's own list
    assert truth["changed"]  # the swap reached the compiled model
    reported = package_to_dict(read_package(pkg(name)))["models"][0]["constants"]
    assert reported == [k.to_dict() for k in model.constants] and len(reported) == 2


def test_the_summary_counts_kinds_sizes_and_what_a_swap_replaces() -> None:
    def const(kind: str, size: int, folded: bool = False) -> ConstantSpec:
        return ConstantSpec("c", "m.c", "float32", (1,), kind, folded, size)

    model = ModelInfo(
        name="m",
        has_exported_program=False,
        aoti=None,
        torch_version=None,
        schema_version=None,
        inputs=(),
        outputs=(),
        symbols=(),
        signature=None,
        contract_source="none",
        constants=(
            const("Parameter", 3 << 20),
            const("Parameter", 1024),
            const("Buffer", 512),
            const("TensorConstant", 4),
            const("FoldedConstant", 8, folded=True),
        ),
    )
    assert constants_summary(model) == (
        "5 tensors, 3.0 MiB: 1 buffer, 1 folded, 2 parameters, 1 tensor constant; "
        "a weight swap replaces 3 (by FQN; the JSON lists them)"
    )
    assert [c.swappable for c in model.constants] == [True, True, True, False, False]
