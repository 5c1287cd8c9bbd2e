"""Accuracy triage's repro cut on real exported programs (torch.export.export, no compile): the
divergent kernel's FX nodes cut out of `ep.module()` compute what they compute in the program,
fed with the eager values of their inputs; a cut grows by its inputs' producers; the repro and
latency records round-trip through JSON."""

from __future__ import annotations

import pytest
import torch

from aotipre.runner.worker.protocol import StepError
from aotipre.runner.worker.subgraph import cut, external_inputs, grown, op_nodes
from aotipre.triage.accuracy_diagnosis import AccuracyDiagnosis, KnobTrial, Latency, Repro


class LinearReluMul(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.lin(x)) * 2.0
        return y + torch.max(y, dim=-1).values.unsqueeze(-1)


Program = tuple[torch.fx.GraphModule, torch.Tensor, dict[str, torch.Tensor]]


@pytest.fixture(scope="module")
def program() -> Program:
    """(ep.module(), the input, every node's eager value)."""
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    gm = torch.export.export(LinearReluMul().eval(), (x,)).module()
    values: dict[str, torch.Tensor] = {}

    class Recording(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> object:
            out = super().run_node(n)
            values[n.name] = out
            return out

    with torch.no_grad():
        Recording(gm).run(x)
    return gm, x, values


def names(nodes: list[torch.fx.Node]) -> list[str]:
    return [n.name for n in nodes]


def test_a_cut_of_the_kernels_nodes_computes_what_they_compute_in_the_program(
    program: Program,
) -> None:
    gm, _, values = program
    (first, *_) = grown(gm, ["relu", "mul"], 0)
    assert names(first) == ["relu", "mul"]
    sub, inputs = cut(gm, first, values)
    assert [n.name for n in sub.graph.nodes if n.op == "placeholder"] == ["linear"]
    assert len(op_nodes(sub)) == 2 < len(op_nodes(gm))
    assert torch.equal(inputs[0], values["linear"])
    with torch.no_grad():
        (out,) = sub(*inputs)
    assert torch.equal(out, values["mul"])
    ep = torch.export.export(sub, inputs)  # what the worker compiles alone
    with torch.no_grad():
        assert torch.equal(ep.module()(*inputs)[0], values["mul"])


def test_a_cut_reading_parameters_carries_them_and_grows_by_its_inputs_producers(
    program: Program,
) -> None:
    gm, x, values = program
    sets = grown(gm, ["relu"], 2)
    assert names(sets[0]) == ["relu"]
    assert names(sets[1]) == ["linear", "relu"]  # the producer of relu's input
    assert len(sets) == 2  # linear reads only the graph input and parameters: it stops growing
    assert {n.op for n in external_inputs(sets[1])} == {"placeholder", "get_attr"}
    sub, inputs = cut(gm, sets[1], values)
    assert {n for n, _ in sub.named_parameters()} == {"lin_weight", "lin_bias"}
    assert len(inputs) == 1 and torch.equal(inputs[0], x)
    with torch.no_grad():
        assert torch.equal(sub(*inputs)[-1], values["relu"])


def test_a_multi_output_node_brings_its_getitems_and_unknown_names_are_refused(
    program: Program,
) -> None:
    gm, _, values = program
    (first,) = grown(gm, ["max_1"], 0)  # aten.max.dim: (values, indices)
    assert names(first) == ["max_1", "getitem", "getitem_1"]
    sub, inputs = cut(gm, first, values)
    with torch.no_grad():
        outs = sub(*inputs)
    assert len(outs) == 2  # getitem (read outside the cut) and the last node
    assert torch.equal(outs[0], values["getitem"]) and torch.equal(outs[1], values["getitem_1"])
    with pytest.raises(StepError, match="none of the kernel's FX nodes"):
        grown(gm, ["no_such_node"], 1)


def test_the_repro_confirm_and_latency_round_trip_through_json() -> None:
    lat = Latency(runs=20, deployed_ms=2.0, rebuilt_ms=2.5)
    assert lat.cost_pct == pytest.approx(25.0)
    assert lat.text == "+25.0% latency (median of 20, 2 vs 2.5 ms)"
    d = AccuracyDiagnosis(
        model="m",
        trigger=("AOT701",),
        kernel="k",
        repro=Repro(True, "subgraph", ("add", "sub"), 5, 0.25, "/a/m/accuracy-repro", "d"),
        trials_on="repro",
        confirm=KnobTrial("precision-casts", {"emulate_precision_casts": True}, "cause", "x", 0.0),
        latency=lat,
    )
    data = d.to_dict()
    assert data["repro"]["node_count"] == {"program": 5, "repro": 2}
    assert AccuracyDiagnosis.from_dict(data) == d
