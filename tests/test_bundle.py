"""`aotipre bundle`: one .pt2 with the AOTI code, the ExportedProgram, sample inputs and
expected outputs. Plain torch in a fresh process must load it unchanged; `aotipre check` must
use its references with no flags; a bad combination is one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre import CheckOptions, check
from aotipre.foundation.errors import UsageError
from aotipre.pt2.bundle import write_bundle
from aotipre.pt2.reader import read_package
from aotipre.runner.stages import DynamicOptions

Pkg = Callable[[str], Path]

PLAIN_TORCH = """
import sys, torch
path, inputs, expected, with_ep, device = sys.argv[1:6]
args, kwargs = torch.utils._pytree.tree_map(lambda t: t.to(device), torch.load(inputs))
out = torch._inductor.aoti_load_package(path)(*args, **kwargs)
torch.save(out.cpu(), expected)
if with_ep == "1":
    ep = torch.export.load(path)
    print(torch.__version__, "ran", tuple(out.shape), "eager equal:",
          torch.allclose(ep.module()(*args, **kwargs), out, atol=1e-5))
else:
    print(torch.__version__, "ran", tuple(out.shape))
"""


def plain_torch(
    package: Path, inputs: Path, outputs: Path, with_ep: bool, device: str = "cpu"
) -> str:
    """A fresh process, as a deployment runs it: aoti_load_package, the call on `device` (a CUDA
    package fed CPU tensors reads them as device memory: an illegal memory access, measured on
    the H200 without the runtime check), the outputs saved to `outputs`; with `with_ep`,
    torch.export.load of the same file, run eagerly."""
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN_TORCH, str(package), str(inputs), str(outputs),
         "1" if with_ep else "0", device],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.torch_versions
def test_a_bundle_loads_unchanged_and_checks_itself(pkg: Pkg, tmp_path: Path) -> None:
    """aoti.pt2 (AOTI code only, as aoti_compile_and_package writes it) + the ExportedProgram of
    the same TokenModel (both.pt2's) + sample inputs + the outputs plain torch computed."""
    golden = tmp_path / "golden.pt"
    assert "ran (3, 4)" in plain_torch(pkg("aoti"), pkg("aoti_inputs"), golden, False)
    out = tmp_path / "bundle.pt2"
    done = write_bundle(
        str(pkg("aoti")),
        str(out),
        exported_program=str(pkg("both")),
        inputs=str(pkg("aoti_inputs")),
        expected=str(golden),
    )
    assert done.model == "model" and len(done.added) == 3
    # torch in a fresh process: aoti_load_package and torch.export.load both read it
    again = tmp_path / "again.pt"
    line = plain_torch(out, pkg("aoti_inputs"), again, True)
    assert "ran (3, 4) eager equal: True" in line, line
    import torch

    assert torch.equal(torch.load(again), torch.load(golden))
    info = read_package(out)
    (m,) = info.models
    assert m.has_aoti and m.has_exported_program
    assert m.sample_inputs_member == "aoti/data/sample_inputs/model.pt"
    assert m.expected_outputs_member == "aoti/data/aotipre/model.expected_outputs.pt"
    # no flags: the stored inputs run, compared with the ExportedProgram and the stored outputs
    report = check(str(out), CheckOptions(dynamic=DynamicOptions(probe=False)))
    compare = next(s for s in report.stages if s.name == "compare")
    assert compare.status.value == "passed", compare.detail
    assert "match the ExportedProgram in the archive run eagerly" in compare.detail
    assert "match the expected outputs stored in the archive" in compare.detail
    # expected outputs that are off are an error naming the stored reference
    torch.save(torch.load(golden) + 1.0, golden)
    write_bundle(
        str(pkg("aoti")),
        str(out),
        exported_program=str(pkg("both")),
        inputs=str(pkg("aoti_inputs")),
        expected=str(golden),
    )
    report = check(str(out), CheckOptions(dynamic=DynamicOptions(probe=False)))
    (f,) = [f for f in report.findings if f.code == "AOT701"]
    assert "compared with the expected outputs stored in the archive" in f.message
    assert report.verdict.value == "fail"


def test_bad_combinations_are_one_line(pkg: Pkg, tmp_path: Path) -> None:
    out = tmp_path / "b.pt2"
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a zip")
    cases = [
        (dict(package=pkg("aoti")), "has AOTI code only; pass --exported-program"),
        (dict(package=pkg("aoti"), exported_program=pkg("aoti")), "no ExportedProgram for model"),
        (dict(package=pkg("both"), exported_program=pkg("both")), "already holds its Exported"),
        (dict(package=pkg("ep_only")), "has no AOTI code"),
        (dict(package=pkg("multi")), "holds 2 (decoder, encoder): pass --model NAME"),
        (dict(package=pkg("aoti"), exported_program=garbage), "--exported-program"),
        (dict(package=pkg("both"), expected=garbage), "--expected"),
        (dict(package=pkg("both"), inputs=tmp_path / "missing.pt"), "--inputs"),
        (dict(package=tmp_path / "missing.pt2"), "package"),
        # another model's program (TinyMLP's x for TokenModel's ids and mask): a bundle with it
        # made `check` judge the inputs against the wrong contract
        (
            dict(package=pkg("aoti"), exported_program=pkg("ep_only")),
            "not the program model 'model' was compiled from (1 tensor input(s), the AOTI code "
            "takes 2)",
        ),
    ]
    for kwargs, why in cases:
        package = str(kwargs.pop("package"))
        with pytest.raises(UsageError) as err:
            write_bundle(package, str(out), **{k: str(v) for k, v in kwargs.items()})
        assert why in str(err.value) and "\n" not in str(err.value), (kwargs, err.value)
        assert not out.exists()
    assert list(tmp_path.iterdir()) == [garbage]  # no temporary file left behind
    with pytest.raises(UsageError, match="would overwrite"):
        write_bundle(str(pkg("both")), str(pkg("both")))
    # an output that is a folder, or a pipe (the bundle's rename would have replaced it)
    with pytest.raises(UsageError, match="is a directory"):
        write_bundle(str(pkg("both")), str(tmp_path))
    fifo = tmp_path / "fifo.pt2"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        write_bundle(str(pkg("both")), str(fifo))
    assert fifo.is_fifo()


WIDER_PROGRAM = """
import sys, torch
from torch import nn
from fixtures.models import VOCAB

class Wider(nn.Module):  # TokenModel's inputs and output, a 16-wide embedding in place of 8
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.proj = nn.Linear(16, 4)

    def forward(self, input_ids, attention_mask):
        return self.proj(self.embed(input_ids) * attention_mask.unsqueeze(-1)).sum(dim=1)

package, inputs, out = sys.argv[1:4]
(ids, mask), _ = torch.load(inputs)
ep = torch.export.export(Wider().eval(), (ids, mask))
torch.export.save(ep, out)
compiled = torch._inductor.aoti_load_package(package)(ids, mask)
eager = torch.export.load(out).module()(ids, mask)
print(tuple(compiled.shape) == tuple(eager.shape), torch.allclose(compiled, eager))
"""


def test_another_models_program_with_the_same_signature_is_refused(
    pkg: Pkg, tmp_path: Path
) -> None:
    """The ExportedProgram of a model with TokenModel's inputs and output but other weight
    shapes (embed.weight [VOCAB, 16] where aoti.pt2 holds [VOCAB, 8]): plain torch runs both on
    the same inputs to outputs of one shape and other values, so a bundle of the pair fails its
    comparison as if miscompiled. bundle refuses it, and check says AOT070, by one judgement."""
    wider = tmp_path / "wider.pt2"
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-c", WIDER_PROGRAM, str(pkg("aoti")), str(pkg("aoti_inputs")),
         str(wider)],
        capture_output=True, text=True, timeout=600, cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-2:] == ["True", "False"]  # same shape, other values
    out = tmp_path / "b.pt2"
    with pytest.raises(UsageError) as err:
        write_bundle(str(pkg("aoti")), str(out), exported_program=str(wider))
    assert "not the program model 'model' was compiled from" in str(err.value)
    assert "parameter 'embed.weight' is [" in str(err.value) and ", 16], the AOTI" in str(err.value)
    assert not out.exists()
    report = check(pkg("aoti"), CheckOptions(exported_program=str(wider), static_only=True))
    (f,) = [f for f in report.findings if f.code == "AOT070"]
    assert f.severity.value == "error" and "embed.weight" in f.message


