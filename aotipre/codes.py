"""The finding-code table: every code aotipre can emit, with its default severity, category and hint.

Numbering policy (also in the README):

- `AOTxyy`: `x` is the family, `yy` the number inside it; a code is never reused or renumbered.
- 0 package and archive; 1 call structure; 2 dtype and device; 3 shape, dynamic range and stride;
  4 host and version compatibility; 5 compile and load; 6 run (runtime, crash, timeout);
  7 accuracy and NaN; 8 crash triage; 9 aotipre itself.
- Select or ignore by prefix: `AOT3` is every shape finding, `AOT30` the first ten of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from aotipre.findings import Category, Finding, Severity


@dataclass(frozen=True)
class Code:
    """One entry in the code table."""

    code: str
    name: str
    """Short kebab-case name, stable like the code."""
    severity: Severity
    category: Category
    summary: str
    hint: str

    def finding(self, message: str, *, hint: str | None = None, **fields: object) -> Finding:
        """Build a Finding with this code's defaults; `severity=` may override."""
        severity = fields.pop("severity", self.severity)
        return Finding(
            code=self.code,
            severity=severity,  # type: ignore[arg-type]
            category=self.category,
            message=message,
            hint=self.hint if hint is None else hint,
            **fields,  # type: ignore[arg-type]
        )


E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO
C = Category

