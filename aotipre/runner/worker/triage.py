"""Crash-triage steps (aotipre.triage): the inputs saved for a repro bundle, statistics of the
inputs a kernel reads, and the AOTI minifier."""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

import torch
import torch.utils._pytree as pytree

from .core import WorkerCore
from .inputs import flat_tensors, load_inputs, tensor_stats, tensor_summary, value_at
from .protocol import not_available


def minifier_entry() -> Any:
    """torch._dynamo.repro.aoti.run_repro with the arguments the minify op passes."""
    try:
        from torch._dynamo.repro.aoti import run_repro
    except ImportError:
        raise not_available("the AOTI minifier (torch._dynamo.repro.aoti.run_repro)") from None
    params = inspect.signature(run_repro).parameters
    missing = [p for p in ("config_patches", "command", "save_dir", "check_str") if p not in params]
    if missing and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        raise not_available(f"run_repro({', '.join(missing)}=...)")
    return run_repro


class TriageOps(WorkerCore):
    """Steps `save_inputs`, `input_stats`, `minify`."""

    def op_save_inputs(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """torch.save the run's inputs as `(args, kwargs)` on the CPU (for a repro bundle)."""
        args, kwargs = self.get_inputs(entry)
        cpu = pytree.tree_map(
            lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, (args, kwargs)
        )
        os.makedirs(os.path.dirname(step["out"]) or ".", exist_ok=True)
        torch.save(cpu, step["out"])
        entry["inputs"] = [tensor_summary(t) for t in flat_tensors((args, kwargs))]
        entry["out"] = step["out"]

    def op_input_stats(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Statistics of sample inputs as a kernel reads them (crash triage's kernel-inputs
        step): each `tensors` entry names a leaf path of (args, kwargs), e.g. `args[0]`. Read on
        the CPU as the sample holds them (the values are the same on the model's device)."""
        args, kwargs = load_inputs(self.job["inputs"], self.job["source_package"])
        tree = {"args": list(args), "kwargs": dict(kwargs)}
        entry["stats"] = [
            {"name": want["name"], **tensor_stats(value_at(tree, want["path"]))}
            for want in step.get("tensors") or []
        ]

    def op_minify(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Run the AOTI minifier on the ExportedProgram with the failing inputs as its example
        inputs (torch._dynamo.repro.aoti.run_repro, command `minify`); it writes repro.py into
        `out_dir` (its working directory) and checkpoints under `out_dir`/debug."""
        ep = self.get_ep()
        args, kwargs = self.get_inputs(entry)
        ep.example_inputs = (tuple(args), dict(kwargs))
        out_dir = step["out_dir"]
        os.makedirs(out_dir, exist_ok=True)
        import torch._dynamo.config as dynamo_config

        run_repro = minifier_entry()

        dynamo_config.debug_dir_root = os.path.join(out_dir, "debug")
        configs = {**dict(step.get("inductor_configs") or {}), "aot_inductor.package": True}
        saved_argv, saved_cwd = sys.argv, os.getcwd()
        sys.argv = sys.argv[:1]  # run_repro parses sys.argv when it holds more than the script
        os.chdir(out_dir)
        try:
            self.phase(entry, "minify")
            with torch.no_grad():
                run_repro(
                    ep,
                    config_patches=configs,
                    command="minify",
                    save_dir=os.path.join(out_dir, "save"),
                    check_str=step.get("check_str"),
                )
        finally:
            sys.argv = saved_argv
            os.chdir(saved_cwd)
        repro = os.path.join(out_dir, "repro.py")
        entry["repro"] = repro if os.path.isfile(repro) else None
