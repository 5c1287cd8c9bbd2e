"""The release-diff rules over the reader's data (ModelInfo records built in memory): the rule
table itself, and the rules the real pairs of test_diff_real.py do not build (deployment
requirements, ranges that exclude an old size, output pytrees, folded weights)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from aotipre.binaries.cuda import GpuImage
from aotipre.binaries.facts import BinaryFacts, CompileFlags, GpuMember, SharedObject
from aotipre.binaries.versions import load_table
from aotipre.diff.compare import ModelExtras, compare_model, min_libtorch
from aotipre.diff.gate import to_finding
from aotipre.diff.rules import RULES, Impact
from aotipre.findings import Severity, codes
from aotipre.pt2.spec import (
    AotiPart,
    ConstantSpec,
    Dim,
    InputSpec,
    ModelInfo,
    SymbolRange,
    TensorSpec,
    TreeSpec,
)

NONE = ModelExtras()


def _model(
    dims: tuple[Dim, ...] = (Dim(expr="s0"), Dim(8)),
    lo: int = 2,
    hi: int | None = 64,
    aoti: AotiPart | None = None,
    **fields: object,
) -> ModelInfo:
    x = InputSpec("x", 0, "args[0]", "tensor", TensorSpec("float32", dims, None, "cpu"), 0)
    return replace(
        ModelInfo(
            name="model",
            has_exported_program=True,
            aoti=aoti,
            torch_version="2.13.0",
            schema_version="8.0",
            inputs=(x,),
            outputs=(),
            symbols=(SymbolRange("s0", lo, hi),),
            signature=None,
            contract_source="exported_program",
        ),
        **fields,
    )


def _aoti(**fields: object) -> AotiPart:
    base = AotiPart(
        directory="pkg/data/aotinductor/model/",
        device_type="cpu",
        platform="linux",
        machine="x86_64",
        cpu_isa=(),
        compute_capability=None,
        metadata={},
        wrapper_cpp=None,
        shared_objects=("pkg/data/aotinductor/model/a.so",),
        cubins=(),
        weights_on_disk=False,
    )
    return replace(base, **fields)


def _so(**fields: object) -> BinaryFacts:
    return BinaryFacts(shared_objects=(SharedObject("a.so", **fields),))  # type: ignore[arg-type]


def _rules(
    old: ModelInfo, new: ModelInfo, a: ModelExtras = NONE, b: ModelExtras = NONE
) -> set[str]:
    return {c.rule.id for c in compare_model(old, new, a, b)}


def test_rule_ids_are_unique_and_each_code_explains_both_verdicts() -> None:
    assert len({r.id for r in RULES}) == len(RULES)
    for r in RULES:
        code = codes.get(r.code)
        assert code.severity is Severity.ERROR
        assert [sev for sev, _ in code.overrides] == [Severity.INFO]
    for impact, severity in ((Impact.BREAKING, "error"), (Impact.COMPATIBLE, "info")):
        r = next(r for r in RULES if r.impact is impact)
        from aotipre.diff.compare import Change

        finding = to_finding(Change(r, "model", "x"))
        assert finding.severity.value == severity and finding.message == f"{r.id}: x"


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        ((Dim(1), 1, 1), (Dim(expr="s0"), 2, 64), "DIM_BECAME_DYNAMIC_WITHOUT_OLD_SIZE"),
        ((Dim(4), 4, 4), (Dim(expr="s0"), 2, 64), "DIM_BECAME_DYNAMIC"),
        ((Dim(expr="s0"), 2, 64), (Dim(expr="s0"), 1, 32), "DYNAMIC_RANGE_NARROWED"),
        ((Dim(expr="s0"), 2, 64), (Dim(expr="s0"), 2, None), "DYNAMIC_RANGE_WIDENED"),
        ((Dim(expr="s0"), 2, None), (Dim(expr="s0"), 2, 10**6), "DYNAMIC_RANGE_NARROWED"),
        ((Dim(expr="s0"), 2, 64), (Dim(4), 4, 4), "DIM_BECAME_STATIC"),
        ((Dim(3), 3, 3), (Dim(4), 4, 4), "STATIC_DIM_CHANGED"),
    ],
)
def test_dim_rules(old: tuple, new: tuple, rule: str) -> None:
    a = _model((old[0], Dim(8)), old[1], old[2])
    b = _model((new[0], Dim(8)), new[1], new[2])
    assert _rules(a, b) == {rule}


def test_the_symbol_names_do_not_matter_only_the_ranges() -> None:
    a = _model()
    b = replace(_model((Dim(expr="s7"), Dim(8))), symbols=(SymbolRange("s7", 2, 64),))
    assert _rules(a, b) == set()


def test_output_pytree_rules() -> None:
    leaf = TreeSpec(None)
    pair = TreeSpec("builtins.tuple", None, (leaf, leaf))
    triple = TreeSpec("builtins.tuple", None, (leaf, leaf, leaf))
    keyed = TreeSpec("builtins.dict", ["a", "b"], (leaf, leaf))
    assert _rules(_model(output_tree=pair), _model(output_tree=triple)) == {"OUTPUT_ADDED"}
    assert _rules(_model(output_tree=triple), _model(output_tree=pair)) == {"OUTPUT_REMOVED"}
    assert _rules(_model(output_tree=pair), _model(output_tree=keyed)) == {"OUTPUT_PYTREE_CHANGED"}


def test_deployment_rules_from_the_binaries_fake() -> None:
    """Reader data made up for each rule (AOT490): no host here builds both sides."""
    old = _model(aoti=_aoti(binaries=_so(versions=("GLIBCXX_3.4.29", "CXXABI_1.3.9"))))
    new = _model(aoti=_aoti(binaries=_so(versions=("GLIBCXX_3.4.32", "CXXABI_1.3.9"))))
    assert _rules(old, new) == {"GLIBCXX_RAISED"}
    assert _rules(new, old) == {"GLIBCXX_LOWERED"}
    # versions compare by number, as the dynamic loader does: 3.4.9 is below 3.4.30
    nine = _model(aoti=_aoti(binaries=_so(versions=("GLIBCXX_3.4.9", "CXXABI_1.3.9"))))
    thirty = _model(aoti=_aoti(binaries=_so(versions=("GLIBCXX_3.4.30", "CXXABI_1.3.9"))))
    assert _rules(nine, thirty) == {"GLIBCXX_RAISED"}
    assert _rules(thirty, nine) == {"GLIBCXX_LOWERED"}
    flags = CompileFlags("skylake-avx512", ("avx2",), ".comment")
    wider = CompileFlags("sapphirerapids", ("avx2", "avx512f"), ".comment")
    old = _model(aoti=_aoti(binaries=_so(flags=flags)))
    new = _model(aoti=_aoti(binaries=_so(flags=wider)))
    assert _rules(old, new) == {"CPU_ISA_RAISED"}
    assert _rules(new, old) == {"CPU_ISA_LOWERED"}
    gpu = _aoti(device_type="cuda")
    two = BinaryFacts(gpu=(GpuMember("k.cubin", (GpuImage("sass", "80"), GpuImage("sass", "90"))),))
    one = BinaryFacts(gpu=(GpuMember("k.cubin", (GpuImage("sass", "90"),)),))
    assert _rules(
        _model(aoti=replace(gpu, binaries=two)), _model(aoti=replace(gpu, binaries=one))
    ) == {"SASS_ARCH_DROPPED"}
    assert _rules(_model(aoti=_aoti()), _model(aoti=gpu)) == {"MODEL_DEVICE_CHANGED"}
    cpp = _aoti(shared_objects=(), build_flags=("a_compile_flags.json", "a_linker_flags.json"))
    assert _rules(_model(aoti=_aoti()), _model(aoti=cpp)) == {"CPP_COMPILED_AT_LOAD"}
    on_disk = _model(aoti=_aoti(weights_on_disk=True), weights_location="on_disk")
    assert _rules(_model(aoti=_aoti(), weights_location="in_so"), on_disk) == {
        "WEIGHTS_LOCATION_CHANGED"
    }
    ops = ModelExtras(custom_ops=("mylib::twice",))
    assert _rules(_model(), _model(), NONE, ops) == {"CUSTOM_OP_ADDED"}
    assert _rules(_model(), _model(), ops, NONE) == {"CUSTOM_OP_REMOVED"}


def test_cpu_isa_words_and_compile_flags_are_compared_in_one_vocabulary() -> None:
    """AOTI_CPU_ISA says what torch picked (upper-case words of cpu_vec_isa.py), the .so's
    compile flags say /proc/cpuinfo flags: a build pinned to AVX2 (`cpp.march="x86-64-v3"`,
    `cpp.simdlen=256`: AOTI_CPU_ISA "AVX2") after an AVX-512 one needs less, and a build with
    no vector ISA ("INVALID_VEC_ISA", `cpp.simdlen=0`) needs nothing that word names."""
    avx512 = _aoti(
        cpu_isa=("AVX512", "AVX512_VNNI"),
        binaries=_so(flags=CompileFlags("znver4", ("avx", "avx2", "fma", "avx512f"), ".debug_str")),
    )
    avx2 = _aoti(
        cpu_isa=("AVX2",),
        binaries=_so(flags=CompileFlags("x86-64-v3", ("avx", "avx2", "fma"), ".debug_str")),
    )
    none = _aoti(
        cpu_isa=("INVALID_VEC_ISA",),
        binaries=_so(flags=CompileFlags("x86-64", (), ".debug_str")),
    )
    assert _rules(_model(aoti=avx512), _model(aoti=avx2)) == {"CPU_ISA_LOWERED"}
    assert _rules(_model(aoti=avx2), _model(aoti=avx512)) == {"CPU_ISA_RAISED"}
    assert _rules(_model(aoti=avx2), _model(aoti=none)) == {"CPU_ISA_LOWERED"}
    assert _rules(_model(aoti=none), _model(aoti=none)) == set()
    (change,) = compare_model(_model(aoti=none), _model(aoti=avx2), NONE, NONE)
    assert change.rule.id == "CPU_ISA_RAISED"
    assert (change.old, change.new) == ([], ["avx", "avx2", "fma"])


def test_the_oldest_libtorch_is_read_from_the_torch_table() -> None:
    table = load_table()
    newest = table.releases[-1]
    only_newest = sorted(
        name
        for name, rels in table.shim.items()
        if newest in rels and table.releases[0] not in rels and name.startswith("aoti_")
    )
    everywhere = sorted(n for n, rels in table.shim.items() if set(table.releases) <= rels)
    assert min_libtorch(everywhere[:1]) == table.releases[0]
    if only_newest:
        first = min(
            (r for r in table.releases if r in table.shim[only_newest[0]]), key=table.releases.index
        )
        assert min_libtorch(only_newest[:1]) == first
        old = _model(aoti=_aoti(binaries=_so(imports=tuple(everywhere[:1]))))
        new = _model(aoti=_aoti(binaries=_so(imports=(everywhere[0], only_newest[0]))))
        assert _rules(old, new) == {"LIBTORCH_MIN_RAISED"}


def test_a_weight_folded_into_the_code_is_breaking() -> None:
    swappable = ConstantSpec("w", "proj.weight", "float32", (4, 8), "Parameter", False, 128)
    folded = replace(swappable, from_folded=True)
    aoti = _aoti()
    assert _rules(
        _model(aoti=aoti, constants=(swappable,)), _model(aoti=aoti, constants=(folded,))
    ) == {"WEIGHT_FOLDED"}
    digests = ModelExtras(weight_digests={"proj.weight": (128, 1)})
    other = ModelExtras(weight_digests={"proj.weight": (128, 2)})
    m = _model(aoti=aoti, constants=(swappable,))
    assert _rules(m, m, digests, other) == {"WEIGHT_VALUES_CHANGED"}
    assert _rules(m, m, digests, digests) == set()


def test_an_unreadable_contract_is_never_compatible() -> None:
    blind = _model(contract_source="none", inputs=())
    assert {c.rule.id: c.rule.breaking for c in compare_model(_model(), blind, NONE, NONE)} == {
        "CONTRACT_UNAVAILABLE": True
    }


def test_a_weight_baked_into_the_code_on_one_side_and_unknown_to_the_other_is_no_change() -> None:
    """both.pt2 -> its AOTI-only twin: the program's `proj.bias` is inlined into the kernels,
    and the AOTI-only package keeps no record of it; no weight update could name it on either
    side, so it was neither removed nor added."""
    from aotipre.pt2.spec import StateTensor

    kept = ConstantSpec("w", "proj.weight", "float32", (4, 8), "Parameter", False, 128)
    aoti = _aoti(wrapper_cpp="pkg/data/aotinductor/model/x.wrapper.cpp")
    state = (
        StateTensor("proj.weight", "Parameter", "float32", (4, 8)),
        StateTensor("proj.bias", "Parameter", "float32", (4,)),
    )
    both = _model(aoti=aoti, constants=(kept,), state=state)
    aoti_only = _model(aoti=aoti, constants=(kept,))
    assert both.baked_state and both.baked_state[0].fqn == "proj.bias"
    assert _rules(both, aoti_only) == set() and _rules(aoti_only, both) == set()
    gone = _model(aoti=aoti, constants=())
    assert _rules(both, gone) == {"WEIGHT_REMOVED"}


def test_losing_portable_ptx_is_breaking() -> None:
    """PTX for compute_XY is JIT-compiled on every newer GPU: a NEW without it (or whose PTX
    starts at a later architecture) fails on the GPUs newer than its SASS that ran OLD. Triton's
    PTX is portable below sm_90 (emit_multi_arch_kernel on an A100: sm_80 SASS and compute_80
    PTX); from sm_90 on it is arch-specific (tests/data/torch211/multi_arch_cuda.pt2, built on
    an H200: sm_90a SASS and compute_90a PTX), which reaches no GPU its SASS does not."""
    gpu = _aoti(device_type="cuda")
    sass = GpuImage("sass", "80", toolkit="13.0")

    def images(*imgs: GpuImage) -> ModelInfo:
        return _model(aoti=replace(gpu, binaries=BinaryFacts(gpu=(GpuMember("k", imgs),))))

    default, multi = images(sass), images(sass, GpuImage("ptx", "80", ptx_version=(9, 0)))
    assert _rules(multi, default) == {"PTX_DROPPED"}
    assert _rules(default, multi) == set()  # same SASS, PTX of the same CUDA: compatible
    ptx86 = images(sass, GpuImage("ptx", "86", ptx_version=(9, 0)))
    assert _rules(multi, ptx86) == set()  # 8.0 to 8.5 still run the sm_80 SASS
    ptx90 = images(sass, GpuImage("ptx", "90", ptx_version=(9, 0)))
    assert _rules(multi, ptx90) == set()  # so do 8.6 to 8.9
    ptx100 = images(sass, GpuImage("ptx", "100", ptx_version=(9, 0)))
    assert _rules(multi, ptx100) == {"PTX_DROPPED"}  # a 9.0 GPU runs none of NEW's code
    assert _rules(ptx100, multi) == set()
    hopper = GpuImage("sass", "90a", toolkit="13.0")
    specific = images(hopper, GpuImage("ptx", "90a", ptx_version=(9, 0)))
    assert _rules(specific, images(hopper)) == set()  # compute_90a runs on 9.0 only


def test_the_docs_rules_table_is_the_rule_table() -> None:
    """docs/diff.md lists every rule once, in order, with its verdict, code and summary."""
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "diff.md"
    rows = [ln for ln in page.read_text(encoding="utf-8").splitlines() if ln.startswith("| `")]
    expected = [
        f"| `{r.id}` | {r.impact.value} | [{r.code}](codes.md#{r.code.lower()}) | {r.summary} |"
        for r in RULES
    ]
    assert rows == expected


def test_models_are_matched_by_name_across_multi_model_packages() -> None:
    from aotipre.diff.compare import SideView, compare
    from aotipre.pt2.spec import PackageInfo

    def package(*models: ModelInfo) -> PackageInfo:
        return PackageInfo("p.pt2", "exported_program", "p", "pt2", "0", models, ())

    enc, dec, head = (_model(name=n) for n in ("encoder", "decoder", "head"))
    narrow_dec = replace(_model(lo=2, hi=8), name="decoder")
    changes = compare(SideView(package(enc, dec)), SideView(package(narrow_dec, head)))
    assert {(c.model, c.rule.id) for c in changes} == {
        ("encoder", "MODEL_REMOVED"),
        ("head", "MODEL_ADDED"),
        ("decoder", "DYNAMIC_RANGE_NARROWED"),
    }


def test_library_versions_are_compared_by_number() -> None:
    """GLIBCXX_3.4.9 -> GLIBCXX_3.4.30 raises what NEW needs (by name "3.4.30" sorts before
    "3.4.9"), and a package's requirement is the highest by number over its .so files."""
    nine = _so(versions=("GLIBCXX_3.4.9", "CXXABI_1.3.9"))
    thirty = _so(versions=("GLIBCXX_3.4.30", "CXXABI_1.3.9"))
    assert _rules(_model(aoti=_aoti(binaries=nine)), _model(aoti=_aoti(binaries=thirty))) == {
        "GLIBCXX_RAISED"
    }
    assert _rules(_model(aoti=_aoti(binaries=thirty)), _model(aoti=_aoti(binaries=nine))) == {
        "GLIBCXX_LOWERED"
    }
    both = BinaryFacts(
        shared_objects=(*thirty.shared_objects, replace(nine.shared_objects[0], member="b.so"))
    )
    assert _rules(_model(aoti=_aoti(binaries=thirty)), _model(aoti=_aoti(binaries=both))) == set()
