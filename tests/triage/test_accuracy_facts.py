"""The cause ladder's graph facts (worker.accuracy.node_facts) over the FX nodes of real exported
programs (torch.export.export, no compile): only ops that reduce are a reduction, whatever
their names look like."""

from __future__ import annotations

import torch

from aotipre.runner.worker.accuracy import node_facts, reduces


class Pointwise(torch.nn.Module):
    """Ops named like reductions (max, min, norm-free clamps) that are elementwise."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        a = torch.clamp_max(x, 0.5) + torch.clamp_min(y, -0.5)
        b = torch.maximum(x, y) - torch.minimum(x, y)
        c = torch.max(x, y) * torch.min(x, y)  # the binary overloads: max.other, min.other
        return torch.relu(a + b + c).clamp(max=2.0)


class Reductions(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln = torch.nn.LayerNorm(8)
        self.gn = torch.nn.GroupNorm(2, 4)

    def forward(self, x: torch.Tensor, img: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            x.sum(),
            x.mean(dim=1),
            x.amax(dim=-1),
            x.max(dim=1).values,
            x.prod(),
            x.var(dim=0),
            x.norm(dim=1),
            torch.softmax(x, dim=-1),
            torch.log_softmax(x, dim=-1),
            self.ln(x),
            self.gn(img),
            x.argmax(dim=1),
            x.cumsum(dim=1),
            x.logsumexp(dim=1),
        )


class BatchNorms(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return self.bn(img)


def op_nodes(module: torch.nn.Module, *args: torch.Tensor) -> list[torch.fx.Node]:
    """The call_function nodes of `ep.module()`'s graph (the graph provenance names)."""
    gm = torch.export.export(module, args).module()
    return [n for n in gm.graph.nodes if n.op == "call_function"]


def test_pointwise_ops_named_like_reductions_are_not_reductions() -> None:
    nodes = op_nodes(Pointwise(), torch.randn(4, 8), torch.randn(4, 8))
    names = {str(n.target) for n in nodes}
    assert {"aten.clamp_max.default", "aten.maximum.default", "aten.minimum.default"} <= names
    assert [n.name for n in nodes if reduces(n)] == []
    assert node_facts(nodes)["reduction"] is False


def test_each_reduction_is_a_reduction() -> None:
    nodes = op_nodes(Reductions().eval(), torch.randn(4, 8), torch.randn(2, 4, 3, 3))
    reducing = {str(n.target).split(".")[1] for n in nodes if reduces(n)}
    expected = {"sum", "mean", "amax", "max", "prod", "var", "softmax", "log_softmax"}
    expected |= {"linalg_vector_norm", "layer_norm", "group_norm", "argmax", "cumsum", "logsumexp"}
    assert expected <= reducing, expected - reducing
    others = [n for n in nodes if not reduces(n)]
    assert all(str(n.target) == "<built-in function getitem>" for n in others), others
    assert node_facts(nodes)["reduction"] is True


def test_a_batch_norm_reduces_only_when_it_computes_batch_statistics() -> None:
    img = torch.randn(2, 4, 3, 3)
    assert node_facts(op_nodes(BatchNorms().eval(), img))["reduction"] is False
    assert node_facts(op_nodes(BatchNorms().train(), img))["reduction"] is True
