"""The release-diff rules as data: each change between two packages is decided by one rule, with
a stable id (like `buf breaking`'s), a verdict (breaking or compatible) and the finding code of
its family. docs/diff.md is the table of these rules."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Impact(str, enum.Enum):
    """What a change does to a caller that works with OLD."""

    BREAKING = "breaking"
    """The caller fails, or gets different results, with NEW."""
    COMPATIBLE = "compatible"
    """The caller runs with NEW as it ran with OLD."""


@dataclass(frozen=True)
class Rule:
    """One rule of the release diff."""

    id: str
    """Stable upper-case id (`INPUT_REMOVED`), as in the report and docs/diff.md."""
    impact: Impact
    code: str
    """The finding code of the rule's family (aotipre/findings/codes.py)."""
    summary: str
    """What the rule detects and why it has its verdict (one sentence, docs/diff.md)."""

    @property
    def breaking(self) -> bool:
        return self.impact is Impact.BREAKING


B, C = Impact.BREAKING, Impact.COMPATIBLE
MODELS, WEIGHTS, CALL, OUTPUTS, DTYPE, SHAPE, DEPLOY = (
    "AOT095",
    "AOT096",
    "AOT190",
    "AOT191",
    "AOT290",
    "AOT390",
    "AOT490",
)

RULES: tuple[Rule, ...] = (
    # models and package kind
    Rule(
        "MODEL_REMOVED", B, MODELS, "A model OLD packages is not in NEW: loading it by name fails."
    ),
    Rule(
        "MODEL_ADDED",
        C,
        MODELS,
        "NEW packages a model OLD does not: OLD's callers never ask for it.",
    ),
    Rule(
        "AOTI_REMOVED",
        B,
        MODELS,
        "A model lost its compiled AOTI code: aoti_load_package fails on it.",
    ),
    Rule(
        "EXPORTED_PROGRAM_REMOVED",
        B,
        MODELS,
        "A model lost its ExportedProgram: torch.export.load fails on it.",
    ),
    Rule(
        "CONTRACT_UNAVAILABLE",
        B,
        MODELS,
        "One side's input contract cannot be read, so the interface cannot be compared (never reported compatible).",
    ),
    # call structure
    Rule(
        "INPUT_REMOVED",
        B,
        CALL,
        "A positional input (or a leaf of one) is gone: OLD's call has a leaf too many.",
    ),
    Rule(
        "INPUT_ADDED",
        B,
        CALL,
        "A positional input (or a leaf of one) is new: export records no defaults, so OLD's call misses it.",
    ),
    Rule(
        "INPUT_REORDERED",
        B,
        CALL,
        "The same positional inputs in another order: OLD's positional call passes each to the wrong one.",
    ),
    Rule(
        "INPUT_RENAMED",
        C,
        CALL,
        "A positional input has a new name at the same place: positional calls are unaffected (a serving config that names inputs is not).",
    ),
    Rule(
        "KWARG_REMOVED", B, CALL, "A keyword input is gone: OLD's call passes an unknown keyword."
    ),
    Rule(
        "KWARG_ADDED",
        B,
        CALL,
        "A keyword input is new: export records no defaults, so OLD's call misses it.",
    ),
    Rule(
        "INPUT_KIND_CHANGED",
        B,
        CALL,
        "An input changed kind (tensor, int, float, bool, ...): OLD's value is refused or misread.",
    ),
    Rule(
        "SCALAR_VALUE_CHANGED",
        B,
        CALL,
        "A non-tensor input export specialized now has another baked value: OLD's value is ignored and NEW computes with its own.",
    ),
    # outputs
    Rule(
        "OUTPUT_REMOVED",
        B,
        OUTPUTS,
        "NEW returns fewer outputs: OLD's caller reads one that is no longer there.",
    ),
    Rule(
        "OUTPUT_ADDED",
        C,
        OUTPUTS,
        "NEW returns more outputs after OLD's: the ones OLD's caller reads are where they were.",
    ),
    Rule(
        "OUTPUT_PYTREE_CHANGED",
        B,
        OUTPUTS,
        "The outputs' pytree (container types, dict keys, nesting) changed: OLD's caller unpacks them wrongly.",
    ),
    Rule("OUTPUT_DTYPE_CHANGED", B, DTYPE, "An output has another dtype."),
    Rule("OUTPUT_SHAPE_CHANGED", B, SHAPE, "An output has another rank or static size."),
    # dtype and device of inputs
    Rule("DTYPE_CHANGED", B, DTYPE, "An input tensor's dtype changed: OLD's tensors are refused."),
    Rule(
        "DEVICE_CHANGED",
        B,
        DTYPE,
        "An input tensor's device changed: OLD's tensors are on the wrong device.",
    ),
    # shapes
    Rule("RANK_CHANGED", B, SHAPE, "An input tensor's rank changed."),
    Rule("STATIC_DIM_CHANGED", B, SHAPE, "A static size of an input changed."),
    Rule(
        "DIM_BECAME_STATIC", B, SHAPE, "A dynamic dim is now static: OLD's other sizes are refused."
    ),
    Rule(
        "DIM_BECAME_DYNAMIC",
        C,
        SHAPE,
        "A static dim is now dynamic with a range that holds the old size.",
    ),
    Rule(
        "DIM_BECAME_DYNAMIC_WITHOUT_OLD_SIZE",
        B,
        SHAPE,
        "A static dim is now dynamic with a range that excludes the old size (export's 0/1 specialization: a Dim starts at 2).",
    ),
    Rule("DYNAMIC_RANGE_NARROWED", B, SHAPE, "A dynamic dim's range lost sizes OLD accepted."),
    Rule(
        "DYNAMIC_RANGE_WIDENED",
        C,
        SHAPE,
        "A dynamic dim's range holds every size OLD accepted, and more.",
    ),
    # deployment requirements
    Rule(
        "MODEL_DEVICE_CHANGED",
        B,
        DEPLOY,
        "The compiled code targets another device type (cpu, cuda, ...).",
    ),
    Rule(
        "CPU_ISA_RAISED",
        B,
        DEPLOY,
        "NEW's compiled code needs CPU extensions OLD's did not: a host without them crashes (SIGILL).",
    ),
    Rule("CPU_ISA_LOWERED", C, DEPLOY, "NEW's compiled code needs fewer CPU extensions."),
    Rule(
        "GLIBCXX_RAISED",
        B,
        DEPLOY,
        "NEW's .so needs a newer GLIBCXX, CXXABI or GLIBC symbol version: an older libstdc++ or glibc refuses to load it.",
    ),
    Rule(
        "GLIBCXX_LOWERED",
        C,
        DEPLOY,
        "NEW's .so needs an older (or the same) GLIBCXX, CXXABI and GLIBC.",
    ),
    Rule(
        "LIBTORCH_MIN_RAISED",
        B,
        DEPLOY,
        "NEW's .so imports aoti_* shim functions that the oldest libtorch OLD loads in does not export.",
    ),
    Rule("LIBTORCH_MIN_LOWERED", C, DEPLOY, "NEW's .so loads in an older libtorch than OLD's."),
    Rule(
        "SASS_ARCH_DROPPED",
        B,
        DEPLOY,
        "NEW has no SASS for a GPU architecture OLD had: those GPUs need PTX JIT (a driver that can) or fail.",
    ),
    Rule("SASS_ARCH_ADDED", C, DEPLOY, "NEW has SASS for more GPU architectures."),
    Rule(
        "PTX_DROPPED",
        B,
        DEPLOY,
        "A GPU newer than OLD's SASS that runs OLD through PTX JIT runs none of NEW's code (NEW has no portable PTX as old as OLD's).",
    ),
    Rule(
        "PTX_RAISED",
        B,
        DEPLOY,
        "NEW's GPU code needs a newer driver than OLD's (PTX ISA or CUDA toolkit).",
    ),
    Rule(
        "CUSTOM_OP_ADDED",
        B,
        DEPLOY,
        "NEW calls a custom operator OLD did not: the deployment must load its library (a Python custom op cannot run in the C++ loader).",
    ),
    Rule("CUSTOM_OP_REMOVED", C, DEPLOY, "NEW no longer calls a custom operator."),
    Rule(
        "CPP_COMPILED_AT_LOAD",
        B,
        DEPLOY,
        "NEW ships C++ sources the loader compiles at load (package_cpp_only): the host needs a compiler.",
    ),
    Rule(
        "CPP_NO_LONGER_COMPILED_AT_LOAD",
        C,
        DEPLOY,
        "NEW ships its compiled .so where OLD was compiled at load.",
    ),
    Rule(
        "WEIGHTS_LOCATION_CHANGED",
        B,
        DEPLOY,
        "The weights moved into or out of the .so: how the package must be loaded changed.",
    ),
    Rule(
        "SERVING_CONFIG_REFUSES_NEW",
        B,
        DEPLOY,
        "The serving config (--serving-config) accepts OLD and refuses NEW (an error of "
        "`check --serving-config`'s checks that OLD did not have): the server that loads OLD "
        "refuses NEW.",
    ),
    Rule(
        "SERVING_CONFIG_ACCEPTS_NEW",
        C,
        DEPLOY,
        "The serving config (--serving-config) refused OLD there and accepts NEW.",
    ),
    # weights
    Rule(
        "WEIGHT_REMOVED",
        B,
        WEIGHTS,
        "A weight OLD had is gone: a weight update naming it is refused.",
    ),
    Rule(
        "WEIGHT_ADDED",
        C,
        WEIGHTS,
        "A new weight: a partial update built for OLD still applies (a full one misses it).",
    ),
    Rule(
        "WEIGHT_RESHAPED",
        B,
        WEIGHTS,
        "A weight has another shape: OLD's checkpoint no longer fits.",
    ),
    Rule(
        "WEIGHT_RETYPED", B, WEIGHTS, "A weight has another dtype: OLD's checkpoint no longer fits."
    ),
    Rule(
        "WEIGHT_FOLDED",
        B,
        WEIGHTS,
        "A weight a swap replaced in OLD is folded or baked into NEW: updates no longer reach it.",
    ),
    Rule("WEIGHT_UNFOLDED", C, WEIGHTS, "A weight baked into OLD is swappable in NEW."),
    Rule(
        "WEIGHT_VALUES_CHANGED",
        C,
        WEIGHTS,
        "A weight's values changed (its stored bytes differ): same interface, other answers.",
    ),
    Rule(
        "WEIGHT_VALUES_NOT_COMPARED",
        C,
        WEIGHTS,
        "A model's weight values could not be compared (the message says why: one side's "
        "compiled weights cannot be read, or the sides store them in other layouts); changed "
        "values would be compatible too, so it is said, never silent.",
    ),
)
"""Every rule, by family. The verdicts are grounded in tests/diff/ (packages built twice through
the public API, OLD's inputs given to NEW in plain torch)."""

BY_ID: dict[str, Rule] = {r.id: r for r in RULES}


def rule(rule_id: str) -> Rule:
    """The rule with this id (KeyError: a bug)."""
    return BY_ID[rule_id]
