"""pytest plugin (entry point `pytest11`): the `aotipre_check` fixture and the `aotipre` marker.

Loaded into every pytest session of an environment that has aotipre installed, so it imports
nothing heavy at module level (no torch, not even aotipre's checks) until a test asks for it.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from aotipre.findings import Report

MARKER = "aotipre"
_CALL_ONLY = ("inputs", "model", "example_inputs", "example_kwargs", "dynamic_shapes", "name")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(package, inputs=None, **options): after the test body passes, check the .pt2 "
        "package with aotipre and fail the test when the gate fails (options as in "
        "[tool.aotipre], e.g. static_only=True, fail_on='warning')",
    )


class AotipreCheck:
    """The `aotipre_check` fixture's value: call it to gate a package or an in-memory model."""

    def __init__(self, rootpath: Path) -> None:
        self.rootpath = rootpath

    def __call__(self, subject: Any, *, gate: bool = True, **options: Any) -> Report:
        """Check `subject` (a .pt2 path relative to the rootdir, an ExportedProgram, or an
        nn.Module with `example_inputs=`) and return the Report.

        `options`: `inputs`, `model`, `example_inputs`, `example_kwargs`, `dynamic_shapes`,
        `name`, and any `[tool.aotipre]` key in snake_case (`static_only=True`,
        `fail_on="warning"`, `ignore=["AOT013"]`, `baseline="aotipre-baseline.json"`, ...),
        over the project's configuration file. With `gate=True` (the default) a report that
        does not pass fails the test, and the message shows the findings table.
        """
        __tracebackhide__ = True
        from aotipre.foundation.errors import AotipreError

        try:
            report = run_check(self.rootpath, subject, dict(options))
        except AotipreError as exc:  # a bad option, config file or baseline: say it in one line
            pytest.fail(f"aotipre: error: {exc}", pytrace=False)
        if gate and int(report.exit_code) != 0:
            pytest.fail(failure_message(report), pytrace=False)
        return report


def run_check(rootpath: Path, subject: Any, options: dict[str, Any]) -> Report:
    """Settings: defaults < the config file found from `rootpath` < `options`."""
    from aotipre import api, config
    from aotipre.findings.baseline import load_baseline
    from aotipre.program import is_path

    call = {k: options.pop(k) for k in _CALL_ONLY if k in options}
    file_settings = config.load_config(start=rootpath)
    values = config.parse_values(
        {k.replace("_", "-"): v for k, v in options.items()},
        "aotipre_check()",
        rootpath,
    )
    settings = file_settings.merged(values)
    if is_path(subject):
        subject = _rooted(rootpath, subject)
        inputs = call.pop("inputs", None)
        inputs = _rooted(rootpath, inputs) if inputs is not None else None
        inputs = inputs or settings.inputs_for(subject)
    else:
        inputs = call.pop("inputs", None)
    baseline = load_baseline(settings.baseline) if settings.baseline else None
    check_options = settings.check_options(
        inputs=inputs, model=call.pop("model", None), baseline=baseline
    )
    return api.check(subject, check_options, **call)


def failure_message(report: Report) -> str:
    from aotipre.report import table

    head = f"aotipre gate {report.verdict.value.upper()} for {report.package_path}"
    return head + "\n\n" + table.render_report(report)


def _rooted(rootpath: Path, path: Any) -> str:
    candidate = Path(path)
    return str(candidate if candidate.is_absolute() else rootpath / candidate)


@pytest.fixture
def aotipre_check(request: pytest.FixtureRequest) -> AotipreCheck:
    """Gate a package or model in a test: `aotipre_check("model.pt2", inputs="x.pt")`."""
    return AotipreCheck(request.config.rootpath)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    result = yield  # the test body ran and passed (a failure raises out of the yield)
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        __tracebackhide__ = True
        options = dict(marker.kwargs)
        args = list(marker.args)
        package = options.pop("package", None) or (args.pop(0) if args else None)
        if package is None or args:
            pytest.fail(
                f"@pytest.mark.{MARKER} takes one package path: "
                f"@pytest.mark.{MARKER}('model.pt2', inputs='x.pt')",
                pytrace=False,
            )
        AotipreCheck(item.config.rootpath)(package, **options)
    return result
