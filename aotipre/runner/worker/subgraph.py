"""Accuracy triage's repro steps: cut the divergent kernel's FX nodes out of the ExportedProgram
as a standalone program (placeholders fed with the eager values of their producers, the
parameters and buffers they read), export it, compile it alone and keep it only when it still
differs from eager (`accuracy_repro`); rebuild that repro with a knob (`accuracy_repro_trial`);
time the deployed package against a rebuild, alternately in one process (`accuracy_latency`)."""

from __future__ import annotations

import json
import operator
import os
import shutil
import statistics
import time
from typing import Any

import torch
import torch.utils._pytree as pytree

from .compare import compare_outputs
from .compiling import check_inductor_configs
from .core import WorkerCore
from .host import users_tempdir
from .loading import load_direct
from .protocol import StepError

MAX_GROW = 4
"""Times a repro that does not differ alone is grown by its inputs' producers, at most."""
REPRO_PY = '''"""Accuracy repro written by aotipre: the subgraph around the divergent kernel, compiled
alone with AOTInductor, differs from the same subgraph run eagerly. Plain torch only:
    python repro.py
"""

import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "repro.json")) as f:
    META = json.load(f)


def main() -> int:
    ep = torch.export.load(os.path.join(HERE, "subgraph.pt2"))
    args = torch.load(os.path.join(HERE, "inputs.pt"), weights_only=True)
    args = tuple(t.to(META.get("device", "cpu")) for t in args)
    configs = META["inductor_configs"]
    if len(sys.argv) > 1:  # extra configs as JSON, e.g. '{"emulate_precision_casts": true}'
        configs = {**configs, **json.loads(sys.argv[1])}
    path = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.join(HERE, "compiled.pt2"), inductor_configs=configs
    )
    compiled = torch._inductor.aoti_load_package(path)
    torch.manual_seed(META["seed"])
    with torch.no_grad():
        got = compiled(*args)
    torch.manual_seed(META["seed"])
    with torch.no_grad():
        want = ep.module()(*args)
    got = got if isinstance(got, (list, tuple)) else [got]
    want = want if isinstance(want, (list, tuple)) else [want]
    differs = False
    for i, (a, e) in enumerate(zip(got, want)):
        a64, e64 = a.double(), e.double()
        close = torch.isclose(a64, e64, rtol=META["rtol"], atol=META["atol"], equal_nan=True)
        bad = int((~close).sum())
        both = torch.isfinite(a64) & torch.isfinite(e64)
        worst = float((a64 - e64).abs()[both].max()) if bool(both.any()) else float("nan")
        print(
            f"output {i}: {bad} of {a.numel()} elements differ beyond rtol={META['rtol']}, "
            f"atol={META['atol']}; max abs error {worst:.6g}"
        )
        differs = differs or bad > 0
    print("compiled differs from eager" if differs else "compiled matches eager")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def op_nodes(gm: Any) -> list[Any]:
    """The graph's operator nodes (call_function): what a repro's node count counts."""
    return [n for n in gm.graph.nodes if n.op == "call_function"]


def grown(gm: Any, names: list[str], times: int) -> list[list[Any]]:
    """The node sets tried, smallest first: the named operator nodes (with the getitem users
    of a multi-output one), then that set plus the operator nodes producing its inputs, up to
    `times` times (a set that stops growing ends the list)."""
    ops = op_nodes(gm)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    chosen = {n for n in ops if n.name in set(names)}
    if not chosen:
        raise StepError(f"none of the kernel's FX nodes {names} is an operator of ep.module()")

    def closed(nodes: set[Any]) -> set[Any]:
        extra = {
            u
            for n in nodes
            if isinstance(n.meta.get("val"), (list, tuple))
            for u in n.users
            if u.op == "call_function" and u.target is operator.getitem
        }
        return nodes | extra

    sets = [closed(chosen)]
    for _ in range(times):
        last = sets[-1]
        more = {a for n in last for a in n.all_input_nodes if a.op == "call_function"}
        nxt = closed(last | more)
        if nxt == last:
            break
        sets.append(nxt)
    return [sorted(s, key=order.__getitem__) for s in sets]


def external_inputs(nodes: list[Any]) -> list[Any]:
    """The nodes outside `nodes` whose values they read (placeholders, get_attr, producers)."""
    inside = set(nodes)
    seen: dict[Any, None] = {}
    for n in nodes:
        for a in n.all_input_nodes:
            if a not in inside:
                seen.setdefault(a, None)
    return list(seen)


def cut(gm: Any, nodes: list[Any], values: dict[str, Any]) -> tuple[Any, tuple[Any, ...]]:
    """(a GraphModule computing `nodes` alone, its inputs): each value read from outside is a
    placeholder fed with its eager value, or (a get_attr) the parameter or buffer itself; its
    outputs are the nodes whose values are used outside the set (or the last node)."""
    graph = torch.fx.Graph()
    root = torch.nn.Module()
    env: dict[Any, Any] = {}
    inputs: list[Any] = []
    for a in external_inputs(nodes):
        if a.op == "get_attr":
            value = gm
            for part in str(a.target).split("."):
                value = getattr(value, part)
            name = str(a.target).replace(".", "_")
            if isinstance(value, torch.nn.Parameter):
                root.register_parameter(name, value)
            elif isinstance(value, torch.Tensor):
                root.register_buffer(name, value)
            else:
                setattr(root, name, value)
            env[a] = graph.get_attr(name)
            continue
        if a.name not in values:
            raise StepError(f"no eager value for {a.name!r}, an input of the subgraph")
        value = values[a.name]
        if not isinstance(value, torch.Tensor):
            raise StepError(f"{a.name!r}, an input of the subgraph, is not a tensor")
        env[a] = graph.placeholder(a.name)
        inputs.append(value.detach().clone())
    inside = set(nodes)
    for n in nodes:
        env[n] = graph.node_copy(n, lambda x: env[x])
    outs = [
        n
        for n in nodes
        if isinstance(n.meta.get("val"), torch.Tensor)
        and (n is nodes[-1] or any(u not in inside for u in n.users))
    ]
    if not outs:
        raise StepError("the subgraph computes no tensor that is used outside it")
    graph.output(tuple(env[n] for n in outs))
    return torch.fx.GraphModule(root, graph), tuple(inputs)


def mismatches(cmp: dict[str, Any]) -> int:
    """Elements beyond tolerance over a comparison's outputs (a structure difference: 1)."""
    if cmp.get("structure"):
        return 1
    return sum(int(o.get("mismatches") or 0) + bool(o.get("structure")) for o in cmp["outputs"])


def max_abs(cmp: dict[str, Any]) -> float | None:
    vals = [float(o["max_abs"]) for o in cmp.get("outputs") or [] if o.get("max_abs") is not None]
    return max(vals) if vals else None


class SubgraphOps(WorkerCore):
    """Steps `accuracy_repro`, `accuracy_repro_trial` and `accuracy_latency`."""

    def _eager(self, gm: Any, wanted: set[str]) -> dict[str, Any]:
        """The eager value of every node of `ep.module()` named in `wanted` on the inputs."""
        args, kwargs = self.get_inputs({})
        values: dict[str, Any] = {}

        class Recording(torch.fx.Interpreter):
            def run_node(self, n: Any) -> Any:
                out = super().run_node(n)
                if n.name in wanted:
                    values[n.name] = out
                return out

        in_spec = getattr(gm, "_in_spec", None)
        if kwargs and in_spec is not None:
            from torch.export._tree_utils import reorder_kwargs

            kwargs = reorder_kwargs(kwargs, in_spec)
        flat = pytree.tree_flatten((tuple(args), dict(kwargs)))[0]
        torch.manual_seed(int(self.job.get("seed") or 0))
        with torch.no_grad():
            Recording(gm).run(*flat)
        return values

    def _compile_compare(
        self, ep: Any, inputs: tuple[Any, ...], configs: dict[str, Any], out: str
    ) -> dict[str, Any]:
        """Compile `ep` alone into `out`, run it and `ep.module()` on `inputs` (seeded alike),
        and compare: compare_outputs' record plus `mismatches` and `max_abs`."""
        check_inductor_configs(configs)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with users_tempdir():
            path = torch._inductor.aoti_compile_and_package(
                ep, package_path=out, inductor_configs=configs
            )
        runner = load_direct(str(path), "model", self.index)
        seed = int(self.job.get("seed") or 0)
        torch.manual_seed(seed)
        with torch.no_grad():
            got = runner(*inputs)
        torch.manual_seed(seed)
        with torch.no_grad():
            want = ep.module()(*inputs)
        cmp = compare_outputs(got, want, self.job.get("rtol"), self.job.get("atol"))
        cmp["mismatches"] = mismatches(cmp)
        cmp["max_abs"] = max_abs(cmp)
        return cmp

    def op_accuracy_repro(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Cut the kernel's nodes (`step["nodes"]`) out of the program, export the cut, compile
        it alone with `step["inductor_configs"]` and compare it with its own eager run; grow
        it by its inputs' producers (at most `step["grow"]` times) until it differs. The first
        cut that differs is written to `step["out"]` (subgraph.pt2, inputs.pt, repro.json,
        repro.py); `verified` False when none does."""
        gm = self.eager_module()
        names = [str(n) for n in step["nodes"]]
        configs = dict(step.get("inductor_configs") or {})
        out, scratch = step["out"], step["scratch"]
        sets = grown(gm, names, min(int(step.get("grow", 2)), MAX_GROW))
        wanted = {a.name for nodes in sets for a in external_inputs(nodes)}
        self.phase(entry, "eager")
        values = self._eager(gm, wanted)
        entry["program_nodes"] = len(op_nodes(gm))
        entry["attempts"] = []
        entry["verified"] = False
        for level, nodes in enumerate(sets):
            self.phase(entry, f"cut {level}")
            sub, inputs = cut(gm, nodes, values)
            sub_ep = torch.export.export(sub, inputs)
            self.phase(entry, f"compile {level}")
            cmp = self._compile_compare(
                sub_ep, inputs, configs, os.path.join(scratch, f"cut{level}", "package.pt2")
            )
            attempt = {
                "grown": level,
                "nodes": [n.name for n in nodes],
                "mismatches": cmp["mismatches"],
                "max_abs": cmp["max_abs"],
            }
            entry["attempts"].append(attempt)
            if not cmp["mismatches"]:
                continue
            entry.update(verified=True, **attempt, outputs=cmp["outputs"])
            self._write_repro(
                out, sub_ep, inputs, configs, attempt, cmp["outputs"], len(op_nodes(gm))
            )
            entry["out"] = out
            return

    def _write_repro(
        self,
        out: str,
        sub_ep: Any,
        inputs: tuple[Any, ...],
        configs: dict[str, Any],
        attempt: dict[str, Any],
        outputs: list[dict[str, Any]],
        program_nodes: int,
    ) -> None:
        """Write the verified repro's folder: subgraph.pt2, inputs.pt (on the CPU), repro.json
        (route, nodes, node counts, configs, device, seed, tolerance) and repro.py."""
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.makedirs(out)
        torch.export.save(sub_ep, os.path.join(out, "subgraph.pt2"))
        cpu = tuple(t.detach().cpu() for t in inputs)
        torch.save(cpu, os.path.join(out, "inputs.pt"))
        tols = [(o["rtol"], o["atol"]) for o in outputs if o.get("rtol") is not None]
        meta = {
            "route": "subgraph",
            "nodes": attempt["nodes"],
            "node_count": {"program": program_nodes, "repro": len(attempt["nodes"])},
            "grown": attempt["grown"],
            "inductor_configs": configs,
            "seed": int(self.job.get("seed") or 0),
            "device": self.device,
            "rtol": max((r for r, _ in tols), default=0.0),
            "atol": max((a for _, a in tols), default=0.0),
            "max_abs": attempt["max_abs"],
            "mismatches": attempt["mismatches"],
        }
        with open(os.path.join(out, "repro.json"), "w") as f:
            json.dump(meta, f, indent=2, default=str)
        with open(os.path.join(out, "repro.py"), "w") as f:
            f.write(REPRO_PY)

    def op_accuracy_repro_trial(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Rebuild the repro in `step["repro"]` with `step["inductor_configs"]` and compare it
        with its eager run. Skipped (`skipped`) when no repro was verified, or when a trial
        of `step["unless_matched"]` already matched eager."""
        folder = step["repro"]
        if not os.path.isfile(os.path.join(folder, "subgraph.pt2")):
            entry["skipped"] = "no verified repro"
            return
        for sid in step.get("unless_matched") or ():
            earlier = self.rec.data["steps"].get(sid) or {}
            if earlier.get("status") == "ok" and earlier.get("mismatches") == 0:
                entry["skipped"] = f"{sid} matched eager"
                return
        sub_ep = torch.export.load(os.path.join(folder, "subgraph.pt2"))
        inputs = torch.load(os.path.join(folder, "inputs.pt"), weights_only=True)
        inputs = tuple(t.to(self.device) for t in inputs)
        configs = dict(step.get("inductor_configs") or {})
        entry.update(self._compile_compare(sub_ep, inputs, configs, step["out"]))

    def op_accuracy_latency(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Time the package `step["a"]` and its rebuild `step["b"]` on the inputs, alternately
        in this process (each warmed up first): median of `step["runs"]` calls each. Skipped
        (`skipped`) unless step `step["when_matches"]` found no mismatch."""
        gate = step.get("when_matches")
        if gate:
            cmp = self.rec.data["steps"].get(gate) or {}
            if cmp.get("status") != "ok" or sum(
                int(o.get("mismatches") or 0) for o in cmp.get("outputs") or []
            ):
                entry["skipped"] = f"{gate} did not match eager"
                return
        args, kwargs = self.get_inputs(entry)
        self.phase(entry, "load")
        models = [
            load_direct(step["a"], step.get("a_model", "model"), self.index),
            load_direct(step["b"], step.get("model", "model"), self.index),
        ]
        sync = torch.cuda.synchronize if self.device.startswith("cuda") else (lambda: None)
        runs, warmup = int(step.get("runs", 20)), int(step.get("warmup", 3))
        deadline = time.monotonic() + float(step.get("budget_s", 60.0))
        self.phase(entry, "time")
        with torch.no_grad():
            for model in models:
                for _ in range(warmup):
                    model(*args, **kwargs)
                    sync()
            samples: list[list[float]] = [[], []]
            while len(samples[1]) < runs and (len(samples[1]) < 3 or time.monotonic() < deadline):
                for i, model in enumerate(models):
                    started = time.perf_counter()
                    model(*args, **kwargs)
                    sync()
                    samples[i].append((time.perf_counter() - started) * 1000.0)
        entry["runs"] = len(samples[1])
        entry["a_ms"] = statistics.median(samples[0])
        entry["b_ms"] = statistics.median(samples[1])
