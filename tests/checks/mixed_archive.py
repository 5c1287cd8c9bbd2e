"""Builds an archive as a user does who compiles the model cast to bfloat16 and packages it with
the float32 ExportedProgram (aot_compile + package_pt2): `python mixed_archive.py OUT`."""

import copy
import sys

import torch
from torch.export.pt2_archive._package import package_pt2

out = sys.argv[1]


class L(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x)


torch.manual_seed(0)
m = L()
x = torch.randn(2, 4)
ep32 = torch.export.export(m, (x,))
# a copy: Module.to() casts the parameters in place, which the float32 program shares
ep16 = torch.export.export(copy.deepcopy(m).to(torch.bfloat16), (x.to(torch.bfloat16),))
files = torch._inductor.aot_compile(
    ep16.module(), (x.to(torch.bfloat16),), options={"aot_inductor.package": True}
)
package_pt2(f"{out}/mixed.pt2", exported_programs={"model": ep32}, aoti_files={"model": files})
torch.save(((x,), {}), f"{out}/f32.pt")
torch.save(((x.to(torch.bfloat16),), {}), f"{out}/bf16.pt")