def test_the_bundle_keeps_every_member_and_adds_the_references(pkg: Pkg, tmp_path: Path) -> None:
    out = tmp_path / "b.pt2"
    write_bundle(str(pkg("aoti")), str(out), exported_program=str(pkg("both")))
    with zipfile.ZipFile(pkg("aoti")) as src, zipfile.ZipFile(out) as dst:
        for name in src.namelist():
            assert dst.read(name) == src.read(name), name  # the AOTI code, byte for byte
        added = set(dst.namelist()) - set(src.namelist())
        assert all(i.compress_type == zipfile.ZIP_STORED for i in dst.infolist())
    assert "aoti/models/model.json" in added
    assert "aoti/data/sample_inputs/model.pt" in added  # the ExportedProgram file's own
    assert not any("aotinductor" in n for n in added)  # both.pt2's AOTI code stays out
    assert not any(n.startswith("aoti/extra/") for n in added)  # torch reads extra/ as text


def test_the_cli_writes_a_bundle_and_says_what_it_added(pkg: Pkg, tmp_path: Path) -> None:
    out = tmp_path / "b.pt2"
    args = [sys.executable, "-m", "aotipre", "bundle", str(pkg("aoti")), "-o", str(out)]
    r = subprocess.run([*args, "--exported-program", str(pkg("both"))], capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}: model 'model'" in r.stdout and "added the ExportedProgram" in r.stdout
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


