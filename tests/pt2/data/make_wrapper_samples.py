"""Regenerate the wrapper.cpp fixtures (run by hand with torch; the tests never compile anything).

    python tests/pt2/data/make_wrapper_samples.py /tmp/wrapper-samples [a b c d e] [--cuda]

Writes `<out>/<sample>.pt2`, then trimmed copies `<name>_<torch major><minor>.wrapper.cpp` next
to this script. The legacy_* fixtures are synthetic rewrites of dynamic_211 (see README.md).
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).parent
NAMES = {"a": "dynamic", "b": "derived", "c": "static", "d": "many_inputs", "e": "long_spec"}
LONG_KEYS = [f"feature_{i:02d}_" + "x" * 2100 for i in range(8)]  # in_spec > 16000 chars


def trim(text: str) -> str:
    """Keep the first include; drop the runtime interface.cpp and the compile commands."""
    lines = text.splitlines()
    head = [line for line in lines[:3] if line.startswith("#include")]
    start = next(i for i, line in enumerate(lines) if line.startswith('} // extern "C"'))
    body = [
        line
        for line in lines[start + 1 :]
        if not line.startswith(("// g++", "// /")) and line not in ("// Compile cmd", "// Link cmd")
    ]
    while body and not body[-1].strip():
        body.pop()
    note = "// [aotipre test fixture: interface.cpp and compile commands trimmed]"
    return "\n".join([*head, note, *body]) + "\n"


def main(argv: list[str]) -> None:
    import torch
    from torch.export import Dim

    class A(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(100, 16)
            self.lin = torch.nn.Linear(16, 8)

        def forward(self, idx, mask):
            return (self.lin(self.emb(idx)) * mask.unsqueeze(-1)).sum(1)

    class B(torch.nn.Module):
        def forward(self, x, y):
            return (y[: x.shape[0]] + y[x.shape[0] :]) * x

    class C(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(8, 4, dtype=torch.bfloat16))

        def forward(self, x, ids, *, scale):
            return (x @ self.w).float() * scale + ids.float().unsqueeze(-1)

    class D(torch.nn.Module):
        def forward(self, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11):
            xs = [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11]
            out = xs[0]
            for t in xs[1:]:
                out = out + t
            return out, xs[0] * 2

    class E(torch.nn.Module):
        def forward(self, feats):
            out = feats[LONG_KEYS[0]]
            for k in LONG_KEYS[1:]:
                out = out + feats[k]
            return out

    out = Path(argv[0])
    cuda = "--cuda" in argv
    dev = "cuda" if cuda else "cpu"
    version = "".join(torch.__version__.split(".")[:2])
    for s in [a for a in argv[1:] if not a.startswith("--")] or list(NAMES):
        kwargs = None
        if s == "a":
            batch, seq = Dim("batch", min=1, max=64), Dim("seq", min=2, max=128)
            args = (torch.randint(0, 100, (4, 10), device=dev), torch.rand(4, 10, device=dev))
            dyn = ({0: batch, 1: seq}, {0: batch, 1: seq})
            model: torch.nn.Module = A()
        elif s == "b":
            dx = Dim("dx", min=1, max=32)
            args, dyn, model = (torch.randn(4, 3), torch.randn(8, 3)), ({0: dx}, {0: 2 * dx}), B()
        elif s == "c":
            args = (torch.randn(2, 8, dtype=torch.bfloat16), torch.randint(0, 5, (2,)))
            kwargs, dyn, model = {"scale": torch.randn(2, 4)}, None, C()
        elif s == "d":
            args, dyn, model = tuple(torch.randn(3, 5) for _ in range(12)), None, D()
        else:
            args, dyn, model = ({k: torch.randn(2, 3) for k in LONG_KEYS},), None, E()
        ep = torch.export.export(model.to(dev), args, kwargs=kwargs, dynamic_shapes=dyn)
        pkg = torch._inductor.aoti_compile_and_package(ep, package_path=str(out / f"{s}.pt2"))
        with zipfile.ZipFile(pkg) as zf:
            member = next(n for n in zf.namelist() if n.endswith(".wrapper.cpp"))
            text = zf.read(member).decode()
        name = NAMES[s] + ("_cuda" if cuda else "")
        (HERE / f"{name}_{version}.wrapper.cpp").write_text(trim(text))
        print(s, "->", f"{name}_{version}.wrapper.cpp")


if __name__ == "__main__":
    main(sys.argv[1:])
