"""``--dim INPUT[AXIS]=N``: a free dimension the model leaves unnamed (no ``dim_param``) set by its input and axis,
as docs/traffic.md shows: parsed into the profile, and a real headless run feeding that shape."""

from __future__ import annotations

import argparse
import json

import pytest

from ortop.cli.flags import add_workload_args, apply_flags
from ortop.config.profile import Profile
from tests.models import make_conv_model
from tests.test_cli import env, one_error_line, ortop  # noqa: F401  (env is a fixture)

pytestmark = [pytest.mark.integration, pytest.mark.sharing]  # runs for half a second; no time is judged


@pytest.fixture(scope="module")
def unnamed_model(tmp_path_factory) -> str:
    """x: float32[1x3x?x?]: height and width free, with neither a value nor a name."""
    return make_conv_model(tmp_path_factory.mktemp("unnamed") / "conv.onnx", shape=(1, 3, None, None))


def test_an_unnamed_dim_is_parsed_by_input_and_axis() -> None:
    p = argparse.ArgumentParser()
    add_workload_args(p, session=True)
    prof = apply_flags(Profile(), p.parse_args(["--dim", "x[2]=48", "--dim", "x[3]=64"]), "m.onnx")
    assert prof.workload.dims == {"x[2]": 48, "x[3]": 64}


def test_a_headless_run_feeds_the_unnamed_dims_given(unnamed_model, env):  # noqa: F811
    from ortop.model import load_model

    assert load_model(unnamed_model).free_dims == ("x[2]", "x[3]")  # how ortop info lists them
    r = ortop(unnamed_model, "--headless", "--duration", 0.5, "--dim", "x[2]=48", "--dim", "x[3]=64", "--json",
              env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["inputs"] == ["x: float32[1x3x48x64]"] and d["runs"] > 0, d["inputs"]
    assert d["profile"]["workload"]["dims"] == {"x[2]": 48, "x[3]": 64}
    # left unset, an unnamed dim runs at 1; a key the model lacks is one error line naming the ones it has
    r = ortop(unnamed_model, "--headless", "--duration", 0.5, "--dim", "x[2]=48", "--json", env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["inputs"] == ["x: float32[1x3x48x1]"], r.stderr
    line = one_error_line(ortop(unnamed_model, "--headless", "--duration", 0.5, "--dim", "x[5]=4", env=env))
    assert "unknown free dim 'x[5]'" in line and "x[2], x[3]" in line, line
