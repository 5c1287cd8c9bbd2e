"""The finding-code table: every code aotipre can emit, with its default severity, category and hint.

Numbering policy (also in docs/codes.md, which aotipre/findings/codes_doc.py renders from this module):

- `AOTxyy`: `x` is the family, `yy` the number inside it; a code is never reused or renumbered.
- 0 package and archive; 1 call structure; 2 dtype and device; 3 shape, dynamic range and stride;
  4 host and version compatibility; 5 compile and load; 6 run (runtime, crash, timeout);
  7 accuracy and NaN; 8 crash triage; 9 aotipre itself.
- Select or ignore by prefix: `AOT3` is every shape finding, `AOT30` the first ten of them.

Long because it is a data table: one entry per code, in code order, in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    """What to do about it."""
    overrides: tuple[tuple[Severity, str], ...] = ()
    """Other severities this code is emitted with, each with when (docs/codes.md shows them;
    tests/test_codes.py fails on an emitted severity that is neither the default nor one of
    these)."""
    example: str = field(kw_only=True)
    """One message as aotipre emits it for this code, with concrete values (docs/codes.md and
    `aotipre explain` show it)."""

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


FAMILIES: tuple[tuple[str, str], ...] = (
    ("0", "package and archive"),
    ("1", "call structure"),
    ("2", "dtype and device"),
    ("3", "shape, dynamic range and stride"),
    ("4", "host and version compatibility"),
    ("5", "compile and load"),
    ("6", "run (runtime, crash, timeout)"),
    ("7", "accuracy and NaN"),
    ("8", "crash triage"),
    ("9", "aotipre itself"),
)
"""The families of the numbering policy above: the `x` of `AOTxyy` and what it is about."""

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
        example="model.pt2: no such file",
    ),
    Code(
        "AOT002",
        "not-a-zip",
        E,
        C.PACKAGE,
        "The file is empty, not a zip archive, or a truncated zip.",
        "re-create the package with torch._inductor.aoti_compile_and_package or torch.export.save",
        example="model.pt2: not a zip archive, so not a .pt2 package",
    ),
    Code(
        "AOT003",
        "unsafe-member",
        E,
        C.PACKAGE,
        "A member name could escape the extraction folder (.., absolute, backslash, NUL, symlink) "
        "or is duplicated.",
        "a .pt2 never holds such members; do not deploy this file",
        example="model.pt2: unsafe member '../../evil': contains '..'",
    ),
    Code(
        "AOT004",
        "not-a-pt2",
        E,
        C.PACKAGE,
        "A zip archive that is not a .pt2 package (no or wrong archive_format, several roots).",
        "build the package with torch.export.save or aoti_compile_and_package",
        example="model.pt2: archive_format is 'torchscript', expected 'pt2'",
    ),
    Code(
        "AOT005",
        "archive-version-unsupported",
        E,
        C.VERSION,
        "The archive_version is not one torch's loader accepts.",
        "re-package with a torch release between 2.11 and 2.15",
        example="model.pt2: archive_version '99' is not supported (torch 2.11-2.15 read version 0)",
    ),
    Code(
        "AOT006",
        "member-invalid",
        E,
        C.PACKAGE,
        "A metadata member (model JSON, wrapper metadata) is missing, not JSON, or of the wrong "
        "shape.",
        "the package is damaged or hand-edited; re-create it",
        example="model.pt2: model/models/model.json is not valid JSON",
    ),
    Code(
        "AOT007",
        "member-too-large",
        E,
        C.PACKAGE,
        "A member declares or inflates to more than aotipre reads (possible zip bomb).",
        "pt2 members are stored uncompressed; a compressed giant member is not from torch",
        example="model.pt2: member 'model/data/bomb.bin' inflates from 2087262 to 2147483648 bytes "
        "(zip bomb?)",
    ),
    Code(
        "AOT008",
        "member-corrupt",
        E,
        C.PACKAGE,
        "A member's CRC does not match: the file was damaged after it was written.",
        "the C++ loader does not check CRCs and may crash on it; re-create or re-download",
        example="member model/data/aotinductor/model/cj44olkxn6sy.wrapper.so is corrupt (CRC "
        "mismatch)",
    ),
    Code(
        "AOT009",
        "model-not-found",
        E,
        C.PACKAGE,
        "The requested model is not in the package.",
        "pass one of the models listed with --model",
        example="model 'decoder' is not in the package (models: model)",
    ),
    Code(
        "AOT010",
        "no-models",
        E,
        C.PACKAGE,
        "The archive holds no model (neither an ExportedProgram nor AOTI code).",
        "build the package with torch.export.save or aoti_compile_and_package",
        example="model.pt2: the archive holds no model",
    ),
    Code(
        "AOT011",
        "weights-on-disk",
        E,
        C.LOAD,
        "The AOTI weights live outside the .so; aoti_load_package segfaults when calling it.",
        "recompile with aot_inductor.package_constants_in_so=True, or load it with "
        "torch.export.pt2_archive._package.load_pt2(..., load_weights_from_disk=True)",
        example="model 'model' keeps its AOTI weights outside the .so "
        "(model/data/aotinductor/model/weights_config.json); aoti_load_package segfaults when it "
        "is called",
    ),
    Code(
        "AOT012",
        "contract-unavailable",
        W,
        C.PACKAGE,
        "No input contract could be read for a model (no ExportedProgram, wrapper.cpp absent or "
        "unparseable); static checks are limited.",
        "package the ExportedProgram alongside the AOTI code to get full checks",
        example="model 'model': no input contract could be read (no wrapper.cpp is packaged, so "
        "the input contract is unknown)",
    ),
    Code(
        "AOT013",
        "export-aoti-bounds-differ",
        W,
        C.DYNAMIC_RANGE,
        "The AOTI code accepts a narrower range for a dynamic dim than the ExportedProgram declares.",
        "inputs inside the export range but outside the AOTI range are rejected at run time",
        example="model 'model': dynamic dim s43 has min 1 in the ExportedProgram, but the AOTI "
        "code checks min 2 (input 'input_ids' dim 0)",
    ),
    Code(
        "AOT014",
        "unknown-device",
        W,
        C.DEVICE,
        "The package names a device type aotipre does not know.",
        "check the package metadata (AOTI_DEVICE_KEY)",
        example="model 'model' targets device type 'npu', which aotipre does not know",
    ),
    Code(
        "AOT015",
        "no-compiled-code",
        E,
        C.LOAD,
        "The archive holds an ExportedProgram but no AOTI code (a torch.export.save file): "
        "aoti_load_package cannot load it.",
        "compile it with torch._inductor.aoti_compile_and_package(ep, package_path=...), or, if "
        "the deployment compiles at deploy time, say so with --compile-at-deploy "
        "(compile-at-deploy = true)",
        example="model 'model' is an ExportedProgram without compiled AOTI code (a "
        'torch.export.save file): aoti_load_package cannot load it ("Failed to find a generated '
        "cpp file or so file for model 'model'\")",
    ),
    Code(
        "AOT016",
        "multi-model-no-default",
        W,
        C.LOAD,
        "The package holds several models and none is named 'model': a plain "
        "aoti_load_package(path) loads only 'model', so it fails on this package.",
        "load each model with torch._inductor.package.load_package(path, model_name=NAME)",
        example="the package holds 2 models (decoder, encoder) and none is named 'model': a plain "
        'aoti_load_package(path) fails with "Failed to find a generated cpp file or so file for '
        "model 'model'\"; load them with torch._inductor.package.load_package(path, "
        "model_name='decoder'), load_package(path, model_name='encoder')",
    ),
    Code(
        "AOT017",
        "multi-model",
        I,
        C.LOAD,
        "The package holds several models: a plain aoti_load_package(path) loads only 'model'; "
        "the others need their name.",
        "load the others with torch._inductor.package.load_package(path, model_name=NAME)",
        example="the package holds 2 models (model, encoder): aoti_load_package(path) loads only "
        "'model'; the others need torch._inductor.package.load_package(path, model_name='encoder')",
    ),
    Code(
        "AOT018",
        "exported-program-disagrees-with-code",
        W,
        C.PACKAGE,
        "The archive's ExportedProgram and its compiled AOTI code take different inputs (a "
        "dtype, a static size, a rank): the AOTI code is what a deployment runs, so its contract "
        "is the one checked; the ExportedProgram no longer describes it (compiled from another "
        "program, e.g. the model cast to bfloat16).",
        "package the ExportedProgram the AOTI code was compiled from, or recompile the AOTI "
        "code from this one",
        example="model 'model': the archive's ExportedProgram and the AOTI code that deploys take "
        "different inputs (input 'x': the ExportedProgram says dtype float32, the compiled code "
        "bfloat16): the inputs are checked against the compiled code, and the eager reference run "
        "may refuse them",
    ),
    Code(
        "AOT020",
        "inputs-unreadable",
        E,
        C.STRUCTURE,
        "The sample-inputs file is missing, not a torch.save file, or damaged.",
        "save inputs with torch.save((args, kwargs), path)",
        example="inputs.pt: is not a zip archive, not a file written by torch.save",
        overrides=((W, "the sample inputs stored in the archive: the check goes on without them"),),
    ),
    Code(
        "AOT021",
        "inputs-unsafe",
        E,
        C.STRUCTURE,
        "The sample-inputs file references Python globals that weights_only loading refuses.",
        "convert numpy arrays with torch.from_numpy and custom classes to tuples or dicts of "
        "tensors",
        example="inputs.pt: sample inputs reference globals that a weights-only load does not "
        "allow: numpy._core.multiarray._reconstruct, numpy.ndarray, numpy.dtype",
    ),
    Code(
        "AOT022",
        "no-sample-inputs",
        I,
        C.STRUCTURE,
        "No sample inputs were given or stored in the archive; input checks and dynamic stages "
        "need them.",
        "pass --inputs FILE (a torch.save of (args, kwargs))",
        example="no sample inputs for model 'model': pass --inputs FILE to check inputs (dynamic "
        "stages need them)",
    ),
    Code(
        "AOT030",
        "unsupported-compression",
        E,
        C.PACKAGE,
        "A package member uses a compression method torch cannot read (only stored and deflated "
        "are accepted); it is refused before anything is inflated (a sample-inputs file that "
        "does is AOT020).",
        "re-write the file with torch (torch.save, torch.export.save, aoti_compile_and_package)",
        example="model.pt2: member 'model/data/constants/weights.bin' uses compression method 14 "
        "(LZMA); torch reads only stored and deflated members",
    ),
    Code(
        "AOT031",
        "kernel-metadata-unreadable",
        E,
        C.PACKAGE,
        "A metadata member the C++ loader parses at load (`<hash>.kernel_metadata.json`) is "
        "empty or not JSON: aoti_load_package fails with `[json.exception.parse_error.101] ... "
        "attempting to parse an empty input` (reported for torch 2.13 binary_blob packages).",
        "rebuild the package; if it comes out empty again, copy the model's "
        "wrapper_metadata.json over the empty member",
        example="model 'model': model/data/aotinductor/model/ctr5vxm2aefq.kernel_metadata.json is "
        "empty (0 bytes); the C++ loader parses it when the package loads and fails (on an empty "
        'one aoti_load_package raises "[json.exception.parse_error.101] parse error at line 1, '
        'column 1: attempting to parse an empty input"), so the package cannot load',
    ),
    Code(
        "AOT032",
        "compiled-at-load",
        W,
        C.LOAD,
        "The package holds C++ sources and build flags but no .so (aot_inductor.package_cpp_only): "
        "aoti_load_package compiles it in every fresh process, so the deployment host needs a "
        "C++ toolchain (g++ and the torch headers) and every cold start pays the compile "
        "(12-14 s for a one-layer model on 2 CPU cores with torch 2.13, 2 s for the same model "
        "with its .so; without g++: `Failed to compile cpp file.`).",
        "deploy a package compiled with its .so (drop package_cpp_only), or build the .so once "
        "with the packaged CMakeLists.txt and ship that",
        example="model 'model' is C++ sources, compiled at load (aot_inductor.package_cpp_only): "
        "no shared object (.so) is packaged in model/data/aotinductor/model/; aoti_load_package "
        "compiles cxa4ahb2dpqv.wrapper.cpp with the packaged compile and linker flags in every "
        "fresh process, so the deployment host needs a C++ toolchain (g++ and the torch headers) "
        "and every cold start pays the compile",
    ),
    Code(
        "AOT040",
        "serving-platform",
        E,
        C.PACKAGE,
        "The Triton model configuration does not send the model to the PyTorch backend's AOTI "
        "path: `platform` is not `torch_aoti` (the backend loads a .pt2 only then, else it reads "
        "the file as TorchScript) or `backend` names another backend.",
        'set platform: "torch_aoti" (and backend: "pytorch" or none)',
        example='models/mlp/config.pbtxt has platform: "pytorch_libtorch"; the package is an '
        'AOTI .pt2, which the PyTorch backend loads only with platform: "torch_aoti" (else it '
        "reads the file as TorchScript)",
    ),
    Code(
        "AOT041",
        "serving-layout",
        E,
        C.PACKAGE,
        "The model repository is not laid out the way Triton and the backend find the package: "
        "no numeric version folder, no `<version>/model.pt2` (or the file `default_model_filename` "
        "names), a folder in its place, or a config `name` that is not the model folder's name.",
        "lay it out as <repo>/<model>/config.pbtxt and <repo>/<model>/1/model.pt2",
        example="the backend loads models/mlp/1/model.pt2, which does not exist; models/mlp/1 "
        'holds mlp.pt2: rename it to model.pt2 or set default_model_filename: "mlp.pt2"',
    ),
    Code(
        "AOT042",
        "serving-model-name",
        E,
        C.PACKAGE,
        "The backend loads the package's model named `model` (the default name "
        "aoti_compile_and_package gives); a package without a model of that name (package_aoti "
        "over named models) fails to load.",
        "package the model alone, under the default name (aoti_compile_and_package without "
        "a dict of models)",
        example="the backend loads the package's model 'model' (for models/mlp/config.pbtxt), but "
        "the package holds 'mlp': the load fails",
    ),
    Code(
        "AOT043",
        "serving-io-count",
        E,
        C.STRUCTURE,
        "The config declares another number of inputs than the package's call takes (the "
        "backend refuses to load it), no outputs, or more outputs than the package returns.",
        "declare one input per tensor the package takes (aotipre serving-config writes them)",
        example="models/mlp/config.pbtxt declares 1 input, the package takes 2 (input_ids "
        "(args[0]), attention_mask (args[1])): the backend refuses to load it",
        overrides=((I, "the config serves fewer outputs than the package returns"),),
    ),
    Code(
        "AOT044",
        "serving-io-name",
        E,
        C.STRUCTURE,
        "A config input or output name the backend cannot map onto the package's call: neither "
        "the call-spec name (`ARGS[0]`, `RESULT[0]`) nor the ordinal (`INPUT__0`, `OUTPUT__0`), "
        "or two entries naming the same tensor.",
        "name inputs INPUT__<i> and outputs OUTPUT__<i> (positions in the package's call)",
        example="models/ranker/config.pbtxt input 'KWARGS[mask]' is not a name the backend gives "
        "any of the package's inputs (it accepts INPUT__0 or ARGS[0], INPUT__1 or ARGS[1]): the "
        "load fails",
    ),
    Code(
        "AOT045",
        "serving-dtype",
        E,
        C.DTYPE,
        "A config data_type differs from the package's dtype, or is one the backend cannot "
        "hand to torch (TYPE_BF16, TYPE_UINT16/32/64, TYPE_STRING): requests arrive as tensors "
        "of the config's type.",
        "use the TYPE_ the package's dtype maps to (float32: TYPE_FP32, int64: TYPE_INT64, ...)",
        example="models/mlp/config.pbtxt input 'INPUT__0' is TYPE_FP32 (float32), the package's "
        "input_ids (args[0]) is int64",
    ),
    Code(
        "AOT046",
        "serving-dims",
        E,
        C.SHAPE,
        "A config's dims disagree with the package's shape: another rank, another static "
        "size, or a static size outside the package's dynamic range (Triton accepts requests of "
        "the config's shape and the package refuses them).",
        "dims are the package's shape (batch dim left out when max_batch_size > 0), -1 where it "
        "is dynamic",
        example="models/mlp/config.pbtxt input 'INPUT__0' dim 0 is 9, the package's input_ids "
        "(args[0]) dim 1 is 8: every request Triton accepts is refused by the package",
        overrides=((W, "-1 where the package's dim is static: Triton lets any size through"),),
    ),
    Code(
        "AOT047",
        "serving-batch",
        E,
        C.DYNAMIC_RANGE,
        "max_batch_size does not fit the package's batch dim: larger than the exported "
        "maximum, or batching on a first dim that is static or not shared by every input. "
        "A refused batch of 1 is AOT082; the backend's batching caveat is AOT083.",
        "set max_batch_size to at most the batch dim's max, or 0 (no batching) with the batch "
        "dim in dims as -1",
        example="models/mlp/config.pbtxt max_batch_size: 64, but the package's batch dim "
        "(input_ids (args[0]) dim 0, s43) is exported with max 32: batches of 33 to 64 are "
        "refused by the package",
    ),
    Code(
        "AOT048",
        "serving-device",
        E,
        C.DEVICE,
        "The instance_group kind puts the model where the package cannot run: KIND_GPU (or "
        "KIND_AUTO on a GPU host) for a CPU package, KIND_CPU for a CUDA package; the backend "
        "places the inputs by the kind, not by the package.",
        "use KIND_CPU for a cpu package and KIND_GPU for a cuda one",
        example="models/mlp/config.pbtxt instance_group[0] kind KIND_GPU, but the package's model "
        "'model' is compiled for cpu: the backend hands it GPU tensors",
        overrides=((W, "KIND_AUTO or KIND_MODEL: the placement depends on the host"),),
    ),
    Code(
        "AOT049",
        "serving-unsupported",
        E,
        C.STRUCTURE,
        "The config or the package uses what the torch_aoti backend does not support: "
        "sequence_batching, non-tensor inputs, a keyword argument that is not a tensor, dict "
        "keys with brackets, quotes or spaces.",
        "serve tensors only (dict, tuple and list of tensors) without sequence batching",
        example="models/mlp/config.pbtxt: the config sets sequence_batching, which the torch_aoti "
        "backend refuses at load ('Sequence batching is not supported yet.')",
    ),
    Code(
        "AOT050",
        "binary-unreadable",
        E,
        C.PACKAGE,
        "A compiled member (.so, .cubin, .fatbin) is not a readable ELF shared object, cubin or "
        "fatbin (truncated, damaged, or not a binary), or the .so is missing with nothing to "
        "build it from: the loader fails on it.",
        "rebuild the package; a copy or upload probably damaged it",
        example="model 'model': its AOTI code has no shared object (.so) in "
        "model/data/aotinductor/model/, nor the compile and linker flags the C++ loader would "
        "build one from: aoti_load_package cannot load it",
    ),
    Code(
        "AOT051",
        "cpu-compiled-for",
        I,
        C.ENVIRONMENT,
        "The CPU target the .so was compiled for (its resolved -march and extensions, from the "
        "compiler command line recorded in the .so).",
        "a target lacking an extension the code uses dies with SIGILL; check with "
        "--target cpu,isa=...",
        example="model 'model': CPU code compiled for -march=znver3 (enabled: avx512bw, avx512cd, "
        "avx512dq, avx512f, avx512vl, avx512_vnni; metadata AOTI_CPU_ISA: AVX512 AVX512_VNNI)",
    ),
    Code(
        "AOT052",
        "producer-torch",
        I,
        C.VERSION,
        "The torch releases that could have produced the AOTI code (an AOTI-only package records "
        "no version), from the entry points and shim imports of its .so.",
        "load it with a torch at least as new as the producer's shim needs; --target torch=X checks",
        example="model 'model': AOTI code produced by torch 2.13 (from the 40 AOTInductor entry "
        "points and 25 shim imports of its .so)",
    ),
    Code(
        "AOT053",
        "gpu-code",
        I,
        C.ENVIRONMENT,
        "The GPU code the cubins and fatbins carry: SASS architectures, PTX targets and PTX ISA "
        "versions.",
        "a GPU needs SASS for its architecture or PTX no newer than it; --target cuda,cc=... checks",
        example="model 'model': 2 GPU code member(s) carry compute_90, sm_80, sm_90 (PTX ISA 8.4)",
    ),
    Code(
        "AOT060",
        "weights-missing",
        E,
        C.PACKAGE,
        "A weight swap (--weights) lacks a constant the package needs: torch's load_constants "
        "with check_full_update=True refuses the whole swap, without it the constant keeps its "
        "compiled (stale) value.",
        "add the tensor to the weights file (the package's names: get_constant_fqns())",
        example="--weights weights.pt lacks 'fc.bias' (float32[16], a Parameter) that the "
        "package's constants need: load_constants(check_full_update=True) refuses the swap, "
        "without the check the constant keeps its compiled value",
    ),
    Code(
        "AOT061",
        "weights-unknown-name",
        E,
        C.PACKAGE,
        "A weight swap names a tensor the package has no constant for (renamed, or another "
        "model's): torch's load_constants refuses the whole swap (`Constant not found: NAME`).",
        "rename the tensor to the package's name (the closest one is suggested) or drop it",
        example="'fc.biass' of --weights weights.pt names no constant of the package; did you mean "
        "'fc.bias'? (load_constants refuses the swap: Constant not found: fc.biass)",
    ),
    Code(
        "AOT062",
        "weights-shape",
        E,
        C.SHAPE,
        "A tensor of a weight swap has another shape than the package's constant: torch copies "
        "it unchecked, so the model computes with misplaced values or reads past the tensor.",
        "swap weights of the model the package was compiled from (same shapes)",
        example="'fc.weight': --weights weights.pt holds shape [8, 16], the package's constant "
        "fc_weight has [16, 8] (load_constants copies it unchecked)",
    ),
    Code(
        "AOT063",
        "weights-dtype",
        E,
        C.DTYPE,
        "A tensor of a weight swap has another dtype than the package's constant: torch copies "
        "its bytes unchecked, so the model computes with garbage.",
        "convert the tensor to the package's dtype before the swap (t.to(dtype))",
        example="'fc.weight': --weights weights.pt holds float16, the package's constant fc_weight "
        "is float32 (load_constants copies the bytes unchecked)",
    ),
    Code(
        "AOT064",
        "weights-device",
        W,
        C.DEVICE,
        "A tensor of a weight swap is stored on another device than the package's constants.",
        "move the tensors to the package's device before the swap (torch.load(..., "
        "map_location=...))",
        example="'fc.weight': --weights weights.pt stores it on cuda:0, the package's constants "
        "live on cpu",
    ),
    Code(
        "AOT065",
        "weights-folded",
        W,
        C.PACKAGE,
        "A weight swap gives a value for a constant the compile folded (FoldedConstant): it is "
        "computed from other constants, so the value given for it is not what runs.",
        "swap the constants it was folded from instead (the package's Parameter/Buffer names)",
        example="'_FOLDED_CONST_add' of --weights weights.pt is a FoldedConstant constant: the "
        "compile folded it from other constants, so it is recomputed from them (runtime folding) "
        "or stays as compiled; the value the swap gives for it is not what runs",
    ),
    Code(
        "AOT066",
        "weights-inlined",
        E,
        C.PACKAGE,
        "A weight swap meets a tensor of the model's state_dict that the package has no "
        "constant for: inductor inlined its compile-time value into the kernels (0-d, or 1-d "
        "with at most 8 elements), so no swap can change it. load_constants refuses a swap that "
        "names it; a swap that leaves it out keeps its compiled value while the others change "
        "(the ExportedProgram, packaged or --exported-program, names these tensors).",
        "recompile to swap it (aot_inductor.use_runtime_constant_folding=True or "
        "always_keep_tensor_constants=True keep small tensors as constants)",
        overrides=(
            (
                W,
                "no ExportedProgram names them: the compiled code keeps no constant for lifted "
                "tensors the file does not name",
            ),
        ),
        example="'norm.eps' (float32[]) of --weights weights.pt is not a constant of the package: "
        "a tensor this small is inlined into the kernels at compile time, so its compiled value "
        "runs whatever the swap gives; load_constants refuses a swap naming it (Constant not "
        "found: norm.eps)",
    ),
    Code(
        "AOT067",
        "weights-swap-refused",
        E,
        C.LOAD,
        "Applying the weight swap the way a deployment does (load_constants on a fresh copy) "
        "failed.",
        "fix the weights file (the static AOT06x findings say what differs)",
        example="swapping the weights of --weights weights.pt into a fresh copy of model 'model' "
        "(load_constants, check_full_update=True) failed at applying it: RuntimeError: Constant "
        "not found: fc.biass",
    ),
    Code(
        "AOT068",
        "weights-outputs-differ",
        E,
        C.ACCURACY,
        "After the weight swap the compiled model's outputs differ from the ExportedProgram run "
        "with the same weights.",
        "the swap was applied wrongly (shape, dtype, folded or inlined constants): see the "
        "static findings",
        example="after swapping in --weights weights.pt, output 0 of model 'model' differs from "
        "the ExportedProgram in the archive run with the same weights: 32 of 32 elements differ "
        "beyond rtol=1.3e-06, atol=1e-05; max abs error 2.41; max rel error 3.7; worst at (1, 5): "
        "1.52 vs eager -0.892",
    ),
    Code(
        "AOT069",
        "weights-swap-ignored",
        E,
        C.ACCURACY,
        "After swapping in weights that differ from the compiled ones, the outputs are "
        "identical to the unswapped run: the swap was silently ignored.",
        "swap constants the package really reads (not folded or inlined ones), or recompile",
        example="after swapping in --weights weights.pt (1 tensor(s) differ from the compiled "
        "values: '_FOLDED_CONST_add'), model 'model' returns exactly the outputs of the unswapped "
        "copy: the swap was silently ignored",
    ),
    Code(
        "AOT070",
        "exported-program-mismatch",
        E,
        C.PACKAGE,
        "The ExportedProgram given with --exported-program is not the program the package's "
        "AOTI code was compiled from: its tensor inputs (count, dtype, rank) or its output count "
        "differ from what the compiled code takes and returns, or a parameter or buffer the "
        "compiled code holds has another shape or dtype in it. Its dynamic ranges, specialized "
        "values and eager outputs would be compared with another model's.",
        "pass the torch.export.save of the model the package was compiled from",
        example="the ExportedProgram of --exported-program mlp.pt2 is not the program model "
        "'model' was compiled from (1 tensor input(s), the AOTI code takes 2): its ranges and "
        "outputs are another model's",
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
        example="the package stores 2 opaque Python object(s) (opaque_obj_0, opaque_obj_1) that "
        "torch.export.load and load_pt2 unpickle with pickle.loads; aotipre did not unpickle them",
    ),
    Code(
        "AOT081",
        "pickled-members",
        E,
        C.PACKAGE,
        "The package holds members that loading it unpickles without restriction: weights or "
        "constants stored with use_pickle: true (torch.load(weights_only=False)), opaque objects "
        "(pickle.loads), or ExportedProgram artifacts (sample inputs, legacy weights) that a "
        "weights-only load refuses, so torch falls back to weights_only=False. Any of them can "
        "run arbitrary code when the package loads. aotipre never unpickles them, and its dynamic "
        "stages do not load such a package without --allow-pickle.",
        "re-export without pickled members (tensor subclasses such as quantized weights are "
        "pickled, plain tensors are not; keep sample inputs to tensors in tuples and dicts); if "
        "you trust where the package comes from, pass --allow-pickle (allow-pickle = true)",
        overrides=(
            (W, "with --allow-pickle: the user trusts the package, and the dynamic stages load it"),
        ),
        example="model 'model': 2 weight(s) stored as pickles (use_pickle: true in "
        "pkg/data/weights/model_weights_config.json): fc.weight (pkg/data/weights/weight_0), "
        "fc.bias (pkg/data/weights/weight_1); loading the package (torch.export.load, load_pt2, "
        "aoti_load_package) unpickles them with torch.load(weights_only=False), which runs any "
        "code a pickle names; aotipre did not unpickle them; the dynamic stages do not load "
        "the package without --allow-pickle",
    ),
    Code(
        "AOT082",
        "serving-lone-request-refused",
        W,
        C.DYNAMIC_RANGE,
        "The config batches (max_batch_size > 0), so Triton may send a batch of 1 (a lone "
        "request, or what the dynamic batcher gathered in its delay), but the package's batch "
        "dim takes at least 2: such a request fails. AOTInductor compiles a Dim(min=1) batch as "
        "min 2 unless exported size-oblivious.",
        "export under torch.fx.experimental._config.patch(backed_size_oblivious=True) so the "
        "package takes a batch of 1, or serve with max_batch_size: 0",
        example="models/mlp/config.pbtxt max_batch_size: 64 lets Triton send a batch of 1 (a "
        "lone request), but the package's batch dim (args[0] dim 0, s77) takes 2 to 64: such a "
        "request is refused",
    ),
    Code(
        "AOT083",
        "serving-batching-beta",
        I,
        C.STRUCTURE,
        "The config batches above 1; the backend's README says batch sizes above 1 are not "
        "completed for AOT Inductor packages (Triton 26.03+, beta).",
        "try the batched config on the Triton release you deploy",
        example="models/mlp/config.pbtxt max_batch_size: 32: the backend's README says batch "
        "sizes above 1 are not completed for AOT Inductor packages (Triton 26.03+, beta)",
    ),
    Code(
        "AOT095",
        "release-model-set-changed",
        E,
        C.PACKAGE,
        "aotipre diff: a model was removed or added, lost its AOTI code or its ExportedProgram, "
        "or one side's contract cannot be read (rules MODEL_REMOVED, MODEL_ADDED, AOTI_REMOVED, "
        "EXPORTED_PROGRAM_REMOVED, CONTRACT_UNAVAILABLE; docs/diff.md).",
        "keep serving the models OLD serves under their names, or release the change as breaking",
        ((I, "a compatible change (the rule's verdict: OLD's callers run unchanged)"),),
        example="MODEL_REMOVED: model 'decoder' is not in NEW",
    ),
    Code(
        "AOT096",
        "release-weights-changed",
        E,
        C.PACKAGE,
        "aotipre diff: a weight was removed, added, reshaped, retyped, folded into the code or "
        "made swappable, or its stored values changed (rules WEIGHT_*; docs/diff.md).",
        "a weight update built for OLD must match NEW's names, shapes and dtypes; check the "
        "values changed on purpose",
        ((I, "a compatible change (the rule's verdict: OLD's callers run unchanged)"),),
        example="WEIGHT_RESHAPED: weight 'proj.weight' shape [4, 16], was [4, 8]",
    ),
    # 1: call structure
    Code(
        "AOT101",
        "arg-count",
        E,
        C.STRUCTURE,
        "The number of positional arguments differs from the exported signature.",
        "pass exactly the positional arguments the model was exported with",
        example="1 positional arguments given, the model was exported with 2 (input_ids, "
        "attention_mask)",
    ),
    Code(
        "AOT102",
        "missing-kwarg",
        E,
        C.STRUCTURE,
        "A keyword argument the model was exported with is missing.",
        "add the keyword argument to the sample inputs",
        example="keyword argument 'mask' is missing",
    ),
    Code(
        "AOT103",
        "unexpected-kwarg",
        E,
        C.STRUCTURE,
        "A keyword argument the model was not exported with was given.",
        "remove it, or fix its name",
        example="unexpected keyword argument 'bias'",
    ),
    Code(
        "AOT104",
        "nesting-mismatch",
        E,
        C.STRUCTURE,
        "An input's container structure (tuple, list, dict) differs from the exported one.",
        "pass inputs with the same nesting as the example inputs used for export",
        example="'pair' has 3 items, the model expects 2",
    ),
    Code(
        "AOT105",
        "constant-mismatch",
        E,
        C.STRUCTURE,
        "A non-tensor input differs from the value export specialized it to: the compiled model "
        "ignores the value passed and silently computes with the exported one.",
        "pass the exported value; if it must vary, pass it as a tensor (torch.tensor(v)) or "
        "compile one package per value",
        example="input 'scale' is 0.7, but export specialized it to 0.5: the compiled model "
        "ignores the value passed and silently computes with 0.5 (the ExportedProgram's module() "
        "refuses it: Guard failed: scale == 0.5)",
    ),
    Code(
        "AOT106",
        "kind-mismatch",
        E,
        C.STRUCTURE,
        "An input is of the wrong kind (a tensor where a number was exported, or the reverse).",
        "pass the same kind of value as at export",
        example="input 'scale' was exported as a constant, got a tensor float32[] on cpu",
    ),
    Code(
        "AOT107",
        "specialized-arguments",
        I,
        C.STRUCTURE,
        "Export specialized non-tensor arguments (float, int, bool, str, None) to the values "
        "recorded in the ExportedProgram; the compiled model ignores any value passed for them.",
        "pass them as tensors (torch.tensor(v)) if they must vary at deploy time",
        example="model 'model': export specialized scale (kwargs['scale']) = 0.5; the compiled "
        "model ignores any value passed for it and computes with this one",
    ),
    Code(
        "AOT108",
        "specialized-arguments-unrecorded",
        W,
        C.STRUCTURE,
        "An AOTI-only package has non-tensor arguments that export specialized: the compiled "
        "model ignores any value passed for them, and the package does not record which value "
        "it computes with.",
        "package the ExportedProgram with the AOTI code (it records the values), and pass "
        "arguments that must vary as tensors",
        example="model 'model': return_dict (kwargs['return_dict']) is not an input of the "
        "compiled model: export specialized it to the value of the example inputs, which an "
        "AOTI-only package does not record; any value passed is ignored (the sample inputs pass "
        "return_dict=False: not what will run unless it equals the exported value; pass "
        "--exported-program FILE to compare with it)",
    ),
    Code(
        "AOT109",
        "inputs-are-checkpoint",
        E,
        C.STRUCTURE,
        "The sample-inputs file holds a state_dict or training checkpoint (parameter tensors by "
        "name), not the model's inputs.",
        "save the inputs themselves: torch.save(((x,), {'mask': m}), 'sample.pt')",
        example="inputs.pt holds a state_dict (4 tensors named like parameters: 'fc1.weight', "
        "'fc1.bias', 'fc2.weight', ...), not inputs for model 'model': weights are inside the "
        "package; the sample inputs are what the model is called with",
    ),
    Code(
        "AOT110",
        "export-guard-failed",
        E,
        C.STRUCTURE,
        "The ExportedProgram refuses the inputs with one of the guards export recorded (`Guard "
        "failed: alpha == 0.5`, a size relation): the compiled model does not check those "
        "guards, so it runs such inputs and computes with what it was exported for.",
        "pass inputs that satisfy the guard (the message quotes it); a value that must vary "
        "needs a re-export with it as a tensor or a dynamic dim",
        example="the inputs break a guard that export recorded for the model (scale == 0.5): the "
        "ExportedProgram in the archive refuses them, while the compiled model, which does not "
        "check that guard, ran them and computed with what it was exported for",
    ),
    Code(
        "AOT120",
        "custom-op-needs-registration",
        W,
        C.STRUCTURE,
        "The model calls a custom operator that torch does not provide; the serving process must "
        "register it before loading, and aotipre was not told how (--import, --library).",
        "pass --library PATH (a TORCH_LIBRARY .so) or --import MODULE (the Python module that "
        "defines the op) so the check registers it like the deployment will",
        example="model 'model' calls mylib::scale3 (a custom operator, seen in its AOTI code), "
        "which torch does not provide: the process that loads the package must register it first",
    ),
    Code(
        "AOT121",
        "custom-op-not-registered",
        E,
        C.STRUCTURE,
        "A custom operator the model calls is not registered in the process that compiles, "
        "loads or runs it, even after the given --import and --library.",
        "load the op's library (torch.ops.load_library / --library) or import the module that "
        "defines it (--import) before loading the package",
        example="mylib::scale3 is not registered in the load worker (registered: nothing); torch: "
        "Could not find schema for mylib::scale3.",
    ),
    Code(
        "AOT122",
        "python-custom-op-in-cpp-runtime",
        E,
        C.STRUCTURE,
        "The package calls an operator defined with torch.library.custom_op (Python), and it is "
        "meant for the C++ loader, which cannot run Python operators.",
        "implement the op in C++ (TORCH_LIBRARY) and load that library in the server, or serve "
        "the package from Python",
        example="model 'model' calls mylib::twice (a Python torch.library.custom_op, seen in its "
        "ExportedProgram): the C++ loader cannot run it (torch: 'Custom operators created via "
        "torch.library.custom_op cannot be run via AOTI without Python environment')",
    ),
    Code(
        "AOT123",
        "custom-op-registration-failed",
        E,
        C.ENVIRONMENT,
        "Registering the custom operators failed in the worker: an --import module raised, or an "
        "--library file could not be loaded.",
        "check the module name (importable from the working directory or PYTHONPATH) or the "
        "library path, and that the library was built against this torch",
        example="registering custom operators failed: --import mylib_ops: ModuleNotFoundError: No "
        "module named 'mylib_ops' (the load step did not run)",
    ),
    Code(
        "AOT190",
        "release-call-changed",
        E,
        C.STRUCTURE,
        "aotipre diff: the call changed: positional or keyword inputs added, removed, reordered "
        "or renamed, an input's kind, or a specialized scalar's baked value (rules INPUT_*, "
        "KWARG_*, SCALAR_VALUE_CHANGED; docs/diff.md).",
        "keep OLD's call working (same inputs, order and keywords) or release the change as "
        "breaking",
        ((I, "a compatible change (the rule's verdict: OLD's callers run unchanged)"),),
        example="KWARG_ADDED: keyword input kwargs['mask'] is new in NEW",
    ),
    Code(
        "AOT191",
        "release-outputs-changed",
        E,
        C.STRUCTURE,
        "aotipre diff: the outputs changed: fewer or more of them, or their pytree (rules "
        "OUTPUT_REMOVED, OUTPUT_ADDED, OUTPUT_PYTREE_CHANGED; docs/diff.md).",
        "append new outputs after OLD's and keep their container, or release the change as "
        "breaking",
        ((I, "a compatible change (the rule's verdict: OLD's callers run unchanged)"),),
        example="OUTPUT_PYTREE_CHANGED: outputs are {logits: *, hidden: *}, were tuple(*, *)",
    ),
    # 2: dtype and device
    Code(
        "AOT201",
        "dtype-mismatch",
        E,
        C.DTYPE,
        "An input tensor's dtype differs from the compiled one.",
        "cast the input (e.g. x.to(torch.float32)) or re-export with the deployment dtype",
        example="input 'input_ids' has dtype float32, the package expects int64",
    ),
    Code(
        "AOT202",
        "device-mismatch",
        E,
        C.DEVICE,
        "An input tensor lives on a different device type than the package was compiled for.",
        "move inputs to the package's device before calling it",
        example="input 'x' is on cpu, the package expects cuda; move inputs to the device before "
        "calling the model",
        overrides=((W, "a CPU sample for an accelerator package: aotipre's own runs move it"),),
    ),
    Code(
        "AOT290",
        "release-dtype-or-device-changed",
        E,
        C.DTYPE,
        "aotipre diff: an input's or output's dtype, or an input's device, changed (rules "
        "DTYPE_CHANGED, DEVICE_CHANGED, OUTPUT_DTYPE_CHANGED; docs/diff.md).",
        "keep OLD's dtypes and devices, or release the change as breaking",
        ((I, "a compatible change (the rule's verdict: OLD's callers run unchanged)"),),
        example="DTYPE_CHANGED: input 'x' dtype float16, was float32",
    ),
    # 3: shape, dynamic range and stride
    Code(
        "AOT301",
        "rank-mismatch",
        E,
        C.SHAPE,
        "An input tensor has a different number of dimensions than compiled.",
        "reshape the input to the exported rank",
        example="input 'input_ids' has 3 dims [3, 10, 1], the package expects 2 ['s43', 's53']",
    ),
    Code(
        "AOT302",
        "static-dim-mismatch",
        E,
        C.SHAPE,
        "A static dimension differs from its compiled size.",
        "the dim was specialized at export; mark it dynamic with torch.export.Dim to vary it",
        example="input 'x' dim 1 is 12, the package was compiled for exactly 16",
    ),
    Code(
        "AOT303",
        "dim-below-min",
        E,
        C.DYNAMIC_RANGE,
        "A dynamic dimension is below its minimum.",
        "pad the input, or re-export with a smaller Dim min",
        example="input 'input_ids' dim 0 (s43) is 1, below the minimum 2 of its range [2, 64]; "
        "export allows 1 but the compiled AOTI code checks >= 2",
    ),
    Code(
        "AOT304",
        "dim-above-max",
        E,
        C.DYNAMIC_RANGE,
        "A dynamic dimension is above its maximum.",
        "split or truncate the input, or re-export with a larger Dim max",
        example="input 'input_ids' dim 1 (s53) is 129, above the maximum 128 of its range [2, 128]",
    ),
    Code(
        "AOT305",
        "shared-dim-disagrees",
        E,
        C.SHAPE,
        "Inputs that share a dynamic dimension have different sizes for it.",
        "inputs that share a Dim must agree (e.g. input_ids and attention_mask sequence length)",
        example="input 'attention_mask' dim 1 is 17 but 'input_ids' dim 1 is 16; both are the "
        "dynamic dim s53 and must be equal",
    ),
    Code(
        "AOT306",
        "derived-dim-mismatch",
        E,
        C.SHAPE,
        "A derived dimension (e.g. 2*s0) does not equal its expression.",
        "make the dim equal its exported expression",
        example="input 'y' dim 0 is 5, but the package derives it as 2*s77 = 6",
    ),
    Code(
        "AOT307",
        "stride-mismatch",
        E,
        C.STRIDE,
        "An input's stride differs from the stride the package was compiled for. A default "
        "deployment (AOTI_RUNTIME_CHECK_INPUTS unset) runs it unchecked, and whether the outputs "
        "are right depends on the model's code; the runtime check, where it is set, refuses it. "
        "The probe runs the sample as given without the check and compares its outputs with "
        "its values laid out as compiled: an error when they differ or the run fails.",
        "pass a contiguous tensor (x.contiguous()) or the exported layout",
        overrides=(
            (
                W,
                "the deployment does not set AOTI_RUNTIME_CHECK_INPUTS (no "
                "--deployment-checks-inputs) and no run showed wrong outputs: statically (the "
                "probe settles it), or when the sample as given returned its compiled layout's "
                "outputs",
            ),
        ),
        example="input 'attention_mask' has stride 16 at dim 0, the package was compiled for 10 "
        "(contiguous layout; the input's strides are [16, 1]); the deployment sets "
        "AOTI_RUNTIME_CHECK_INPUTS (--deployment-checks-inputs), whose check refuses it",
    ),
    Code(
        "AOT308",
        "index-out-of-range",
        E,
        C.SHAPE,
        "An integer sample input holds a value outside the rows of the embedding or table the "
        "package indexes with it (e.g. a token id past the vocabulary).",
        "validate or clamp the ids before calling the model (tokenizer and model vocabularies "
        "must match), or re-export with the larger table",
        example="input 'input_ids' holds 600 at position [2, 3], outside the 500 rows of the "
        "embedding it indexes (valid 0..499; the input's values span 13..600): the compiled "
        "model's index check fails on it, or, compiled without index asserts, it reads out of "
        "bounds",
    ),
    Code(
        "AOT309",
        "unchecked-data-dependent-size",
        W,
        C.DYNAMIC_RANGE,
        "The compiled code sizes a tensor with a value it reads from an input at run time (`u0` "
        "from `.item()`) and checks no range of it: the package was compiled with "
        "unsafe_skip_scalar_range_asserts (torch 2.15+) or scalar_asserts=False, which drop the "
        "model's torch._check bounds and export's own. A value outside what export assumed runs without an error, "
        "even under AOTI_RUNTIME_CHECK_INPUTS=1, and kernels read or write out of bounds "
        "(measured: garbage outputs).",
        "recompile with the range asserts (unset TORCHINDUCTOR_UNSAFE_SKIP_SCALAR_RANGE_ASSERTS "
        "and TORCHINDUCTOR_SCALAR_ASSERTS=0), or validate the value in the serving "
        "process before every call",
        example="model 'model': u0 (read from a tensor at run time, int64) sizes a tensor and "
        "the compiled code checks no range of it: compiled without its scalar range asserts "
        "(unsafe_skip_scalar_range_asserts, torch 2.15+, or scalar_asserts=False), so the "
        "model's torch._check bounds and export's own are gone; a value outside what export assumed runs unchecked, even with "
        "AOTI_RUNTIME_CHECK_INPUTS=1, and reads or writes out of bounds without an error",
    ),
    Code(
        "AOT390",
        "release-shape-changed",
        E,
        C.SHAPE,
        "aotipre diff: an input's rank, a static size or a dynamic range changed, a dim became "
        "static or dynamic, or an output's shape changed (rules RANK_CHANGED, STATIC_DIM_CHANGED, "
        "DIM_BECAME_*, DYNAMIC_RANGE_*, OUTPUT_SHAPE_CHANGED; docs/diff.md).",
        "export NEW with ranges that hold every size OLD accepted, or release the change as "
        "breaking",
        ((I, "a compatible change (the rule's verdict: OLD's callers run unchanged)"),),
        example="DYNAMIC_RANGE_NARROWED: input 'x' dim 0 accepts 2..32, was 2..64",
    ),
    # 4: host and version compatibility
    Code(
        "AOT401",
        "cuda-unavailable",
        E,
        C.ENVIRONMENT,
        "The package runs on CUDA and the target host has no CUDA GPU.",
        "run on a CUDA host, or recompile the ExportedProgram for cpu",
        example="target cpu: model 'model': compiled for cuda, and the target has no cuda device",
        overrides=((I, "with --static-only and no --target: a fact of this machine only"),),
    ),
    Code(
        "AOT402",
        "compute-capability",
        E,
        C.ENVIRONMENT,
        "The target GPU's compute capability differs from the one the package was compiled on "
        "(metadata only: used when its cubins cannot be read).",
        "recompile on (or for) the deployment GPU architecture",
        example="target cuda,cc=8.0: model 'model': compiled on compute capability 9.0 (metadata; "
        "its cubins could not be read), the target has 8.0",
        overrides=((I, "with --static-only and no --target: a fact of this machine only"),),
    ),
    Code(
        "AOT403",
        "cpu-isa",
        E,
        C.ENVIRONMENT,
        "The target CPU lacks an extension the package was compiled with (-march=native) and its "
        "machine code could not be scanned to tell whether it is used; it can die with SIGILL.",
        "compile on a host no newer than the deployment CPU",
        example="target cpu,isa=avx2: model 'model': compiled with AVX512F, AVX512BW, AVX512VL "
        "enabled (-march=skylake-avx512), which the target lacks; whether the code uses them is "
        "unknown (no instruction scan): it may die with SIGILL",
        overrides=((I, "with --static-only and no --target: a fact of this machine only"),),
    ),
    Code(
        "AOT404",
        "platform-mismatch",
        E,
        C.ENVIRONMENT,
        "The package was compiled for another OS or machine architecture.",
        "compile on the deployment platform",
        example="target cpu,machine=aarch64: model 'model': its .so is x86_64 code (ELF header), "
        "the target is aarch64",
        overrides=((I, "with --static-only and no --target: a fact of this machine only"),),
    ),
    Code(
        "AOT405",
        "torch-version",
        W,
        C.VERSION,
        "The package was written by a torch version outside the supported or installed range.",
        "load it with the torch version that wrote it",
        example="model 'model' was exported with torch 2.9.1; aotipre supports torch 2.11-2.15",
    ),
    Code(
        "AOT406",
        "device-type-mismatch",
        E,
        C.DEVICE,
        "The package's device type differs from the target device.",
        "recompile the ExportedProgram for the target device",
        example="target cuda,cc=8.0: model 'model': compiled for cpu, but the target deploys on "
        "cuda",
        overrides=((I, "with --static-only and no --target: a fact of this machine only"),),
    ),
    Code(
        "AOT407",
        "compiler-unusable",
        E,
        C.ENVIRONMENT,
        "The C++ compiler AOTInductor uses is missing or cannot build a shared library, so no "
        "package can be compiled on this host.",
        "install g++ (or point $CXX at a working C++ compiler); precompiled packages can still load",
        example="the C++ compiler AOTInductor uses (g++) cannot build a shared library: building a "
        "hello-world shared library failed (exited with code 1 after 0.2 s): /usr/bin/ld: cannot "
        "find -lstdc++: No such file or directory | collect2: error: ld returned 1 exit status",
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
        example="package extraction (TMPDIR) /tmp is mounted noexec (/tmp: "
        "rw,nosuid,nodev,noexec): AOTInductor maps the .so files it writes there, which fails on "
        "such a directory",
        overrides=((W, "not writable, where nothing needs to run from it"),),
    ),
    Code(
        "AOT409",
        "low-disk-space",
        W,
        C.ENVIRONMENT,
        "A directory AOTInductor extracts packages or writes compiles into has little free space.",
        "free space, or point TMPDIR / TORCHINDUCTOR_CACHE_DIR / --cache-dir elsewhere",
        example="aotipre compile cache /home/ci/.cache/aotipre has 64.0 MiB free (less than 1.0 "
        "GiB)",
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
        example="the torch process loads /opt/conda/lib/libstdc++.so.6.0.29 (GLIBCXX up to "
        "3.4.29), but g++ builds against /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.33 (GLIBCXX "
        "up to 3.4.33): code compiled here may need symbols up to GLIBCXX_3.4.33 that the loaded "
        "library lacks (load errors like `version GLIBCXX_3.4.33 not found`, or crashes in the "
        "loader)",
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
        example="the canary on cpu: load crashes (SIGSEGV): the process was killed by SIGSEGV "
        "while loading model 'model' of model.pt2 (preloading the system libstdc++ did not help)",
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
        example="the process was killed by SIGSEGV while loading model 'model' of model.pt2; a "
        "trivial canary model compiled on this host crashes too (load on cpu, SIGSEGV): the host "
        "cannot run AOTI packages, so the crash says nothing about this model",
    ),
    Code(
        "AOT420",
        "compile-cache-unusable",
        W,
        C.ENVIRONMENT,
        "The compile cache directory cannot be used (read-only, not a directory, no space "
        "left); the check went on without it.",
        "point --cache-dir (config key cache-dir) at a writable folder with free space, or pass "
        "--no-cache",
        example="the compile cache /home/ci/.cache/aotipre cannot be used (Not a directory); "
        "compiled without it",
    ),
    Code(
        "AOT430",
        "shim-symbol-missing",
        E,
        C.VERSION,
        "The .so imports torch C shim functions (or, checked against a libtorch folder, other "
        "symbols of libtorch: SLEEF vector math, c10/ATen C++) the target torch does not "
        "export: dlopen fails with `undefined symbol`.",
        "load it with a torch that exports them (at least the release that produced it), or "
        "recompile with the target's torch",
        example="target cpu,torch=2.12: model 'model': wrapper.so (cj44olkx) imports 1 shim "
        "function(s) torch 2.12 does not export: dlopen fails with `undefined symbol: "
        "aoti_torch_cpu_grid_sampler_3d`",
        overrides=((I, "with --static-only and no --target: a fact of this machine only"),),
    ),
    Code(
        "AOT431",
        "glibc-too-old",
        E,
        C.ENVIRONMENT,
        "The .so needs a newer glibc symbol version than the target has: dlopen fails with "
        "`version GLIBC_x not found`.",
        "compile on a system with the deployment's glibc (or older), or deploy on a newer one",
        example="target cpu,glibc=2.17: model 'model': wrapper.so (cj44olkx) needs GLIBC_2.34; the "
        "target has GLIBC_2.17: dlopen fails with `libc.so.6: version `GLIBC_2.34' not found "
        "(required by wrapper.so (cj44olkx))`",
    ),
    Code(
        "AOT432",
        "libstdcxx-too-old",
        E,
        C.ENVIRONMENT,
        "The .so needs a newer libstdc++ symbol version (GLIBCXX_/CXXABI_) than the target's "
        "libstdc++ defines: dlopen fails with `version GLIBCXX_x not found`.",
        "compile with a g++ no newer than the deployment's libstdc++, or ship a newer libstdc++ "
        "in the image",
        example="target cpu,libstdcxx=3.4.19: model 'model': wrapper.so (cj44olkx) needs "
        "GLIBCXX_3.4.30; the target has GLIBCXX_3.4.19: dlopen fails with `libstdc++.so.6: "
        "version `GLIBCXX_3.4.30' not found (required by wrapper.so (cj44olkx))`",
    ),
    Code(
        "AOT433",
        "no-gpu-code-for-arch",
        E,
        C.ENVIRONMENT,
        "For a GPU of the target, the cubins/fatbins hold neither SASS for its architecture nor "
        "PTX the driver can JIT: kernels fail to launch (no kernel image for the device).",
        "compile for every GPU of the fleet, e.g. with aot_inductor.emit_multi_arch_kernel",
        example="target cuda,cc=8.6: model 'model': 2 of 2 GPU code member(s) have no SASS for "
        "sm_86 and no PTX to JIT (they carry compute_90, sm_90a): kernels fail to launch on "
        "compute capability 8.6",
        overrides=((I, "with --static-only and no --target: a fact of this machine only"),),
    ),
    Code(
        "AOT434",
        "driver-too-old",
        E,
        C.ENVIRONMENT,
        "The GPU code needs a newer NVIDIA driver than the target has (PTX of a newer ISA cannot "
        "be JIT-compiled; SASS from a newer CUDA major is refused).",
        "upgrade the driver, or compile with a CUDA toolkit the driver supports",
        example="target cuda,cc=9.0,driver=470: model 'model': on compute capability 9.0 it runs "
        "SASS built by CUDA 13.0 (fatbin (c3cx42vb)), which needs an NVIDIA driver >= 580.65.06; "
        "the target has 470",
        overrides=((I, "with --static-only and no --target: a fact of this machine only"),),
    ),
    Code(
        "AOT435",
        "ptx-jit",
        I,
        C.ENVIRONMENT,
        "On a GPU of the target, kernels run from PTX that the driver JIT-compiles when the "
        "package loads (no SASS for that architecture; slower first load).",
        "add SASS for that architecture to skip the JIT",
        example="target cuda,cc=12.0: model 'model': on compute capability 12.0, 2 GPU code "
        "member(s) run from PTX that the driver JIT-compiles at load",
    ),
    Code(
        "AOT436",
        "cpu-instructions-unsupported",
        E,
        C.ENVIRONMENT,
        "The .so contains instructions of a CPU extension the target lacks (counted by decoding "
        "its machine code): the process dies with SIGILL when they run.",
        "compile on (or for) the oldest CPU of the fleet, or deploy on CPUs with the extension",
        example="target cpu,isa=avx2: model 'model': wrapper.so (cj44olkx) holds instructions of "
        "CPU extensions the target lacks (AVX512F 41, AVX512BW 29, AVX512VL 21): the process dies "
        "with SIGILL when they run (e.g. vcvtusi2sd xmm0,xmm0,rdx at 0x1c542 in "
        "_ZN12_GLOBAL__N_123constant_map_from_pairsEPK27AOTInductorConstantMapEntrym)",
        overrides=((I, "with --static-only and no --target: a fact of this machine only"),),
    ),
    Code(
        "AOT437",
        "cpu-extension-unused",
        I,
        C.ENVIRONMENT,
        "The package was compiled with a CPU extension enabled that the target lacks, but no "
        "instruction in its code uses it: it loads (torch only warns about AOTI_CPU_ISA).",
        "nothing to do; torch's 'Device information mismatch' warning is harmless here",
        example="target cpu,isa=avx2: model 'model': compiled with AVX512_VNNI enabled "
        "(-march=skylake-avx512), which the target lacks, but none of the 35897 instructions of "
        "wrapper.so (climwrco) uses them: it loads (torch only warns about the AOTI_CPU_ISA "
        "mismatch)",
    ),
    Code(
        "AOT439",
        "target-torch-unknown",
        I,
        C.VERSION,
        "The target's torch release is not in aotipre's export table, so the shim functions the "
        ".so imports were not checked against it.",
        "give the target as libtorch=PATH (its exports are read), or regenerate the table "
        "(scripts/build_torch_table.py)",
        example="target cpu,torch=2.15: model 'model': torch 2.15 (--target torch=2.15) is not in "
        "aotipre's export table (2.11, 2.12, 2.13, 2.14); the 25 shim functions wrapper.so "
        "(cj44olkx) imports were not checked against it",
    ),
    Code(
        "AOT440",
        "target-loader-json-race",
        I,
        C.VERSION,
        "The target's libtorch_cpu has the C++ loader's JSON race (torch issue #194128: a "
        "function-local static in load_json_file, still in 2.15.0): a C++ server that "
        "constructs several AOTIModelPackageLoaders at once can corrupt its heap.",
        "construct loaders one at a time (a mutex around the constructor); running them "
        "concurrently afterwards is fine",
        example="target cpu,libtorch=/opt/libtorch: libtorch 2.15.0 has the C++ loader's JSON "
        "race (torch issue #194128; libtorch_cpu.so defines _ZZN5torch8inductor12_GLOBAL__N_114"
        "load_json_file...E8json_obj): a C++ server that constructs several loaders at once "
        "can corrupt its heap",
    ),
    Code(
        "AOT441",
        "target-load-runs-isa-probe",
        I,
        C.VERSION,
        "The target torch's aoti_load_package runs the compiler-based CPU-ISA probe on every "
        "load (torch issue #191715): it builds and dlopens a test program per ISA before it "
        "touches the package. Measured: 1-3 s of a load on a 2-core VM, 33-49 s per fresh "
        "process on an H200 host (BENCHMARKS.md); aotipre's perf stage measures it on the host "
        "it runs on.",
        "keep TORCHINDUCTOR_CACHE_DIR on persistent storage (torch 2.14+ then skips the probe's "
        "compile and dlopen after the first process), set TORCHINDUCTOR_VEC_ISA_OK=1, or load "
        "with the C++ AOTIModelPackageLoader, which never probes",
        example="target cpu,libtorch=/opt/venv/lib/python3.12/site-packages/torch: torch 2.15.0's "
        "aoti_load_package runs the compiler-based CPU-ISA probe at every load (torch issue "
        "#191715; torch/export/pt2_archive/_package.py:1068 _load_aoti calls "
        "get_device_information() (pick_vec_isa))",
    ),
    Code(
        "AOT442",
        "target-loads-every-model",
        I,
        C.VERSION,
        "The package holds several models, and the target torch's load_package(path, name) "
        "constructs a runner for every one of them (torch issue #196026): each other model is "
        "extracted, its .so loaded and its constants copied to its device before the one asked "
        "for is returned. The message gives what that costs for this package.",
        "load each model from a package of its own, or construct "
        "torch._C._aoti.AOTIModelPackageLoader(path, name) directly (it loads one model)",
        example="target cpu,libtorch=/opt/torch: torch 2.15.0's load_package(path, name) "
        "constructs every model of this package (torch issue #196026): loading 'encoder' also "
        "loads 'decoder' (1 .so of 12.3 MB, 512.0 MB of constants on cuda)",
    ),
    Code(
        "AOT443",
        "target-reads-metadata-twice",
        I,
        C.VERSION,
        "The target torch opens a large package and extracts its metadata twice per load "
        "(torch issue #196025): load_metadata_from_package before the loader, which reads it "
        "again. Reported for packages of 1 GiB or 1,000 members and more, where opening the "
        "archive is not free.",
        "nothing to change in the package; load it once per process and reuse the model",
        example="target cpu,libtorch=/opt/torch: torch 2.15.0 opens this 3.2 GB package and "
        "reads its metadata twice per load (torch issue #196025)",
    ),
    Code(
        "AOT490",
        "release-deployment-changed",
        E,
        C.ENVIRONMENT,
        "aotipre diff: what a host needs to load NEW changed: device, CPU extensions, "
        "GLIBCXX/CXXABI/GLIBC, the oldest libtorch, SASS architectures or the driver for PTX, "
        "custom ops, C++ compiled at load, where the weights live (rules in docs/diff.md).",
        "check every deployment target can load NEW (aotipre check NEW --target ...), or release "
        "the change as breaking",
        ((I, "a compatible change (the rule's verdict: OLD's callers run unchanged)"),),
        example="GLIBCXX_RAISED: NEW's .so needs GLIBCXX_3.4.32",
    ),
    # 5: compile and load
    Code(
        "AOT501",
        "compile-failed",
        E,
        C.COMPILE,
        "aoti_compile_and_package raised an exception of none of the compile classes "
        "(AOT540-AOT547), or a CUDA fault while it autotuned a kernel.",
        "fix the error quoted in the evidence; the lines name the failing op or C++ line",
        example="compiling model 'model' for cpu failed: an exception aotipre does not classify "
        "(RuntimeError: Unsupported lowering config)",
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
        example="compiling model 'model' for cpu: the compiler process was killed by SIGSEGV",
    ),
    Code(
        "AOT503",
        "compile-timeout",
        E,
        C.TIMEOUT,
        "The compile did not finish within its time limit.",
        "raise the compile time limit, or compile on a faster host",
        example="compiling model 'model' for cpu did not finish within 1800 s",
    ),
    Code(
        "AOT510",
        "load-failed",
        E,
        C.LOAD,
        "aoti_load_package raised while loading the model.",
        "load it with the torch version and host it was compiled for",
        example="loading model 'model' of model.pt2 failed: RuntimeError: Error in dlopen: "
        "/tmp/tmpq8x1v2/model/data/aotinductor/model/cj44olkx.wrapper.so: invalid ELF header",
    ),
    Code(
        "AOT511",
        "load-wrong-device",
        E,
        C.DEVICE,
        "The loader refused the requested device (a device index for a cpu package, a GPU the host lacks).",
        "load cpu packages without a device index; pass --device matching the package",
        example="loading model 'model' of model.pt2 on cuda:1 was refused: Error: CUDA error: "
        "invalid device ordinal",
    ),
    Code(
        "AOT512",
        "load-cuda-unavailable",
        E,
        C.ENVIRONMENT,
        "The package needs CUDA and the torch doing the load has no usable CUDA.",
        "run on a CUDA host with a CUDA build of torch, or recompile for cpu",
        example="model 'model' of model.pt2 needs CUDA, and this torch cannot use it: "
        "RuntimeError: Found no NVIDIA driver on your system.",
    ),
    Code(
        "AOT513",
        "load-model-not-found",
        E,
        C.LOAD,
        "The loader found no compiled code for the requested model name.",
        "pass one of the models the package holds compiled code for",
        example="the loader found no compiled code for model 'model': RuntimeError: Failed to find "
        "a generated cpp file or so file for model 'model' in the zip archive.",
    ),
    Code(
        "AOT514",
        "load-crashed",
        E,
        C.CRASH,
        "The process died by a signal while loading the package (before any model code ran).",
        "check the .so was built for this torch, libstdc++ and CPU; re-create the package",
        example="the process was killed by SIGSEGV while loading model 'model' of model.pt2 "
        "(preloading the system libstdc++ did not help)",
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
        example="loading model 'model' of model.pt2 crashed with SIGSEGV in this environment and "
        "succeeded with LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6: a libstdc++ mismatch "
        "between the toolchain that built the compiled code and this process's runtime (an "
        "environment problem, not a model bug); the other stages ran with the preload",
    ),
    Code(
        "AOT516",
        "load-timeout",
        E,
        C.TIMEOUT,
        "Loading the package did not finish within the time limit.",
        "raise --timeout; a very large package or a stuck device can cause it",
        example="loading model 'model' of model.pt2 did not finish within 300 s",
    ),
    Code(
        "AOT517",
        "exported-program-unloadable",
        W,
        C.LOAD,
        "The ExportedProgram in the archive cannot be loaded by this torch, so outputs were not "
        "compared with eager.",
        "re-export with the deployment torch version to get the eager comparison",
        example="the ExportedProgram in the archive (model 'model') cannot be loaded by this "
        "torch: SerializeError: Failed deserializing node "
        "Node(target='torch.ops.nosuchlib.embed.default')",
    ),
    Code(
        "AOT520",
        "cpp-harness-unavailable",
        W,
        C.ENVIRONMENT,
        "aotipre's C++ harness could not be built against the installed torch (no working C++ "
        "compiler, or headers or libraries missing), so the C++ loader was not checked.",
        "install a C++ compiler that builds against torch's headers (see aotipre doctor)",
        example="the C++ harness could not be built: StepError: building the C++ harness with g++ "
        "failed (exit 1): harness.cpp:9:10: fatal error: "
        "torch/csrc/inductor/aoti_package/model_package_loader.h: No such file or directory",
    ),
    Code(
        "AOT521",
        "cpp-load-failed",
        E,
        C.LOAD,
        "torch::inductor::AOTIModelPackageLoader raised while loading the package in C++.",
        "the message is the C++ loader's own; a C++ deployment fails the same way",
        example="the C++ loader raised while constructing the loader: Could not find schema for "
        "mylib::twice",
    ),
    Code(
        "AOT522",
        "cpp-run-failed",
        E,
        C.RUNTIME,
        "Running the model through the C++ loader raised an exception.",
        "the message is the C++ loader's own; compare with the Python run's result",
        example="the C++ loader raised while running the model: run_func_( container_handle_, "
        "input_handles.data(), input_handles.size(), output_handles.data(), "
        "output_handles.size(), cuda_stream_handle, proxy_executor_handle_) API call failed at "
        "/pytorch/torch/csrc/inductor/aoti_runner/model_container_runner.cpp, line 149",
    ),
    Code(
        "AOT523",
        "cpp-crashed",
        E,
        C.CRASH,
        "The C++ harness died by a signal while loading or running the package.",
        "a C++ deployment crashes the same way; the phase says whether loading or running did",
        example="the C++ harness crashed with SIGSEGV while constructing the loader "
        "(AOTIModelPackageLoader construction)",
    ),
    Code(
        "AOT524",
        "cpp-timeout",
        E,
        C.TIMEOUT,
        "The C++ harness did not finish within the time limit (a hang in loading, running or "
        "concurrent use).",
        "raise --timeout if the model is just slow; otherwise the C++ loader hangs",
        example="the C++ harness did not finish within 12.5 s (of the step's 15 s limit) (running "
        "the model)",
    ),
    Code(
        "AOT525",
        "cpp-output-mismatch",
        E,
        C.ACCURACY,
        "The C++ loader's outputs differ from the Python loader's on the same inputs beyond the "
        "tolerance.",
        "the same .so should compute the same values; check the inputs' order and dtypes",
        example="the C++ loader's outputs differ from the Python loader's: 1 output(s) beyond "
        "tolerance, largest absolute difference 0.0312",
    ),
    Code(
        "AOT526",
        "concurrent-load-failed",
        E,
        C.CRASH,
        "Several AOTIModelPackageLoaders constructed at the same moment in one C++ process "
        "crashed, raised or hung (torch issue #194128: a data race in the loader's JSON reading).",
        "construct loaders one at a time (a process-wide mutex around the constructor), or use "
        "a torch with the fix",
        example="C++ concurrency, 4 loaders constructed at once on 4 threads: crashed with SIGABRT "
        "during constructing the loaders concurrently; constructed one at a time (a mutex around "
        "the constructor), the same loaders ran with identical outputs",
        overrides=(
            (
                W,
                "this run hit the race that AOT528 reports for this torch, and the same loaders "
                "constructed one at a time passed: the same risk",
            ),
        ),
    ),
    Code(
        "AOT527",
        "concurrent-run-failed",
        E,
        C.CRASH,
        "Concurrent runs on one loader with num_runners > 1 crashed, raised, hung or returned "
        "outputs that differ from a single run (for a model that mutates buffers: outputs that "
        "the same number of calls made one after another on a fresh loader do not return, in "
        "any order).",
        "serialize runs, or run with num_runners=1 per loader",
        example="C++ concurrency, one loader with num_runners=2, 4 threads x 3 runs at once: "
        "returned outputs that differ between threads or runs (largest absolute difference 0.25)",
        overrides=(
            (
                W,
                "the model mutates buffers and the concurrent calls raced on them, which the "
                "runners of one loader share without a lock; whether calls overlap is timing",
            ),
        ),
    ),
    Code(
        "AOT528",
        "loader-race-known",
        W,
        C.VERSION,
        "The installed torch's C++ loader parses package JSON into one shared static object "
        "(torch issue #194128): constructing loaders concurrently in C++ can corrupt the heap.",
        "construct AOTIModelPackageLoaders one at a time in C++ servers (Python callers are "
        "shielded by the GIL)",
        example="this torch's libtorch_cpu holds the static JSON object of load_json_file (torch "
        "issue #194128, open): constructing several loaders at once in a C++ server can crash or "
        "read another package's metadata, even when this run did not",
    ),
    Code(
        "AOT529",
        "device-index-mismatch",
        E,
        C.DEVICE,
        "Loaded with a device index other than 0, the package failed, or returned outputs on "
        "another device.",
        "AOTI packages should run on any GPU of the host; load with device_index and check "
        "where outputs live",
        example="loaded with device_index=1, the outputs live on cuda:0",
    ),
    Code(
        "AOT531",
        "load-fallback",
        W,
        C.LOAD,
        "torch's load_pt2 cannot load the package and aoti_load_package falls back (\"Loading "
        'outdated pt2 file") to the C++ AOTIModelPackageLoader, which does: the code that runs '
        "is the package's, but callers of load_pt2 (torch.export.pt2_archive, num_runners, "
        "load_weights_from_disk) fail, and the fallback's reason is hidden in a log line.",
        "re-create the package with aoti_compile_and_package on the deployment's torch (the "
        "message names what load_pt2 refused)",
        example="model 'model': model/data/aotinductor/model/cj44olkxn6sy.wrapper_metadata.json is "
        "empty: torch's load_pt2 fails on it ([json.exception.parse_error.101] on an empty one), "
        'and aoti_load_package logs "Loading outdated pt2 file" and falls back to '
        "AOTIModelPackageLoader, which loads the package; a deployment that calls load_pt2 "
        "(torch.export.pt2_archive, num_runners, load_weights_from_disk) cannot load it",
    ),
    Code(
        "AOT532",
        "package-code-not-loaded",
        E,
        C.LOAD,
        "The loader returned a model, but none of the package's shared objects is mapped into "
        "the loading process: whatever the calls run, it is not the package's compiled code "
        "(an empty or degenerate artifact, a loader that substitutes another path).",
        "load the package with torch._inductor.aoti_load_package from the deployment's torch "
        "and check that the .so inside the package is the one compiled for this model",
        example="loading model 'model' of model.pt2 returned a model, but none of the package's "
        "shared objects is mapped into the process: the calls do not run the package's compiled "
        "code",
    ),
    # 54x: the class of a failed compile (aotipre/runner/compile_classes.py); AOT501 is a
    # failure of none of these classes
    Code(
        "AOT540",
        "compile-lowering-failed",
        E,
        C.COMPILE,
        "Inductor raised while lowering one op of the model (LoweringException): an Inductor "
        "bug on this op with these input shapes and dtypes, not an error in the model.",
        "use the workaround the finding quotes when its rebuild proved it (under --escalate: the "
        "op as an ATen fallback kernel, else every op, compiled again and compared with eager); "
        "report it to PyTorch with the op, its input shapes and dtypes (the message names them); "
        "to ship now, express that model line with other ops or use a torch whose lowering works",
        example="compiling model 'model' for cpu failed: Inductor's lowering of "
        "aten.cummin.default failed (AssertionError: ...) at node cummin (aten.cummin.default; "
        "inputs x: [0] float32) at model.py:12 in forward: return torch.cummin(x, -1)[0]",
    ),
    Code(
        "AOT541",
        "compile-missing-lowering",
        E,
        C.COMPILE,
        "Inductor has no lowering for an op of the model and the compile may not fall back to "
        "the ATen kernel (implicit_fallbacks=False): MissingOperatorWithoutDecomp or "
        "MissingOperatorWithDecomp.",
        "compile with implicit_fallbacks=True (torch's default), or register a lowering or a "
        "decomposition for the op",
        example="compiling model 'model' for cpu failed: Inductor has no lowering for "
        "aten.cummax.default and the compile may not fall back to ATen",
    ),
    Code(
        "AOT542",
        "compile-generated-cpp-error",
        E,
        C.COMPILE,
        "The C++ compiler rejected the code Inductor generated for the model (CppCompileError): "
        "the finding quotes the compiler's first error, the generated line it names, and the "
        "model's nodes that kernel was generated from.",
        "check the compiler is one this torch supports and that no inductor config injects a bug "
        "(cpp.inject_*_TESTING_ONLY); else report it to PyTorch with the generated line and the "
        "model line",
        example="compiling model 'model' for cpu failed: the generated C++ does not compile: "
        "c2x.kernel.cpp:69:33: error: 'compile' was not declared in this scope (generated line "
        "69: `auto tmp1 = compile error!;` in cpp_fused_mul_relu_1) fused from node relu "
        "(aten.relu.default) at model.py:9 in forward: return torch.relu(self.lin(x)) * 2",
    ),
    Code(
        "AOT543",
        "compile-wrapper-codegen-failed",
        E,
        C.COMPILE,
        "AOTInductor could not generate the C++ wrapper that calls the kernels "
        "(CppWrapperCodegenError).",
        "compile without the disable_cpp_codegen inductor config when it is set (AOTInductor's "
        "wrapper is C++); else an AOTInductor limitation or bug: report it to PyTorch with the "
        "model line",
        example="compiling model 'model' for cuda:0 failed: AOTInductor's C++ wrapper generation "
        "failed (C++ wrapper codegen error: Unsupported output type)",
    ),
    Code(
        "AOT544",
        "compile-triton-failed",
        E,
        C.COMPILE,
        "Triton could not compile or autotune a kernel of the model: no valid config, every "
        "autotuning choice failed, ptxas failed, or the kernel needs more shared memory than the "
        "GPU has.",
        "compile on the GPU the package is for with the Triton this torch pins; else report it "
        "to PyTorch with the kernel",
        example="compiling model 'model' for cuda:0 failed: Triton could not compile or autotune "
        "a kernel (out of resource: shared memory, Required: 262144, Hardware limit: 232448)",
    ),
    Code(
        "AOT545",
        "compile-data-dependent-guard",
        E,
        C.COMPILE,
        "Inductor needed to decide a condition on a data-dependent size (an unbacked symbol such "
        "as u0 from .item() or .nonzero()) while compiling (GuardOnDataDependentSymNode).",
        "tell the compiler what the model guarantees: torch._check(...) on the symbol right after "
        "the model line that produces it, then export again; where Inductor needs the size as a "
        "number ('Could not extract specialized integer'), make it an input's dynamic dim instead",
        example="compiling model 'model' for cpu failed: Inductor needed to decide `Eq(Max(1, "
        "u0), 1)` on a data-dependent size (u0), in _inductor/output_code.py:141 in "
        "complex_memory_overlap",
    ),
    Code(
        "AOT546",
        "compile-toolchain-missing",
        E,
        C.ENVIRONMENT,
        "The compile's toolchain is missing or unusable on this host: no working C++ compiler "
        "(InvalidCxxCompiler), no working Triton (TritonMissing), or a GPU too old for Triton.",
        "install the C++ compiler this torch needs and point $CXX or the cpp.cxx config at it; "
        "on CUDA, the Triton this torch pins and a GPU of compute capability 7.0 or newer",
        example="compiling model 'model' for cpu failed: the compile's toolchain is missing or "
        "unusable (No working C++ compiler found in torch._inductor.config.cpp.cxx: "
        "('/opt/gcc/bin/g++',))",
    ),
    Code(
        "AOT547",
        "compile-unsupported-dtype-or-op",
        E,
        C.COMPILE,
        "The compile does not support a dtype or an op of the model on the device: a table of "
        "Inductor or AOTInductor has no entry for the dtype (a KeyError keyed by it: float8 "
        "reductions on CPU, quantized dtypes such as quint8), an ATen kernel has no case for it "
        "(`not implemented for 'Float8_e4m3fn'`), or the op has no fake (Meta) kernel to trace "
        "(sparse layouts). The finding names the op, its dtype and the model line.",
        "compute that op in a dtype the device supports (cast its input before it and the "
        "result back after), compile for a device that supports the dtype, or keep the op out "
        "of the compiled model; for an op of your own, register a fake kernel",
        example="compiling model 'model' for cpu failed: aten.sum.default on float8_e4m3fn is "
        "not supported on this device by the compile: no table of the compiler has an entry "
        "for it (KeyError: torch.float8_e4m3fn, raised at torch/_inductor/codegen/cpp.py:199 in "
        "reduction_acc_type) at node sum_1 (aten.sum.default; inputs convert_element_type: "
        "[4, 8] float8_e4m3fn) at model.py:9 in forward: return x.to(torch.float8_e4m3fn).sum()",
    ),
    # 55x: before and around the compile: ops with no C shim, a module that does not export
    Code(
        "AOT550",
        "op-without-c-shim",
        W,
        C.COMPILE,
        "The model calls ATen ops that Inductor runs as fallback kernels and that this torch's C "
        "shim does not cover, so the compiled code calls them through the proxy executor: listed "
        "before compiling (the ops Inductor falls back on, against torchgen's "
        "inductor_fallback_ops) and taken from the compile's own warning ('<op> is missing a "
        "c-shim implementation, using proxy executor as fallback').",
        "the package runs where a proxy executor dispatches those ops through libtorch "
        "(aoti_load_package, AOTIModelPackageLoader); a C++-only runtime without one cannot run "
        "them, and diagnostic rebuilds that change what falls back may fail on them; to avoid "
        "it, express that model line with ops Inductor lowers",
        example="model 'model' calls 1 ATen op(s) with no C shim through the proxy executor: "
        "aten._linalg_det.default (model.py:9 in forward); listed before compiling and "
        "confirmed by the compile's warning",
    ),
    Code(
        "AOT555",
        "export-data-dependent",
        E,
        C.COMPILE,
        "torch.export could not export the nn.Module passed to aotipre.check: a model line "
        "decides on a data-dependent value (a tensor's value, or a size from .item() or "
        ".nonzero()) that export cannot know (GuardOnDataDependentSymNode, 'Could not guard on "
        "data-dependent expression').",
        "tell export what the model guarantees with torch._check(...) on that value right after "
        "the line that produces it, or make the branch data-independent (torch.where, "
        "torch.cond); under --escalate the evidence lists every data-dependent expression "
        "torch.export.draft_export found on the same inputs, each with its model line",
        example="exporting <Gate> failed: data-dependent expression `u0 > 2` (symbol u0) at "
        "model.py:10 in forward: `return x[:n] if n > 2 else x`",
    ),
    Code(
        "AOT556",
        "export-graph-break",
        E,
        C.COMPILE,
        "Strict torch.export (TorchDynamo) could not trace a construct of the nn.Module passed "
        "to aotipre.check (torch._dynamo.exc.Unsupported: a graph break, which export does not "
        "allow).",
        "export non-strict (strict=False, torch.export's default: it runs the Python as is), or "
        "rewrite that model line with constructs Dynamo traces",
        example="exporting <Noisy> (strict) failed: a graph break (Attempted to call function "
        "marked as skipped) at model.py:7 in forward: `return x * random.random()`",
    ),
    Code(
        "AOT557",
        "export-failed",
        E,
        C.COMPILE,
        "torch.export raised while exporting the nn.Module passed to aotipre.check, and the "
        "failure is none of the export classes aotipre knows (data-dependent, graph break): the "
        "finding quotes torch's exception and the model line it came from.",
        "fix the model line torch's message points at (an unsupported construct under export, "
        "e.g. .numpy() or a Python side effect on tensors), then export again",
        example="exporting <ToNumpy> failed: RuntimeError: .numpy() is not supported for tensor "
        "subclasses. at model.py:5 in forward: `return torch.from_numpy(x.numpy() * 2)`",
    ),
    # 6: run (runtime, crash, timeout)
    Code(
        "AOT601",
        "runtime-check-failed",
        E,
        C.RUNTIME,
        "The compiled model rejected the inputs with a size or stride assertion at run time.",
        "make the inputs match the shapes and strides the model was compiled for",
        example="a size/stride assertion in the compiled model failed at run time: dim 0 has size "
        "7, expected 6 (inputs that share a dynamic dim disagree, or a derived dim is off)",
    ),
    Code(
        "AOT602",
        "run-exception",
        E,
        C.RUNTIME,
        "Running the compiled model raised an exception (not an input check).",
        "the evidence quotes the failing kernel's message; check the input values "
        "(e.g. indices within the embedding size)",
        example="running the model raised in kernel cpp_fused_embedding_sum_0: index out of "
        "bounds: 0 <= tmp2 < 500L (the ExportedProgram run eagerly fails on these inputs too "
        "(IndexError: index out of range in self): the inputs are likely invalid for the model)",
    ),
    Code(
        "AOT603",
        "run-abort",
        E,
        C.CRASH,
        "The process aborted (SIGABRT) while running the compiled model.",
        "an uncaught C++ exception or assertion in a kernel; the evidence names it",
        example="running the model aborted (SIGABRT) in kernel "
        "cpp_fused_add_embedding_native_layer_norm_slice_0: index out of bounds: 0 <= tmp2 < "
        "1000L (a trivial canary model compiled on this host loads and runs on cpu: the crash is "
        "specific to this package)",
    ),
    Code(
        "AOT604",
        "run-segfault",
        E,
        C.CRASH,
        "The process crashed with a memory fault (SIGSEGV/SIGBUS) while running the model.",
        "look for out-of-range indices or inputs outside the compiled shapes; re-run under "
        "AOTI_RUNTIME_CHECK_INPUTS=1",
        example="running the model crashed with SIGSEGV in kernel cpp_fused_embedding_sum_0",
    ),
    Code(
        "AOT605",
        "run-killed",
        E,
        C.CRASH,
        "The process was killed by a signal while running the model (SIGKILL: often the "
        "out-of-memory killer; SIGILL: an instruction this CPU lacks).",
        "check memory limits, and that the package was compiled for this CPU",
        example="running the model was killed by SIGKILL",
    ),
    Code(
        "AOT606",
        "run-timeout",
        E,
        C.TIMEOUT,
        "Running the model did not finish within --timeout.",
        "raise --timeout, or look for a hang in the kernel the evidence names",
        example="running the model did not finish within 300 s",
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
        example="running the model crashed (SIGSEGV) because the package keeps its weights on disk "
        "(data/aotinductor/model/weights_config.json) and aoti_load_package does not load them: "
        "the compiled code read constants that were never set; "
        "torch.export.pt2_archive._package.load_pt2(path, load_weights_from_disk=True) loads it "
        "and runs these inputs (outputs float32[3, 4]): deploy with that loader, or recompile "
        "with aot_inductor.package_constants_in_so=True",
    ),
    Code(
        "AOT608",
        "device-fault",
        E,
        C.RUNTIME,
        "A CUDA kernel faulted (device-side assert, illegal memory access).",
        "re-run with CUDA_LAUNCH_BLOCKING=1 to pin the faulting kernel; check index inputs",
        example="running the model hit a CUDA fault: CUDA error: an illegal memory access was "
        "encountered (the ExportedProgram run eagerly fails on these inputs too "
        "(AcceleratorError: CUDA error: device-side assert triggered): the inputs are likely "
        "invalid for the model)",
    ),
    Code(
        "AOT610",
        "probe-bound-failed",
        E,
        C.DYNAMIC_RANGE,
        "The model failed at the minimum or maximum of a dynamic dimension it declares valid, or, "
        "for a dimension with no maximum (exported without one, or compiled with "
        "aot_inductor.check_upperbound=False), at twice the sample's size.",
        "fix the model for that size, or re-export with a range it supports",
        example="s53=128 [input_ids dim 1, attention_mask dim 1], the maximum of the declared "
        "range [2, 128], failed: index out of bounds: 0 <= tmp3 < 100L in kernel "
        "cpp_fused_add_embedding_0",
        overrides=(
            (W, "the compiled code's runtime check refuses a size the declared range allows"),
        ),
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
        example="s43=65 [args[0] dim 0, args[1] dim 0], one above the maximum 64, ran without "
        "being rejected",
    ),
    Code(
        "AOT612",
        "probe-over-max-unclean",
        E,
        C.DYNAMIC_RANGE,
        "An input one above a dynamic dimension's maximum crashed or failed inside the model "
        "instead of being rejected by the runtime input check.",
        "run with AOTI_RUNTIME_CHECK_INPUTS=1, and validate sizes before calling",
        example="s43=65 [args[0] dim 0, args[1] dim 0], one above the maximum 64, crashed "
        "(SIGSEGV) instead of being rejected by the input check",
        overrides=((W, "an exception inside the model instead of the input check, not a crash"),),
    ),
    Code(
        "AOT613",
        "unchecked-deployment-runs-out-of-range",
        W,
        C.DYNAMIC_RANGE,
        "An input the runtime input check refuses (a size one above a dynamic dimension's "
        "maximum or below the compiled minimum, or the sample's values in a non-contiguous "
        "layout) is refused only because aotipre sets AOTI_RUNTIME_CHECK_INPUTS=1: a default "
        "deployment, without it, ran it silently (outputs computed outside the compiled range, "
        "or from memory read with the wrong strides) or crashed.",
        "set AOTI_RUNTIME_CHECK_INPUTS=1 in the serving process (then say so: "
        "--deployment-checks-inputs, config deployment-checks-inputs = true), or validate "
        "input sizes against the dynamic range and pass contiguous tensors",
        example="the runtime input check refused 3 probe input(s) only because aotipre runs with "
        "AOTI_RUNTIME_CHECK_INPUTS=1, which aotipre sets and a default deployment does not; "
        "without it the compiled model took them: s43=65 [args[0] dim 0, args[1] dim 0] (max 64 + "
        "1): ran silently; s53=129 [args[0] dim 1, args[1] dim 1] (max 128 + 1): ran silently; "
        "args[0] with strides (1, 3) (the sample's values, not contiguous): ran silently and "
        "returned outputs that differ from the contiguous input's (output 0: 12 of 12 values, max "
        "abs diff 3.46). Outputs for sizes outside the compiled range are not checked by "
        "anything. The compiled code reads every input as laid out with the strides it was "
        "compiled for; pass contiguous tensors (.contiguous())",
    ),
    Code(
        "AOT614",
        "probe-layout-not-refused",
        E,
        C.DYNAMIC_RANGE,
        "An input with the sample's shape and values but a non-contiguous layout was not "
        "refused by the runtime input check: the compiled model returned other outputs than "
        "for the contiguous input, failed or crashed.",
        "pass contiguous tensors (.contiguous()) and report the package's compile to PyTorch: "
        "the runtime check should refuse strides the code was not compiled for",
        example="args[0] with strides (1, 3) (the sample's values, not contiguous) ran under the "
        "runtime check and returned outputs that differ from the contiguous input's (output 0: 12 "
        "of 12 values, max abs diff 3.46)",
    ),
    Code(
        "AOT615",
        "data-dependent-bound",
        E,
        C.DYNAMIC_RANGE,
        "The compiled model refused the inputs at one of the model's own data-dependent bounds "
        "(a torch._check on a value read from an input, e.g. `n = idx.item()`): `Expected u0 <= "
        "16 but received 20`. The input's value is outside what the model allows; no kernel "
        "crashed.",
        "pass inputs whose values satisfy the bound the message quotes (validate them in the "
        "serving process), or re-export with a wider torch._check if the model supports it",
        example="running the model stopped at the model's own data-dependent bound: input "
        "'args[1]' holds 20, and the model requires u0 <= 16 (a torch._check in the model, "
        "enforced by the compiled code at every call)",
    ),
    # 64-65: performance (the perf stage): cold start, memory, leaks, budgets, regressions
    Code(
        "AOT616",
        "offset-input-failed",
        E,
        C.STRIDE,
        "An input passed as a view one element into a larger buffer (`buf[1:]`: contiguous, "
        "the sample's values, not 16-byte aligned) crashed, failed, or returned outputs that "
        "differ from the aligned input's; or, statically, a sample input starts inside its "
        "storage where the compiled code refuses misaligned inputs at every call (torch 2.15's "
        "assert_alignment, compiled with alignment_asserts_inputs). Servers hand models such "
        "slices of a batch.",
        "pass inputs that own their storage (x.clone()) until the model handles offset views; "
        "report the wrong outputs upstream",
        example="args[0] as a view one element into its storage (`buf[1:]`, not 16-byte "
        "aligned) ran and returned outputs that differ from the aligned input's (output 0: 8 "
        "of 8 values, max abs diff 17.3)",
        overrides=(
            (
                W,
                "the compiled code refuses it at every call (assert_alignment, compiled with "
                "torch 2.15's alignment_asserts_inputs): a contract, not wrong outputs",
            ),
        ),
    ),
    Code(
        "AOT640",
        "isa-probe-cost",
        I,
        C.PERFORMANCE,
        "Loading spent much of its time in torch's CPU-ISA probe (get_device_information), which "
        "builds and dlopens check programs at every cold start.",
        "TORCHINDUCTOR_VEC_ISA_OK=1 skips the base checks; keep TORCHINDUCTOR_CACHE_DIR in the "
        "image; the C++ AOTIModelPackageLoader does not probe",
        example="loading spent 2.17 s of 2.20 s in torch's CPU-ISA probe (get_device_information: "
        "6 check programs, each dlopened in a child process); for an already compiled package its "
        "only effect is a device-information warning",
    ),
    Code(
        "AOT641",
        "extraction-cost",
        I,
        C.PERFORMANCE,
        "Every load extracts the model's files from the .pt2 into a temporary folder first, and "
        "that took a noticeable share of the load.",
        "extract once when building the image and load the folder (torch >= 2.13 C++ loader, "
        "aoti_load_package from 2.15)",
        example="every load extracts 1840 MB (5 files) of the model into a temporary folder first: "
        "1.92 s of 4.31 s",
    ),
    Code(
        "AOT642",
        "host-memory-leak",
        W,
        C.PERFORMANCE,
        "Host memory (RSS) grew call after call with the outputs dropped.",
        "look for state the model or a custom op keeps between calls; the JSON report has the "
        "series",
        example="host memory grew by 4.0 MB per call over 20 calls (76 MB in all) with the outputs "
        "dropped",
    ),
    Code(
        "AOT643",
        "gpu-memory-leak",
        W,
        C.PERFORMANCE,
        "GPU memory (caching allocator) grew call after call with the outputs dropped.",
        "look for state the model or a custom op keeps between calls; the JSON report has the "
        "series",
        example="GPU memory (caching allocator) grew by 2.00 MB per call over 20 calls (38.0 MB in "
        "all) with the outputs dropped",
    ),
    Code(
        "AOT644",
        "compile-at-load-cost",
        I,
        C.PERFORMANCE,
        "The package holds C++ sources (package_cpp_only), so every cold start runs the "
        "compiler inside aoti_load_package; the load time measured includes it.",
        "compile without aot_inductor.package_cpp_only to ship the .so, or keep a compiler and "
        "the torch headers in the serving image and budget the cold start",
        example="every cold start compiles the package's C++ sources (package_cpp_only): the load "
        "took 12.73 s here, g++ included, and needs a C++ toolchain and the torch headers on the "
        "deployment host",
    ),
    Code(
        "AOT645",
        "load-over-budget",
        E,
        C.PERFORMANCE,
        "Loading the package took longer than max-load-s.",
        "the stage detail splits the load (CPU-ISA probe, extraction, dlopen and constants)",
        example="loading took 2.36 s, the budget (max-load-s) is 0.5 s (CPU-ISA probe 2.18 s, C++ "
        "loader 0.01 s, loader imports 0.15 s)",
    ),
    Code(
        "AOT646",
        "latency-over-budget",
        E,
        C.PERFORMANCE,
        "The median call took longer than max-latency-ms.",
        "compare with the previous package (--against) to see whether it is new",
        example="the median call took 15.810 ms over 20 runs (p99 28.005 ms), the budget "
        "(max-latency-ms) is 10 ms",
    ),
    Code(
        "AOT647",
        "host-memory-over-budget",
        E,
        C.PERFORMANCE,
        "The peak host memory (RSS) after the load and the first call exceeded max-rss-mb.",
        "weights in the .so are mapped into memory; large constants count in full",
        example="the process's peak host memory (RSS) was 307 MB after the load and the first "
        "call, the budget (max-rss-mb) is 100 MB",
    ),
    Code(
        "AOT648",
        "gpu-memory-over-budget",
        E,
        C.PERFORMANCE,
        "The GPU memory the model took after the load and the first call exceeded max-gpu-mb.",
        "the driver's view counts the constants (cudaMalloc) and the caching allocator's pool",
        example="the model took 3120 MB of GPU memory (driver view, after the load and the first "
        "call), the budget (max-gpu-mb) is 2048 MB",
    ),
    Code(
        "AOT650",
        "load-regression",
        E,
        C.PERFORMANCE,
        "Loading (torch's CPU-ISA probe aside: it is the host's) is slower than the baseline "
        "package's (--against), beyond the tolerance.",
        "the JSON report has both breakdowns (extraction, dlopen and constants): a bigger .so or more "
        "constants load slower; if the change is intended, raise --perf-tolerance or make the new "
        "package the baseline",
        example="loading (without torch's CPU-ISA probe, the host's cost) is 1.42 s, the baseline "
        "package's 0.61 s (+133%, tolerance 20%)",
    ),
    Code(
        "AOT651",
        "latency-regression",
        E,
        C.PERFORMANCE,
        "The median call is slower than the baseline package's (--against) beyond the "
        "tolerance, over calls of the two interleaved in one worker whose 95% intervals do not "
        "overlap.",
        "the calls of both packages were interleaved in one worker with the same inputs: compare how "
        "the two were compiled (torch version, inductor configs such as max_autotune, dynamic dims) "
        "and profile the new one; if the change is intended, raise --perf-tolerance",
        example="the median call is 4.812 ms, the baseline package's 2.106 ms (+128%, tolerance "
        "20%); medians of 40 against 40 sample(s), 95% intervals 4.701-4.950 and 2.088-2.131 ms, "
        "which do not overlap",
    ),
    Code(
        "AOT652",
        "host-memory-regression",
        E,
        C.PERFORMANCE,
        "The peak host memory is higher than the baseline package's (--against), beyond the "
        "tolerance.",
        "both were loaded the same way in fresh workers with the same inputs: compare their constants "
        "(aotipre inspect) and how they were compiled; if intended, raise --perf-tolerance",
        example="the peak host memory (RSS) is 912 MB, the baseline package's 455 MB (+100%, "
        "tolerance 20%)",
    ),
    Code(
        "AOT653",
        "gpu-memory-regression",
        E,
        C.PERFORMANCE,
        "The model takes more GPU memory than the baseline package (--against), beyond the "
        "tolerance.",
        "both were loaded the same way in fresh workers with the same inputs: compare their constants "
        "(aotipre inspect) and how they were compiled; if intended, raise --perf-tolerance",
        example="the GPU memory the model takes is 2210 MB, the baseline package's 1104 MB (+100%, "
        "tolerance 20%)",
    ),
    Code(
        "AOT654",
        "baseline-not-measured",
        E,
        C.PERFORMANCE,
        "The baseline package (--against) could not be read, loaded or run, or was not loaded "
        "because it holds pickles torch unpickles without restriction (and --allow-pickle was "
        "not given), so nothing was compared: a comparison that did not happen fails the gate.",
        "the message says why; check the baseline path, that it is a .pt2 package (a file or an "
        "extracted folder) that takes the same inputs, and that it holds no pickles (or pass "
        "--allow-pickle if you trust it)",
        example="the baseline package deployed.pt2 has no model 'model' (it holds: encoder, "
        "decoder)",
    ),
    Code(
        "AOT655",
        "comparison-inconclusive",
        W,
        C.PERFORMANCE,
        "A measure of the package is worse than the baseline package's (--against) beyond the "
        "tolerance by its median, but the samples cannot show it: fewer than 3 of each side, or "
        "their 95% intervals overlap (a busy or noisy host). Not a regression; re-measuring "
        "stopped at its budget.",
        "run the comparison on a quiet machine (no other jobs on its cores, or pinned ones: "
        "taskset) or raise --perf-runs for more interleaved calls; a real regression shows as "
        "AOT650-AOT653 once the intervals separate",
        example="inconclusive (noisy host): the median call is 0.095 ms, the baseline package's "
        "0.077 ms (+23%, tolerance 20%), but over 40 against 40 sample(s), 95% intervals "
        "0.071-0.410 and 0.069-0.388 ms the intervals overlap, so this run cannot tell a "
        "regression from the host's noise",
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
        example="output 0 (float32[3, 4]): 12 of 12 elements differ beyond rtol=1.3e-06, "
        "atol=1e-05; max abs error 0.0312; max rel error 0.0087; worst at (2, 1): 3.58 vs eager "
        "3.61 (compared with the ExportedProgram in the archive run eagerly)",
    ),
    Code(
        "AOT702",
        "output-nan",
        E,
        C.NAN,
        "The compiled model's outputs on the sample inputs contain NaN (whether or not the "
        "reference produces it too: then the model, not the compile, produces it), or Inf where "
        "the reference is finite. The message names the rows that hold them.",
        "if the reference produces them too, fix the model or its inputs (the rows named); "
        "else compile with TORCHINDUCTOR_NAN_ASSERTS=1 to find the first kernel producing them",
        example="output 0 (float32[4, 10]) of the compiled model holds 10 NaN in 1 row(s) along "
        "dim 0 (0): the rows of the batch, produced by input row(s) 0 of 'mask' where the "
        "ExportedProgram run eagerly is finite: the compiled code produces them",
    ),
    Code(
        "AOT703",
        "output-structure-mismatch",
        E,
        C.ACCURACY,
        "The compiled model returns a different number, shape or dtype of outputs than the "
        "ExportedProgram, or than the expected outputs of --expected (or a bundle's).",
        "the AOTI part was compiled from another program; recompile it from this one (against "
        "expected outputs: save the outputs of the inputs you check)",
        example="output 0: the compiled model returns bfloat16[2, 16], the ExportedProgram "
        "float32[2, 16] (compared with the ExportedProgram in the archive run eagerly)",
    ),
    Code(
        "AOT704",
        "eager-failed",
        W,
        C.ACCURACY,
        "The ExportedProgram itself failed on the inputs, so outputs were not compared.",
        "the inputs may be invalid for the model; the evidence quotes the eager error",
        example="running the ExportedProgram in the archive eagerly on the same inputs failed: "
        "IndexError: index out of range in self",
    ),
    Code(
        "AOT705",
        "output-inf-as-reference",
        I,
        C.NAN,
        "The compiled model's outputs hold Inf that the reference produces too, in the same rows "
        "(masked logits, log-probabilities of impossible events): reported, not failed.",
        "nothing if the Inf is intended; else fix the model or its inputs",
        example="output 0 (float32[4, 10]) of the compiled model holds 6 Inf in 2 row(s) along dim "
        "0 (1, 3), as the ExportedProgram run eagerly does (the same count in the same rows): "
        "reported, not failed",
        overrides=((W, "no reference to tell whether the Inf is intended"),),
    ),
    Code(
        "AOT706",
        "state-not-carried",
        E,
        C.ACCURACY,
        "The model mutates buffers in forward (a counter, running statistics, a cache), and "
        "several calls of one loaded copy with the same inputs return another sequence than the "
        "ExportedProgram's calls, or a buffer holds another value after a call: the compiled code "
        "dropped or folded a state update (torch #185077), so every call after the first "
        "computes with stale state.",
        "recompile with a torch that carries the update (check the buffer named), keep the "
        "state outside the model (pass it as an input and return the new value), or reset it "
        "per call if the deployment must not carry it",
        example="the compiled model does not carry its state across calls as the ExportedProgram "
        "does: 3 calls of one copy with the same inputs first differ at call 2 (it mutates calls, "
        "acc): buffer 'calls' after call 2: compiled 1, eager 2; output 0: 4 of 4 elements differ "
        "beyond rtol=0.0001, atol=1e-05; max abs error 1; max rel error 0.25; worst at (0,): 3 vs "
        "eager 4",
    ),
    Code(
        "AOT707",
        "state-not-compared",
        I,
        C.ACCURACY,
        "The model mutates buffers in forward; its calls in one loaded copy were run and their "
        "outputs and buffers reported, but there is no ExportedProgram to compare the sequence "
        "with.",
        "pass --exported-program FILE (the program the package was compiled from) to compare "
        "the calls with eager's",
        example="model 'model' mutates calls, acc; 3 calls of one copy with the same inputs: the "
        "first output changes from call to call; buffers after each call: calls 1, 2, 3; acc "
        "[0.5, 0.5, 0.5, 0.5], [1, 1, 1, 1], [1.5, 1.5, 1.5, 1.5]; no ExportedProgram to tell "
        "whether eager returns the same sequence (the archive holds AOTI code only (no "
        "ExportedProgram))",
        overrides=(
            (
                W,
                "a buffer the compiled code writes holds the same value after every call with "
                "the same inputs, what a dropped or folded update looks like: torch #185077",
            ),
        ),
    ),
    Code(
        "AOT708",
        "divergent-kernel",
        I,
        C.ACCURACY,
        "Accuracy triage (after AOT701/AOT702, or AOT068 with the swapped weights in the "
        "program, with an ExportedProgram) compiled the program again with provenance tracking "
        "(on CPU its Python-wrapper compile when that is the deployed package bit for bit, else "
        "an AOTI rebuild with the intermediate value printer), captured each kernel's outputs "
        "and named the first kernel, in execution order, whose "
        "outputs differ from their FX nodes run eagerly while its inputs agree (for NaN/Inf: "
        "the first kernel producing NaN/Inf the eager node does not), with the FX nodes it "
        "fuses, the model's source line and the error per kernel (the JSON report's "
        "`accuracy`).",
        "read the kernel's FX nodes and source line; AOT709 or AOT710 says whether a rebuild "
        "proved a cause",
        example="accuracy triage (AOT701): divergence starts in kernel "
        "cpp_fused__softmax_add_mul_sub_0 (FX nodes add, sub, mul, softmax; model code "
        "model.py:9 z = (y + 100.0) - 100.0): max abs error 0.194 there, 0.194 at the outputs; "
        "its inputs agree with eager; error per kernel: aoti_torch_cpu_addmm_out 0, "
        "cpp_fused__softmax_add_mul_sub_0 0.194",
    ),
    Code(
        "AOT709",
        "accuracy-cause-proven",
        I,
        C.ACCURACY,
        "A rebuild with one inductor config matches eager within the tolerance: that config's "
        "class (precision-cast elision, Inductor's RNG, Inductor's lowering of reductions or "
        "decompositions) is the cause of the difference, proven by the rebuild: of the "
        "kernel's verified repro (its FX nodes compiled alone), then by one full rebuild of "
        "the program (both results given; the whole program when no repro was verified). The "
        "message gives the config's latency cost against the deployed package (median of N "
        "alternating calls), the repro and the RMSE of both sides against an fp64 run.",
        "compile with the config named if the deployment needs eager's numbers; else accept "
        "the difference (when the compiled side is closer to fp64 it is the more accurate one) "
        "and loosen --rtol/--atol",
        example="the difference in cpp_fused__softmax_add_mul_sub_0 is precision-cast elision: "
        "the fused bf16/fp16 chain keeps fp32 intermediates that eager rounds (expected Inductor "
        "behaviour): rebuilding its repro (3 operator nodes) with emulate_precision_casts=True "
        "matches eager (max abs error 0); one full rebuild of the program with it matches eager "
        "too (max abs error 0); -0.5% latency (median of 20, 0.0209 vs 0.0208 ms) with it "
        "against the deployed package; repro verified (subgraph route: 3 of 5 operator nodes, "
        "max abs error 0.2461 compiled alone; pass --artifacts DIR to keep it); RMSE vs fp64: "
        "compiled 0.000109, eager 0.0359 (compiled closer)",
    ),
    Code(
        "AOT710",
        "accuracy-cause-unproven",
        W,
        C.ACCURACY,
        "No single-config rebuild that could explain the divergent kernel matches eager (or "
        "none applies to its ops): no cause is proven, and the kernel is a compiler bug "
        "candidate. Each rebuild tried is listed with its outcome; one that failed is "
        "inconclusive, and a config this torch lacks is not testable, never ruled out. The "
        "kernel's verified repro (its FX nodes compiled alone still differ; kept with "
        "--artifacts) comes with it, or why none was verified.",
        "report the kernel and its FX nodes to PyTorch with the ExportedProgram and inputs; "
        "meanwhile keep the model's ops out of the compiled code or pin another torch",
        example="no rebuild explains the difference in cpp_fused_add_relu_0: no knob applies "
        "(its nodes hold none of: bf16/fp16 values, an RNG op, a reduction); no cause is "
        "proven: a compiler bug candidate; repro verified (subgraph route: 2 of 3 operator "
        "nodes, max abs error 2 compiled alone; kept in art/model/accuracy-repro); RMSE vs "
        "fp64: compiled 1.68, eager 0 (eager closer)",
    ),
    Code(
        "AOT711",
        "accuracy-needs-exported-program",
        I,
        C.ACCURACY,
        "The compiled outputs differ (AOT701/AOT702) but the package holds AOTI code only: "
        "accuracy triage rebuilds the ExportedProgram to capture each kernel's outputs and "
        "cannot localize the difference without it. The output-level finding stands.",
        "pass --exported-program FILE, or bundle the program into the package with `aotipre "
        "bundle PACKAGE -o OUT --exported-program FILE`",
        example="accuracy triage cannot localize the difference (AOT701): the archive holds AOTI "
        "code only (no ExportedProgram); it rebuilds the ExportedProgram to capture each "
        "kernel's outputs: pass --exported-program FILE (the ExportedProgram this package was "
        "compiled from, saved with torch.export.save), or put it in the package with `aotipre "
        "bundle PACKAGE -o OUT --exported-program FILE`",
    ),
    Code(
        "AOT790",
        "release-answers-changed",
        W,
        C.ACCURACY,
        "check NEW --against OLD: NEW's outputs differ from OLD's on the same inputs, beyond "
        "the tolerance of their dtype, in the worker that runs OLD for the comparison "
        "(docs/diff.md#behaviour-on-the-same-inputs).",
        "confirm the answers changed on purpose (retrained weights, a fix); otherwise find what "
        "changed between the two builds (aotipre diff OLD NEW)",
        example="NEW's output 0 of model 'model' differs from OLD's (/srv/prod/model.pt2) on the "
        "same inputs: 128 of 128 elements beyond rtol=0.0001, atol=1e-05; largest error 4.71 "
        "at [3, 5] (NEW 2.13, OLD -2.58)",
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
        example="crash triage (printer-3): Kernel triton_per_fused_embedding_sum_0 "
        "(aten.embedding, aten.sum at model.py:125) reads out of bounds: its index input ids "
        "(arg1_1), int64[2, 5], holds min 124, max 1000000000000, but the indexed dimension has "
        "500 entries (valid indices 0..499); validate or clamp ids before calling the model.",
    ),
    Code(
        "AOT802",
        "misattributed-error",
        W,
        C.CRASH,
        "The first error blamed one operation (e.g. a cuBLAS call), but a synchronous run shows an "
        "earlier kernel faulting: the first error was a later symptom of that fault.",
        "debug the kernel the diagnosis names, not the operation the first error blamed",
        example="the first error blamed CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling "
        "`cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`, but a "
        "synchronous run shows triton_poi_fused_embedding_0 faulting before it: the first error "
        "was misattributed (CUDA reports a device fault at a later call)",
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
        example="the index input input_ids (arg3_1) of kernel "
        "triton_poi_fused_embedding_mul_unsqueeze_0 holds 600, past the 500 entries it indexes "
        "(index out of bounds: 0 <= tmp4 < 500)",
    ),
    Code(
        "AOT804",
        "kernel-input-nonfinite",
        W,
        C.NAN,
        "A tensor the faulting kernel reads holds NaN or Inf.",
        "find the producer (the kernel launched before it) or check the model inputs",
        example="kernel triton_per_fused_add_mul_0 receives NaN/Inf in attention_mask (arg1_1)",
    ),
    Code(
        "AOT805",
        "triage-inconclusive",
        W,
        C.CRASH,
        "Crash triage could not name the faulting kernel (the crash did not reproduce, or no step "
        "could run).",
        "the triage stages say why; --artifacts DIR keeps every step's command and log",
        example="crash triage could not name the faulting kernel: the crash did not reproduce with "
        "the printer compiled in",
    ),
    Code(
        "AOT806",
        "triage-needs-exported-program",
        W,
        C.CRASH,
        "The package holds AOTI code only, so the triage steps that recompile (printer, NaN "
        "asserts, minifier) could not run.",
        "pass --exported-program FILE (torch.export.save of the same model)",
        example="crash triage could not recompile model 'model' with the debug printer: the "
        "archive holds AOTI code only (no ExportedProgram); pass --exported-program FILE for the "
        "kernel launch order and the faulting kernel's input statistics",
    ),
    Code(
        "AOT807",
        "minified-repro",
        I,
        C.CRASH,
        "The AOTI minifier reduced the failing program to a minimal repro.py.",
        "attach the repro to a bug report",
        example="the AOTI minifier wrote a minimal repro with 3 graph nodes: "
        "artifacts/model/minifier/repro.py",
    ),
    Code(
        "AOT808",
        "sanitizer-report",
        I,
        C.CRASH,
        "compute-sanitizer memcheck reported an invalid memory access (it names the kernel).",
        "the evidence quotes its report",
        example="compute-sanitizer memcheck: Invalid __global__ read of size 4 bytes in "
        "triton_per_fused_embedding_sum_0",
    ),
    Code(
        "AOT809",
        "output-type-not-registered",
        E,
        C.RUNTIME,
        "The compiled model ran, but its outputs could not be rebuilt: the output pytree type "
        "(e.g. a library's ModelOutput dataclass) is not registered in the serving process. A "
        "Python-side failure, not a kernel crash (no triage).",
        "import the library that registers the type before calling the model, or export with "
        "plain tensor/tuple outputs (e.g. return_dict=False)",
        example="running the model computed its outputs, but torch could not rebuild them into "
        "their output type transformers.modeling_outputs.BaseModelOutput: that pytree type is not "
        "registered in this process; it is registered by 'transformers', which the serving "
        "process must import before calling the model (a Python-side failure, not a kernel crash: "
        "plain aoti_load_package fails the same way)",
    ),
    # 9: aotipre itself
    Code(
        "AOT901",
        "engine-worker-died-once",
        W,
        C.CRASH,
        "The Ray worker (or node) checking the package died; the check ran again on a fresh "
        "worker and finished, so the report is the second run's: the first death is flaky.",
        "look at the node's memory and logs (ray logs); a package whose check sometimes kills "
        "its process will do so in serving too",
        example="the Ray worker checking models/encoder.pt2 died (WorkerCrashedError: The worker "
        "died unexpectedly while executing this task); the check ran again on a fresh worker and "
        "finished: flaky",
    ),
    Code(
        "AOT902",
        "engine-worker-died-twice",
        E,
        C.CRASH,
        "The Ray worker (or node) checking the package died, and so did the one that ran the "
        "check again: the package was not checked, and is reported as a crash, never a pass.",
        "check it on one machine (aotipre check PACKAGE) to see which stage kills the process; "
        "look at the nodes' memory and logs (ray logs)",
        example="the Ray worker checking models/encoder.pt2 died twice (WorkerCrashedError: The "
        "worker died unexpectedly while executing this task; then NodeDiedError: the node running "
        "it died): not checked",
    ),
)

BY_CODE: dict[str, Code] = {c.code: c for c in ALL_CODES}
BY_NAME: dict[str, Code] = {c.name: c for c in ALL_CODES}


def get(code: str) -> Code:
    return BY_CODE[code]
