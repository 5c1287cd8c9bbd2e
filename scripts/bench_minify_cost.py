"""What --minify costs a check whose compile succeeds (issue 44: "the minifier step costs nothing
when compile succeeds"): `aotipre check EP --compile-at-deploy` of an ExportedProgram-only
package, with and without --minify, alternated, each run a fresh process with a fresh, empty
inductor cache and aotipre compile cache (so each compiles), the medians compared.

    python scripts/bench_minify_cost.py [--repeat 3] [--json OUT]

The package: fixtures/models.py's TinyMLP exported and saved with torch.export.save (built by
this script in a fresh process, not timed). The run is refused (exit 1, no figure) when a check
fails to compile or a --minify run reports a minifier result (AOT807) on a compile that
succeeded."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from _bench import fresh, torch_version  # noqa: E402 - the benchmarks' shared helpers

BUILD = """
import sys, torch
sys.path.insert(0, sys.argv[2])
from fixtures.models import TinyMLP
torch.manual_seed(0)
model = TinyMLP().eval()
x = torch.randn(2, 4, 8)
ep = torch.export.export(model, (x,))
torch.export.save(ep, sys.argv[1] + "/ep.pt2")
torch.save(((x,), {}), sys.argv[1] + "/inputs.pt")
"""


def one(tmp: str, minify: bool) -> dict[str, object]:
    work = tempfile.mkdtemp(prefix="minify-" if minify else "plain-", dir=tmp)
    report = os.path.join(work, "report.json")
    args = [
        "-m", "aotipre", "check", os.path.join(tmp, "ep.pt2"), "--inputs",
        os.path.join(tmp, "inputs.pt"), "--compile-at-deploy", "--no-config", "--no-progress",
        "--cache-dir", os.path.join(work, "cache"), "--format", "json", "--output", report,
    ]  # fmt: skip
    if minify:
        args.append("--minify")
    env = {"TORCHINDUCTOR_CACHE_DIR": os.path.join(work, "inductor"), "PYTHONPATH": str(REPO)}
    run = fresh("import sys; from aotipre.cli import main; sys.exit(main())", *args[2:], env=env)
    data = json.loads(Path(report).read_text()) if os.path.exists(report) else {}
    codes = [f.get("code") for f in data.get("findings") or []]
    stages = {s.get("name"): s.get("status") for s in data.get("stages") or []}
    return {
        "s": run.seconds,
        "exit": run.returncode,
        "codes": codes,
        "compile": stages.get("compile"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="also write the results here")
    opts = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="aotipre-bench-minify-")
    try:
        built = fresh(BUILD, tmp, str(REPO))
        if built.returncode != 0:
            print(f"building the package failed:\n{built.log[-3000:]}", file=sys.stderr)
            return 1
        rows: list[dict[str, object]] = []
        for i in range(opts.repeat):
            for minify in (False, True) if i % 2 == 0 else (True, False):
                row = {"minify": minify, **one(tmp, minify)}
                print(json.dumps(row), flush=True)
                if row["compile"] != "passed" or "AOT807" in row["codes"]:  # type: ignore[operator]
                    print(f"refused: {row}", file=sys.stderr)
                    return 1
                rows.append(row)
        plain = statistics.median(float(r["s"]) for r in rows if not r["minify"])  # type: ignore[arg-type]
        minify = statistics.median(float(r["s"]) for r in rows if r["minify"])  # type: ignore[arg-type]
        summary = {
            "repeat": opts.repeat, "torch": torch_version(), "cores": os.cpu_count(),
            "load_avg": os.getloadavg(), "check_s": plain, "check_minify_s": minify,
            "ratio": minify / plain,
        }  # fmt: skip
        print(json.dumps(summary, indent=1))
        if opts.json:
            Path(opts.json).write_text(json.dumps({"summary": summary, "runs": rows}, indent=1))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
