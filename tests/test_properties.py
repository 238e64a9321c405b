"""Property tests: whatever a user types into a profile or a flag, ortop answers with a value or one clear error
(its own exception, carrying an exit code), never a crash, a hang or a huge allocation."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ortop.cli.flags import number, pairs
from ortop.config import knobs
from ortop.config import profile as P
from ortop.errors import OrtopError
from ortop.model import ModelError, parse_shape

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                      max_leaves=12)
known_keys = sorted({k.key.split(".", 1)[1] for k in knobs.registry() if "." in k.key})


@st.composite
def profile_data(draw):
    """Plain data shaped like a profile: known section and key names (and some unknown), any values."""
    data = {}
    for section in draw(st.lists(st.sampled_from(["session", "provider", "workload", "env", "model", "nope"]),
                                 max_size=4, unique=True)):
        if section in ("model", "nope"):
            data[section] = draw(values)
            continue
        keys = draw(st.lists(st.one_of(st.sampled_from(known_keys), st.text(max_size=10)), max_size=5))
        data[section] = {k: draw(values) for k in keys}
    return data


@pytest.mark.slow
@FAST
@given(profile_data())
def test_any_profile_data_gives_a_profile_or_a_profile_error(data):
    try:
        prof = P.from_dict(data)
    except OrtopError as exc:
        assert str(exc) and exc.exit_code == 2
        return
    # what was accepted survives a round trip through TOML, and validates against a host
    again = P.loads(prof.to_toml())
    assert again.to_dict(full=True) == prof.to_dict(full=True)
    try:
        P.validate(prof, host_cpus=os.cpu_count())
    except OrtopError:
        pass


@FAST
@given(st.text(max_size=40))
def test_any_toml_text_gives_a_profile_or_a_profile_error(text):
    try:
        P.loads(text)
    except OrtopError as exc:
        assert str(exc).strip() and exc.exit_code == 2


@FAST
@given(st.text(max_size=30))
def test_core_lists_never_expand_without_bound(text):
    try:
        cores = P.parse_core_list(text)
    except OrtopError:
        return
    assert len(cores) <= 4 * 8192 and all(0 <= c <= 8191 for c in cores)


@FAST
@given(st.text(max_size=30))
def test_shapes_parse_or_say_why(text):
    try:
        shape = parse_shape(text)
    except ModelError:
        return
    assert shape and all(d >= 1 for d in shape)


@pytest.mark.slow
@FAST
@given(st.lists(st.text(max_size=12), max_size=5))
def test_flag_pairs_parse_or_say_which_flag(items):
    try:
        out = pairs(items, "--dim")
    except OrtopError as exc:
        assert "--dim" in str(exc)
        return
    assert all(k for k in out)


@FAST
@given(st.text(max_size=20))
def test_flag_numbers_parse_or_say_which_flag(text):
    try:
        number(text, "--value")
    except OrtopError as exc:
        assert "--value" in str(exc)


def test_a_model_name_that_is_not_utf8_is_refused_with_a_fix(tmp_path):
    from tests.models import make_matmul_model

    good = make_matmul_model(tmp_path / "m.onnx", n=4)
    bad = os.fsdecode(bytes(tmp_path) + b"/mod\xffel.onnx")
    try:
        os.link(good, bad)
    except OSError as exc:  # a file system that refuses such names has no such problem either
        pytest.fail(f"cannot make a non-UTF-8 file name here: {exc}")
    from ortop.model import load_model

    with pytest.raises(ModelError, match="not valid UTF-8.*rename the file"):
        load_model(bad)
