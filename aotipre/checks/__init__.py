"""Static checks: every check runs on torch-free specs and returns findings; none prints or exits."""

from __future__ import annotations

from aotipre.binaries.facts import IsaScanner
from aotipre.checks.contract import (
    check_checkpoint,
    check_contract_conflicts,
    check_data_ranges,
    check_loading,
    check_specialized,
    check_unplaced_specialized,
)
from aotipre.checks.indices import check_index_values
from aotipre.checks.inputs import check_inputs
from aotipre.checks.package import check_package
from aotipre.checks.target import TargetRow, check_host, check_runtime_bugs, row_for
from aotipre.environment.host import HostInfo
from aotipre.findings import Finding
from aotipre.inputs.meta import SampleInputs
from aotipre.pt2.archive import Archive
from aotipre.pt2.spec import ModelInfo, PackageInfo


def check_targets(
    package: PackageInfo,
    models: list[ModelInfo],
    hosts: list[HostInfo],
    *,
    soft: bool,
    archive: Archive | None = None,
) -> tuple[list[Finding], list[TargetRow]]:
    """Each model against each target: the findings, and one table row per model and target.
    `archive`: the package's open archive (else the instruction scan opens the path)."""
    scan = IsaScanner(archive if archive is not None else package.path)
    findings: list[Finding] = []
    rows = []
    for host in hosts:
        findings.extend(check_runtime_bugs(package, models, host))
        for model in models:
            found = check_host(model, host, soft=soft, scan=scan)
            findings.extend(found)
            rows.append(row_for(model, host, found))
    return findings, rows


def run_static_checks(
    package: PackageInfo,
    models: list[ModelInfo],
    samples: dict[str, SampleInputs | None],
    hosts: list[HostInfo],
    *,
    soft_host: bool,
    compile_at_deploy: bool = False,
    allow_pickle: bool = False,
    archive: Archive | None = None,
    deployment_checks_inputs: bool = False,
) -> tuple[list[Finding], list[TargetRow]]:
    """Package checks, then how a deployment loads it, then compatibility with each target,
    then each model's call contract and sample inputs, in that order. `allow_pickle`
    (--allow-pickle): pickled members are warnings; `deployment_checks_inputs` (the deployment
    sets AOTI_RUNTIME_CHECK_INPUTS): a sample laid out otherwise than compiled is an error."""
    findings = check_package(package, models, allow_pickle=allow_pickle)
    findings.extend(check_loading(package, models, compile_at_deploy=compile_at_deploy))
    target_findings, rows = check_targets(package, models, hosts, soft=soft_host, archive=archive)
    findings.extend(target_findings)
    for model in models:
        sample = samples.get(model.name)
        checkpoint = check_checkpoint(model, sample) if sample is not None else []
        if checkpoint:  # one clear finding, not one per parameter name
            findings.extend(checkpoint)
            continue
        findings.extend(check_contract_conflicts(model))
        findings.extend(check_specialized(model, sample))
        findings.extend(check_data_ranges(model))
        findings.extend(check_unplaced_specialized(model, sample))
        if sample is not None and model.contract_source != "none":
            findings.extend(
                check_inputs(model, sample, deployment_checks_inputs=deployment_checks_inputs)
            )
            findings.extend(check_index_values(package, model, sample, archive))
    return findings, rows