@pytest.mark.gpu
def test_a_cuda_bundle_loads_unchanged_gpu(cuda_fixture_dir: Path, tmp_path: Path) -> None:
    """The same on a CUDA package (the GPU machine's torch): plain torch loads the bundle and
    runs it on the GPU; `aotipre check` compares with both stored references."""
    golden = tmp_path / "golden.pt"
    inputs = cuda_fixture_dir / "aoti_inputs.pt"
    aoti = cuda_fixture_dir / "aoti_cuda.pt2"
    assert "ran (3, 4)" in plain_torch(aoti, inputs, golden, False, "cuda")
    out = tmp_path / "bundle.pt2"
    write_bundle(
        str(aoti),
        str(out),
        exported_program=str(cuda_fixture_dir / "both_cuda.pt2"),
        inputs=str(inputs),
        expected=str(golden),
    )
    line = plain_torch(out, inputs, tmp_path / "again.pt", True, "cuda")
    print(line)
    assert "ran (3, 4) eager equal: True" in line, line
    report = check(str(out), CheckOptions(dynamic=DynamicOptions(probe=False, timeout_s=300.0)))
    compare = next(s for s in report.stages if s.name == "compare")
    print(compare.detail)
    assert compare.status.value == "passed", compare.detail
    assert "match the expected outputs stored in the archive" in compare.detail


def test_an_extracted_package_folder_bundles_like_its_zip(pkg: Pkg, tmp_path: Path) -> None:
    """A package given as the folder it extracts to (torch 2.13 loads those too): the same
    members, byte for byte, as the bundle of the zip."""
    with zipfile.ZipFile(pkg("aoti")) as zf:
        zf.extractall(tmp_path / "extracted")
    (root,) = (tmp_path / "extracted").iterdir()
    from_zip, from_folder = tmp_path / "zip.pt2", tmp_path / "folder.pt2"
    write_bundle(str(pkg("aoti")), str(from_zip), exported_program=str(pkg("both")))
    write_bundle(str(root), str(from_folder), exported_program=str(pkg("both")))
    with zipfile.ZipFile(from_zip) as a, zipfile.ZipFile(from_folder) as b:
        assert sorted(a.namelist()) == sorted(b.namelist())
        assert all(a.read(n) == b.read(n) for n in a.namelist())
