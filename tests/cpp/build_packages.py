"""Build the custom-op and C++-loader test packages with plain torch (run in a fresh process).

usage: python build_packages.py OUT_DIR

Writes into OUT_DIR:
- aotipre_test_pyops.py: a module defining the Python custom op `aotipre_test::twice`
  (torch.library.custom_op); the tests import it with --import.
- libaotipre_test_cop.so: a TORCH_LIBRARY library defining the C++ op `aotipre_test_c::scale3`,
  built with the C++ compiler inductor uses against this torch.
- plain.pt2: a model with a weight, a tensor kwarg and two outputs (AOTI code only).
- pyop.pt2, pyop_ep.pt2: a model calling the Python op (AOTI package; ExportedProgram only).
- cop.pt2: a model calling the C++ op (AOTI package).
- inputs.pt, inputs_kw.pt: sample inputs `(args, kwargs)` for the one-input models and plain.pt2.
Every package is made through the public API (torch.export.export, aoti_compile_and_package).
"""

from __future__ import annotations

import os
import subprocess
import sys

PYOPS = """\
import torch


@torch.library.custom_op("aotipre_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x):
    return torch.empty_like(x)
"""

COP = r"""
#include <ATen/ATen.h>
#include <torch/library.h>
at::Tensor scale3(const at::Tensor& x) { return x * 3; }
TORCH_LIBRARY(aotipre_test_c, m) { m.def("scale3(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(aotipre_test_c, CompositeExplicitAutograd, m) { m.impl("scale3", scale3); }
"""


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    sys.path.insert(0, out)
    with open(os.path.join(out, "aotipre_test_pyops.py"), "w") as f:
        f.write(PYOPS)

    import aotipre_test_pyops  # noqa: F401  (registers aotipre_test::twice)
    import torch
    from torch._inductor.cpp_builder import get_cpp_compiler
    from torch.utils import cpp_extension

    src = os.path.join(out, "cop.cpp")
    lib = os.path.join(out, "libaotipre_test_cop.so")
    with open(src, "w") as f:
        f.write(COP)
    cmd = [get_cpp_compiler(), "-std=c++20", "-O1", "-w", "-shared", "-fPIC", src, "-o", lib]
    cmd += [f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    cmd += [f"-I{d}" for d in cpp_extension.include_paths()]
    for d in cpp_extension.library_paths():
        cmd += [f"-L{d}", f"-Wl,-rpath,{d}"]
    cmd += ["-ltorch", "-ltorch_cpu", "-lc10"]
    subprocess.run(cmd, check=True)
    torch.ops.load_library(lib)

    class Plain(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(8, 4)

        def forward(self, x: torch.Tensor, *, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
            y = torch.relu(self.linear(x)) * mask
            return y, y.sum(dim=1)

    class PyOp(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.aotipre_test.twice(x).relu() + 1

    class COp(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.aotipre_test_c.scale3(x).relu() + 1

    torch.manual_seed(0)
    x, mask = torch.randn(3, 8), (torch.rand(3, 4) > 0.3).float()
    ep = torch.export.export(Plain().eval(), (x,), {"mask": mask})
    torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(out, "plain.pt2"))
    torch.save(((x,), {"mask": mask}), os.path.join(out, "inputs_kw.pt"))
    v = torch.randn(3, 4)
    torch.save(((v,), {}), os.path.join(out, "inputs.pt"))
    ep = torch.export.export(PyOp(), (v,))
    torch.export.save(ep, os.path.join(out, "pyop_ep.pt2"))
    torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(out, "pyop.pt2"))
    ep = torch.export.export(COp(), (v,))
    torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(out, "cop.pt2"))
    print(out)


if __name__ == "__main__":
    main(sys.argv[1])
