"""Static checks: every check runs on torch-free specs and returns findings; none prints or exits."""

from __future__ import annotations

from aotipre.checks.contract import (
    check_checkpoint,
    check_loading,
    check_specialized,
    check_unplaced_specialized,
)
from aotipre.checks.indices import check_index_values
from aotipre.checks.inputs import check_inputs
from aotipre.checks.package import check_host, check_package
from aotipre.findings import Finding
from aotipre.host import HostInfo
from aotipre.inputs.meta import SampleInputs
from aotipre.pt2.spec import ModelInfo, PackageInfo


def run_static_checks(
    package: PackageInfo,
    models: list[ModelInfo],
    samples: dict[str, SampleInputs | None],
    host: HostInfo,
    *,
    soft_host: bool,
    compile_at_deploy: bool = False,
) -> list[Finding]:
    """Package checks, then how a deployment loads it, then host compatibility, then each
    model's call contract and sample inputs, in that order."""
    findings = check_package(package, models)
    findings.extend(check_loading(package, models, compile_at_deploy=compile_at_deploy))
    for model in models:
        findings.extend(check_host(model, host, soft=soft_host))
        sample = samples.get(model.name)
        checkpoint = check_checkpoint(model, sample) if sample is not None else []
        if checkpoint:  # one clear finding, not one per parameter name
            findings.extend(checkpoint)
            continue
        findings.extend(check_specialized(model, sample))
        findings.extend(check_unplaced_specialized(model, sample))
        if sample is not None and model.contract_source != "none":
            findings.extend(check_inputs(model, sample))
            findings.extend(check_index_values(package, model, sample))
    return findings