ALL_CODES: tuple[Code, ...] = (
    # 0: package and archive
    Code(
        "AOT001",
        "package-unreadable",
        E,
        C.PACKAGE,
        "The package path is missing, cannot be opened, or is a folder that is not an extracted "
        ".pt2 package.",
        "check the path and its permissions",
    ),
    Code(
        "AOT002",
        "not-a-zip",
        E,
        C.PACKAGE,
        "The file is empty, not a zip archive, or a truncated zip.",
        "re-create the package with torch._inductor.aoti_compile_and_package or torch.export.save",
    ),
    Code(
        "AOT003",
        "unsafe-member",
        E,
        C.PACKAGE,
        "A member name could escape the extraction folder (.., absolute, backslash, NUL, symlink) "
        "or is duplicated.",
        "a .pt2 never holds such members; do not deploy this file",
    ),
    Code(
        "AOT004",
        "not-a-pt2",
        E,
        C.PACKAGE,
        "A zip archive that is not a .pt2 package (no or wrong archive_format, several roots).",
        "build the package with torch.export.save or aoti_compile_and_package",
    ),
    Code(
        "AOT005",
        "archive-version-unsupported",
        E,
        C.VERSION,
        "The archive_version is not one torch's loader accepts.",
        "re-package with a torch release between 2.11 and 2.15",
    ),
    Code(
        "AOT006",
        "member-invalid",
        E,
        C.PACKAGE,
        "A metadata member (model JSON, wrapper metadata) is missing, not JSON, or of the wrong "
        "shape.",
        "the package is damaged or hand-edited; re-create it",
    ),
    Code(
        "AOT007",
        "member-too-large",
        E,
        C.PACKAGE,
        "A member declares or inflates to more than aotipre reads (possible zip bomb).",
        "pt2 members are stored uncompressed; a compressed giant member is not from torch",
    ),
    Code(
        "AOT008",
        "member-corrupt",
        E,
        C.PACKAGE,
        "A member's CRC does not match: the file was damaged after it was written.",
        "the C++ loader does not check CRCs and may crash on it; re-create or re-download",
    ),
    Code(
        "AOT009",
        "model-not-found",
        E,
        C.PACKAGE,
        "The requested model is not in the package.",
        "pass one of the models listed with --model",
    ),
    Code(
        "AOT010",
        "no-models",
        E,
        C.PACKAGE,
        "The archive holds no model (neither an ExportedProgram nor AOTI code).",
        "build the package with torch.export.save or aoti_compile_and_package",
    ),
    Code(
        "AOT011",
        "weights-on-disk",
        E,
        C.LOAD,
        "The AOTI weights live outside the .so; aoti_load_package segfaults when calling it.",
        "recompile with aot_inductor.package_constants_in_so=True, or load it with "
        "torch.export.pt2_archive._package.load_pt2(..., load_weights_from_disk=True)",
    ),
    Code(
        "AOT012",
        "contract-unavailable",
        W,
        C.PACKAGE,
        "No input contract could be read for a model (no ExportedProgram, wrapper.cpp absent or "
        "unparseable); static checks are limited.",
        "package the ExportedProgram alongside the AOTI code to get full checks",
    ),
    Code(
        "AOT013",
        "export-aoti-bounds-differ",
        W,
        C.DYNAMIC_RANGE,
        "The AOTI code accepts a narrower range for a dynamic dim than the ExportedProgram declares.",
        "inputs inside the export range but outside the AOTI range are rejected at run time",
    ),
    Code(
        "AOT014",
        "unknown-device",
        W,
        C.DEVICE,
        "The package names a device type aotipre does not know.",
        "check the package metadata (AOTI_DEVICE_KEY)",
    ),
    Code(
        "AOT020",
        "inputs-unreadable",
        E,
        C.STRUCTURE,
        "The sample-inputs file is missing, not a torch.save file, or damaged.",
        "save inputs with torch.save((args, kwargs), path)",
    ),
    Code(
        "AOT021",
        "inputs-unsafe",
        E,
        C.STRUCTURE,
        "The sample-inputs file references Python globals that weights_only loading refuses.",
        "convert numpy arrays with torch.from_numpy and custom classes to tuples or dicts of "
        "tensors",
    ),
    Code(
        "AOT022",
        "no-sample-inputs",
        I,
        C.STRUCTURE,
        "No sample inputs were given or stored in the archive; input checks and dynamic stages "
        "need them.",
        "pass --inputs FILE (a torch.save of (args, kwargs))",
    ),
    Code(
        "AOT080",
        "opaque-objects-pickled",
        W,
        C.PACKAGE,
        "The package stores opaque Python objects (data/constants/opaque_obj_*) that torch "
        "loads with plain pickle.loads: loading the package runs whatever code those pickles "
        "name. aotipre never unpickles them.",
        "load such a package only from a trusted source; prefer tensors or torchbind objects "
        "(custom_obj_*) for constants",
    ),
    # 1: call structure
    Code(
        "AOT101",
        "arg-count",
        E,
        C.STRUCTURE,
        "The number of positional arguments differs from the exported signature.",
        "pass exactly the positional arguments the model was exported with",
    ),
    Code(
        "AOT102",
        "missing-kwarg",
        E,
        C.STRUCTURE,
        "A keyword argument the model was exported with is missing.",
        "add the keyword argument to the sample inputs",
    ),
    Code(
        "AOT103",
        "unexpected-kwarg",
        E,
        C.STRUCTURE,
        "A keyword argument the model was not exported with was given.",
        "remove it, or fix its name",
    ),
    Code(
        "AOT104",
        "nesting-mismatch",
        E,
        C.STRUCTURE,
        "An input's container structure (tuple, list, dict) differs from the exported one.",
        "pass inputs with the same nesting as the example inputs used for export",
    ),
    Code(
        "AOT105",
        "constant-mismatch",
        W,
        C.STRUCTURE,
        "A non-tensor input differs from the value it was specialized to at export.",
        "the exported program was specialized to the export-time value; re-export with it dynamic "
        "or pass the same value",
    ),
    Code(
        "AOT106",
        "kind-mismatch",
        E,
        C.STRUCTURE,
        "An input is of the wrong kind (a tensor where a number was exported, or the reverse).",
        "pass the same kind of value as at export",
    ),
    # 2: dtype and device
    Code(
        "AOT201",
        "dtype-mismatch",
        E,
        C.DTYPE,
        "An input tensor's dtype differs from the compiled one.",
        "cast the input (e.g. x.to(torch.float32)) or re-export with the deployment dtype",
    ),
    Code(
        "AOT202",
        "device-mismatch",
        E,
        C.DEVICE,
        "An input tensor lives on a different device type than the package was compiled for.",
        "move inputs to the package's device before calling it",
    ),
    # 3: shape, dynamic range and stride
    Code(
        "AOT301",
        "rank-mismatch",
        E,
        C.SHAPE,
        "An input tensor has a different number of dimensions than compiled.",
        "reshape the input to the exported rank",
    ),
    Code(
        "AOT302",
        "static-dim-mismatch",
        E,
        C.SHAPE,
        "A static dimension differs from its compiled size.",
        "the dim was specialized at export; mark it dynamic with torch.export.Dim to vary it",
    ),
    Code(
        "AOT303",
        "dim-below-min",
        E,
        C.DYNAMIC_RANGE,
        "A dynamic dimension is below its minimum.",
        "pad the input, or re-export with a smaller Dim min",
    ),
    Code(
        "AOT304",
        "dim-above-max",
        E,
        C.DYNAMIC_RANGE,
        "A dynamic dimension is above its maximum.",
        "split or truncate the input, or re-export with a larger Dim max",
    ),
    Code(
        "AOT305",
        "shared-dim-disagrees",
        E,
        C.SHAPE,
        "Inputs that share a dynamic dimension have different sizes for it.",
        "inputs that share a Dim must agree (e.g. input_ids and attention_mask sequence length)",
    ),
    Code(
        "AOT306",
        "derived-dim-mismatch",
        E,
        C.SHAPE,
        "A derived dimension (e.g. 2*s0) does not equal its expression.",
        "make the dim equal its exported expression",
    ),
    Code(
        "AOT307",
        "stride-mismatch",
        E,
        C.STRIDE,
        "An input's stride differs from the static stride the package was compiled for.",
        "pass a contiguous tensor (x.contiguous()) or the exported layout",
    ),
    # 4: host and version compatibility
    Code(
        "AOT401",
        "cuda-unavailable",
        E,
        C.ENVIRONMENT,
        "The package runs on CUDA and the target host has no CUDA GPU.",
        "run on a CUDA host, or recompile the ExportedProgram for cpu",
    ),
    Code(
        "AOT402",
        "compute-capability",
        E,
        C.ENVIRONMENT,
        "The target GPU's compute capability differs from the one the package was compiled for.",
        "recompile on (or for) the deployment GPU architecture",
    ),
    Code(
        "AOT403",
        "cpu-isa",
        E,
        C.ENVIRONMENT,
        "The target CPU lacks an instruction set the package was compiled for (-march=native); "
        "it can die with SIGILL.",
        "compile on a host no newer than the deployment CPU",
    ),
    Code(
        "AOT404",
        "platform-mismatch",
        E,
        C.ENVIRONMENT,
        "The package was compiled for another OS or machine architecture.",
        "compile on the deployment platform",
    ),
    Code(
        "AOT405",
        "torch-version",
        W,
        C.VERSION,
        "The package was written by a torch version outside the supported or installed range.",
        "load it with the torch version that wrote it",
    ),
    Code(
        "AOT406",
        "device-type-mismatch",
        E,
        C.DEVICE,
        "The package's device type differs from the target device.",
        "recompile the ExportedProgram for the target device",
    ),
    Code(
        "AOT407",
        "compiler-unusable",
        E,
        C.ENVIRONMENT,
        "The C++ compiler AOTInductor uses is missing or cannot build a shared library, so no "
        "package can be compiled on this host.",
        "install g++ (or point $CXX at a working C++ compiler); precompiled packages can still load",
    ),
    Code(
        "AOT408",
        "directory-unusable",
        E,
        C.ENVIRONMENT,
        "A directory AOTInductor extracts or builds code in is not writable, or is mounted "
        "noexec so the .so files in it cannot be loaded.",
        "point TMPDIR (package extraction) or TORCHINDUCTOR_CACHE_DIR (compiles) at a writable "
        "directory on a mount without noexec",
    ),
    Code(
        "AOT409",
        "low-disk-space",
        W,
        C.ENVIRONMENT,
        "A directory AOTInductor extracts packages or writes compiles into has little free space.",
        "free space, or point TMPDIR / TORCHINDUCTOR_CACHE_DIR / --cache-dir elsewhere",
    ),
    Code(
        "AOT410",
        "libstdcxx-mismatch",
        W,
        C.ENVIRONMENT,
        "The torch process loads an older libstdc++ than the one of the C++ compiler AOTInductor "
        "builds with; compiled packages can fail to load or crash in the loader.",
        "preload the compiler's libstdc++ (LD_PRELOAD), or build with a compiler that matches "
        "the environment's libstdc++",
    ),
    Code(
        "AOT411",
        "canary-failed",
        E,
        C.ENVIRONMENT,
        "A trivial canary model, compiled on this host, does not compile, load or run: this host "
        "cannot run AOTInductor packages, whatever the model.",
        "fix the host first: the message names the failing step and the evidence the crash; "
        "`aotipre doctor` re-checks",
    ),
    Code(
        "AOT412",
        "host-crashes-every-package",
        E,
        C.ENVIRONMENT,
        "Loading or running the model crashed, and so does a trivial canary model compiled on "
        "this host: the host is at fault, not the model.",
        "run `aotipre doctor` on this host for the diagnosis (compiler, libstdc++, directories), "
        "then check the package again",
    ),
    # 5: compile and load
    Code(
        "AOT501",
        "compile-failed",
        E,
        C.COMPILE,
        "aoti_compile_and_package raised while compiling the ExportedProgram.",
        "fix the error quoted in the evidence; the lines name the failing op or C++ line",
    ),
    Code(
        "AOT502",
        "compile-crashed",
        E,
        C.CRASH,
        "The compiler process died by a signal (a crash in Inductor, the C++ compiler or a "
        "kernel run while autotuning).",
        "re-run the compile alone to reproduce; a CUDA fault at compile time means a kernel "
        "reads out of bounds on the example inputs",
    ),
    Code(
        "AOT503",
        "compile-timeout",
        E,
        C.TIMEOUT,
        "The compile did not finish within its time limit.",
        "raise the compile time limit, or compile on a faster host",
    ),
    Code(
        "AOT510",
        "load-failed",
        E,
        C.LOAD,
        "aoti_load_package raised while loading the model.",
        "load it with the torch version and host it was compiled for",
    ),
    Code(
        "AOT511",
        "load-wrong-device",
        E,
        C.DEVICE,
        "The loader refused the requested device (e.g. a device index for a cpu package).",
        "load cpu packages without a device index; pass --device matching the package",
    ),
    Code(
        "AOT512",
        "load-cuda-unavailable",
        E,
        C.ENVIRONMENT,
        "The package needs CUDA and the torch doing the load has no usable CUDA.",
        "run on a CUDA host with a CUDA build of torch, or recompile for cpu",
    ),
    Code(
        "AOT513",
        "load-model-not-found",
        E,
        C.LOAD,
        "The loader found no compiled code for the requested model name.",
        "pass one of the models the package holds compiled code for",
    ),
    Code(
        "AOT514",
        "load-crashed",
        E,
        C.CRASH,
        "The process died by a signal while loading the package (before any model code ran).",
        "check the .so was built for this torch, libstdc++ and CPU; re-create the package",
    ),
    Code(
        "AOT515",
        "loader-libstdcxx-mismatch",
        E,
        C.ENVIRONMENT,
        "Loading crashes in this environment, and loads with the system libstdc++ preloaded: "
        "a libstdc++ mismatch between the toolchain that built the .so and the process's "
        "runtime (an older libstdc++ in the Python environment, or libstdc++ template code such "
        "as std::regex instantiated in both). Not a model bug.",
        "preload the system libstdc++ (LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6), or "
        "match the toolchains: compile the package with the compiler and libstdc++ torch was "
        "built with",
    ),
    Code(
        "AOT516",
        "load-timeout",
        E,
        C.TIMEOUT,
        "Loading the package did not finish within the time limit.",
        "raise --timeout; a very large package or a stuck device can cause it",
    ),
    Code(
        "AOT517",
        "exported-program-unloadable",
        W,
        C.LOAD,
        "The ExportedProgram in the archive cannot be loaded by this torch, so outputs were not "
        "compared with eager.",
        "re-export with the deployment torch version to get the eager comparison",
    ),
    # 6: run (runtime, crash, timeout)
    Code(
        "AOT601",
        "runtime-check-failed",
        E,
        C.RUNTIME,
        "The compiled model rejected the inputs with a size or stride assertion at run time.",
        "make the inputs match the shapes and strides the model was compiled for",
    ),
    Code(
        "AOT602",
        "run-exception",
        E,
        C.RUNTIME,
        "Running the compiled model raised an exception (not an input check).",
        "the evidence quotes the failing kernel's message; check the input values "
        "(e.g. indices within the embedding size)",
    ),
    Code(
        "AOT603",
        "run-abort",
        E,
        C.CRASH,
        "The process aborted (SIGABRT) while running the compiled model.",
        "an uncaught C++ exception or assertion in a kernel; the evidence names it",
    ),
    Code(
        "AOT604",
        "run-segfault",
        E,
        C.CRASH,
        "The process crashed with a memory fault (SIGSEGV/SIGBUS) while running the model.",
        "look for out-of-range indices or inputs outside the compiled shapes; re-run under "
        "AOTI_RUNTIME_CHECK_INPUTS=1",
    ),
    Code(
        "AOT605",
        "run-killed",
        E,
        C.CRASH,
        "The process was killed by a signal while running the model (SIGKILL: often the "
        "out-of-memory killer; SIGILL: an instruction this CPU lacks).",
        "check memory limits, and that the package was compiled for this CPU",
    ),
    Code(
        "AOT606",
        "run-timeout",
        E,
        C.TIMEOUT,
        "Running the model did not finish within --timeout.",
        "raise --timeout, or look for a hang in the kernel the evidence names",
    ),
    Code(
        "AOT607",
        "weights-on-disk-crash",
        E,
        C.CRASH,
        "The package keeps its weights outside the .so; aoti_load_package does not load them, "
        "so calling the model crashes. The package, not the model, is at fault.",
        "recompile with aot_inductor.package_constants_in_so=True, or load it with "
        "torch.export.pt2_archive._package.load_pt2(..., load_weights_from_disk=True)",
    ),
    Code(
        "AOT608",
        "device-fault",
        E,
        C.RUNTIME,
        "A CUDA kernel faulted (device-side assert, illegal memory access).",
        "re-run with CUDA_LAUNCH_BLOCKING=1 to pin the faulting kernel; check index inputs",
    ),
    Code(
        "AOT610",
        "probe-bound-failed",
        E,
        C.DYNAMIC_RANGE,
        "The model failed at the minimum or maximum of a dynamic dimension it declares valid.",
        "fix the model for that size, or re-export with a range it supports",
    ),
    Code(
        "AOT611",
        "probe-over-max-accepted",
        W,
        C.DYNAMIC_RANGE,
        "An input one above a dynamic dimension's maximum ran without being rejected: the "
        "runtime input check is missing, so out-of-range inputs return garbage or crash later.",
        "run with AOTI_RUNTIME_CHECK_INPUTS=1 (torch >= 2.13) or compile with "
        "aot_inductor.debug_compile=True, and validate sizes before calling",
    ),
    Code(
        "AOT612",
        "probe-over-max-unclean",
        E,
        C.DYNAMIC_RANGE,
        "An input one above a dynamic dimension's maximum crashed or failed inside the model "
        "instead of being rejected by the runtime input check.",
        "run with AOTI_RUNTIME_CHECK_INPUTS=1, and validate sizes before calling",
    ),
    # 7: accuracy and NaN
    Code(
        "AOT701",
        "output-mismatch",
        E,
        C.ACCURACY,
        "The compiled model's outputs differ from the ExportedProgram run eagerly on the same "
        "inputs beyond the tolerance.",
        "check the package was compiled from this ExportedProgram; loosen --rtol/--atol only "
        "for known low-precision drift",
    ),
    Code(
        "AOT702",
        "output-nan",
        E,
        C.NAN,
        "The compiled model's outputs contain NaN or Inf.",
        "compile with TORCHINDUCTOR_NAN_ASSERTS=1 to find the first kernel producing it",
    ),
    Code(
        "AOT703",
        "output-structure-mismatch",
        E,
        C.ACCURACY,
        "The compiled model returns a different number, shape or dtype of outputs than the "
        "ExportedProgram.",
        "the AOTI part was compiled from another program; recompile it from this one",
    ),
    Code(
        "AOT704",
        "eager-failed",
        W,
        C.ACCURACY,
        "The ExportedProgram itself failed on the inputs, so outputs were not compared.",
        "the inputs may be invalid for the model; the evidence quotes the eager error",
    ),
    # 8: crash triage (the escalation ladder after a crashed run; aotipre.triage)
    Code(
        "AOT801",
        "faulting-kernel",
        I,
        C.CRASH,
        "Crash triage named the generated kernel that faulted, with its source, the model code it "
        "fuses and its inputs' statistics (the report's diagnosis).",
        "read the diagnosis; --artifacts DIR writes a repro bundle",
    ),
    Code(
        "AOT802",
        "misattributed-error",
        W,
        C.CRASH,
        "The first error blamed one operation (e.g. a cuBLAS call), but a synchronous run shows an "
        "earlier kernel faulting: the first error was a later symptom of that fault.",
        "debug the kernel the diagnosis names, not the operation the first error blamed",
    ),
    Code(
        "AOT803",
        "kernel-index-out-of-range",
        E,
        C.RUNTIME,
        "An index tensor the faulting kernel reads holds values outside the dimension it indexes "
        "(e.g. a token id past the embedding table).",
        "validate or clamp the index input before calling the model, or re-export with a larger "
        "table",
    ),
    Code(
        "AOT804",
        "kernel-input-nonfinite",
        W,
        C.NAN,
        "A tensor the faulting kernel reads holds NaN or Inf.",
        "find the producer (the kernel launched before it) or check the model inputs",
    ),
    Code(
        "AOT805",
        "triage-inconclusive",
        W,
        C.CRASH,
        "Crash triage could not name the faulting kernel (the crash did not reproduce, or no step "
        "could run).",
        "the triage stages say why; --artifacts DIR keeps every step's command and log",
    ),
    Code(
        "AOT806",
        "triage-needs-exported-program",
        W,
        C.CRASH,
        "The package holds AOTI code only, so the triage steps that recompile (printer, NaN "
        "asserts, minifier) could not run.",
        "pass --exported-program FILE (torch.export.save of the same model)",
    ),
    Code(
        "AOT807",
        "minified-repro",
        I,
        C.CRASH,
        "The AOTI minifier reduced the failing program to a minimal repro.py.",
        "attach the repro to a bug report",
    ),
    Code(
        "AOT808",
        "sanitizer-report",
        I,
        C.CRASH,
        "compute-sanitizer memcheck reported an invalid memory access (it names the kernel).",
        "the evidence quotes its report",
    ),
)

BY_CODE: dict[str, Code] = {c.code: c for c in ALL_CODES}
BY_NAME: dict[str, Code] = {c.name: c for c in ALL_CODES}


def get(code: str) -> Code:
    return BY_CODE[code]
