"""Property-based fuzzing (hypothesis) of the archive reader, the static check and the wrapper.cpp
parser, on mutations of real fixture packages and wrapper texts. A fixed, derandomized budget
here; scripts/fuzz.py runs the same targets for longer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hardening.fuzzing import (
    ARCHIVES,
    INPUT_FILES,
    check_wrapper,
    fuzz_archive_example,
    fuzz_inputs_example,
    fuzz_wrapper_example,
    wrapper_texts,
)


def ci(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


ARCHIVE_EXAMPLES = 800
WRAPPER_EXAMPLES = 1200
INPUTS_EXAMPLES = 600


@pytest.fixture(scope="module")
def sources(pkg: Callable[[str], Path]) -> list[Path]:
    return [pkg(name) for name in ARCHIVES]


def test_mutated_archives_give_package_info_or_a_clean_error(sources: list[Path]) -> None:
    @ci(ARCHIVE_EXAMPLES)
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        fuzz_archive_example(data, sources)

    prop()


def test_mutated_sample_inputs_give_sample_inputs_or_one_error_line(
    pkg: Callable[[str], Path],
) -> None:
    sources = [pkg(name).read_bytes() for name in INPUT_FILES]

    @ci(INPUTS_EXAMPLES)
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        fuzz_inputs_example(data, sources)

    prop()


def test_mutated_wrapper_texts_never_raise() -> None:
    texts = wrapper_texts()
    assert len(texts) >= 10

    @ci(WRAPPER_EXAMPLES)
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        fuzz_wrapper_example(data, texts)

    prop()


@pytest.mark.parametrize("text", ["", "\x00" * 100, "}" * 1000, '"' * 1000, "\udcff\n" * 10])
def test_degenerate_wrapper_texts(text: str) -> None:
    check_wrapper(text)
