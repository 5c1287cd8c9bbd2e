"""Build the packages of test_codes_cpp_real.py with plain torch (run in a fresh process).

usage: python build_code_packages.py OUT_DIR

Writes into OUT_DIR:
- libaotipre_codes.so: a TORCH_LIBRARY op library (namespace `aotipre_codes`), built with the C++
  compiler inductor uses against this torch. Its ops:
  - init(float scale): what the library's Python package calls at import (sets the scale and
    marks the library initialized); a C++ server that only links the library never calls it.
  - scaled(x): x * scale (scale 1.0 until init).
  - checked(x): x * scale; raises (TORCH_CHECK) until init.
  - waiting(x): x * scale; blocks until init (a condition variable init signals).
  - accumulated(x): x, through one static float workspace shared by every call (kept zero
    between calls, to spare an allocation and a memset): add x into it, sleep STAGE_MS, copy it
    out and zero it again. Not thread safe: of two calls that overlap, the first to copy out
    gets 2 x and the other 0; a call alone gets x.
  Each has a Meta kernel (for export), so tracing runs none of the CPU kernels.
- aotipre_codes_init.py: the library's Python package: loads it and calls init(3.0), as a
  package's __init__ does; the tests pass it to aotipre with --import.
- scaled.pt2, checked.pt2, waiting.pt2, accumulated.pt2: `op(x).relu() + 1` for each op;
  plain.pt2: `x.relu() + 1` (no custom op). Each through torch.export.export and
  aoti_compile_and_package (the public API).
- inputs.pt: sample inputs `(args, kwargs)` for them (one float tensor 3 x 4).
"""

from __future__ import annotations

import os
import subprocess
import sys

STAGE_MS = 300

OPS = r"""
#include <ATen/ATen.h>
#include <torch/library.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace {

std::mutex g_mutex;
std::condition_variable g_ready;
bool g_initialized = false;
double g_scale = 1.0;

void init(double scale) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_scale = scale;
    g_initialized = true;
  }
  g_ready.notify_all();
}

double scale_now() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_scale;
}

at::Tensor scaled(const at::Tensor& x) { return x * scale_now(); }

at::Tensor checked(const at::Tensor& x) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    TORCH_CHECK(g_initialized, "aotipre_codes::checked: the library is not initialized "
                               "(call aotipre_codes::init first)");
  }
  return x * scale_now();
}

at::Tensor waiting(const at::Tensor& x) {
  {
    std::unique_lock<std::mutex> lock(g_mutex);
    g_ready.wait(lock, [] { return g_initialized; });
  }
  return x * scale_now();
}

constexpr int64_t kWorkspace = 4096;
float g_workspace[kWorkspace] = {};  // shared by every call, zero between calls: not thread safe

at::Tensor accumulated(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.numel() <= kWorkspace,
              "aotipre_codes::accumulated: float tensors of at most 4096 elements");
  at::Tensor in = x.contiguous();
  const float* src = in.data_ptr<float>();
  const int64_t n = in.numel();
  for (int64_t i = 0; i < n; ++i) g_workspace[i] += src[i];
  std::this_thread::sleep_for(std::chrono::milliseconds(STAGE_MS));
  at::Tensor out = at::empty_like(in);
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = g_workspace[i];
    g_workspace[i] = 0.0f;  // zero again for the next call
  }
  return out;
}

at::Tensor like(const at::Tensor& x) { return at::empty_like(x); }

}  // namespace

TORCH_LIBRARY(aotipre_codes, m) {
  m.def("init(float scale) -> ()", &init);
  m.def("scaled(Tensor x) -> Tensor");
  m.def("checked(Tensor x) -> Tensor");
  m.def("waiting(Tensor x) -> Tensor");
  m.def("accumulated(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(aotipre_codes, CPU, m) {
  m.impl("scaled", scaled);
  m.impl("checked", checked);
  m.impl("waiting", waiting);
  m.impl("accumulated", accumulated);
}

TORCH_LIBRARY_IMPL(aotipre_codes, Meta, m) {
  m.impl("scaled", like);
  m.impl("checked", like);
  m.impl("waiting", like);
  m.impl("accumulated", like);
}
"""

INIT = '''\
"""The op library's Python package: load it, then initialize it (scale 3.0)."""

import os

import torch

LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), {library!r})
torch.ops.load_library(LIBRARY)
torch.ops.aotipre_codes.init(3.0)
'''

OPS_NAMES = ("scaled", "checked", "waiting", "accumulated")
"""One package per op: `<op>.pt2`."""


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    import torch
    from torch._inductor.cpp_builder import get_cpp_compiler
    from torch.utils import cpp_extension

    src = os.path.join(out, "aotipre_codes.cpp")
    lib = os.path.join(out, "libaotipre_codes.so")
    with open(src, "w") as f:
        f.write(OPS)
    cmd = [get_cpp_compiler(), "-std=c++20", "-O1", "-w", "-shared", "-fPIC", src, "-o", lib]
    cmd += [f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    cmd += [f"-DSTAGE_MS={STAGE_MS}"]
    cmd += [f"-I{d}" for d in cpp_extension.include_paths()]
    for d in cpp_extension.library_paths():
        cmd += [f"-L{d}", f"-Wl,-rpath,{d}"]
    cmd += ["-ltorch", "-ltorch_cpu", "-lc10"]
    subprocess.run(cmd, check=True)
    with open(os.path.join(out, "aotipre_codes_init.py"), "w") as f:
        f.write(INIT.format(library=os.path.basename(lib)))  # beside it, as a package ships it
    torch.ops.load_library(lib)

    class Model(torch.nn.Module):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.name == "plain":
                return x.relu() + 1
            return getattr(torch.ops.aotipre_codes, self.name)(x).relu() + 1

    torch.manual_seed(0)
    x = torch.randn(3, 4)
    torch.save(((x,), {}), os.path.join(out, "inputs.pt"))
    for name in (*OPS_NAMES, "plain"):
        ep = torch.export.export(Model(name), (x,))
        torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(out, f"{name}.pt2"))
    print(out)


if __name__ == "__main__":
    main(sys.argv[1])
