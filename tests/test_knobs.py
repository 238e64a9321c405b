"""The knob registry drives every surface: a declaration alone reaches profile reading and validation, the TOML
round trip, the ORT session options, the settings form, every exporter, the README table, the command-line flags,
the one-line summaries (settings line, change lines, tuner labels) and the verdict's metric. Checked with fake
knobs added to the registry, with the real inter-op spin knobs, and by walking the Profile dataclasses."""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ortop.cli.flags import add_workload_args, apply_flags
from ortop.config import docs, knobs
from ortop.config import profile as pm
from ortop.config.diff import diff
from ortop.config.knobs import CONFIG_ENTRY, ENV, PROVIDER_OPTION, SESSION_OPTION, Flag, Knob
from ortop.config.profile import Profile, ProfileError, SessionSettings
from ortop.config.validate import check_value
from ortop.export import FORMATS, ExportError, render
from ortop.runtime import options as ortopts
from ortop.tui import form
from tests.models import make_matmul_model

REPO = Path(__file__).resolve().parents[1]

FAKE_ENTRY = Knob("session.fake_spin_pause", int, None, CONFIG_ENTRY, "session.ortop_fake_spin_pause", optional=True,
                  minimum=1, maximum=9, help="a fake config entry", label="fake pause", section="Spinning",
                  hint="fake hint", tune_values=(1, 5), short="pause", display=lambda v: f"{v} ticks", glance="set",
                  flag=Flag("--fake-pause", "T", session=True))
FAKE_ATTR = Knob("session.fake_verbosity", int, 0, SESSION_OPTION, "log_verbosity_level", minimum=0,
                 help="a fake SessionOptions attribute", label="fake verbosity", section="Logging")
FAKE_CUDA = Knob("provider.options.fake_cuda_switch", bool, None, PROVIDER_OPTION, "fake_cuda_switch", optional=True,
                 provider="cuda", help="a fake CUDA option", label="fake_cuda_switch", section="CUDA (provider cuda)")
FAKE_ENV = Knob("env.ORTOP_FAKE_ENV", str, None, ENV, "ORTOP_FAKE_ENV", optional=True, restarts=True,
                help="a fake environment variable", label="ORTOP_FAKE_ENV", section="Environment")
FAKE_WORKLOAD = Knob("workload.fake_burst", int, 1, minimum=1, maximum=64, help="a fake workload knob")  # no face
FAKES = (FAKE_ENTRY, FAKE_ATTR, FAKE_CUDA, FAKE_ENV, FAKE_WORKLOAD)

FAKE_TOML = """\
[session]
fake_spin_pause = 3
fake_verbosity = 1
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry with the fake knobs declared; nothing else is touched."""
    monkeypatch.setattr(knobs, "REGISTRY", knobs.REGISTRY + FAKES)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_matmul_model(tmp_path_factory.mktemp("m") / "mm.onnx", n=16)


# ---- the registry and the Profile dataclasses agree ------------------------------------------------------------

def _default(f: dataclasses.Field) -> object:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def test_every_profile_dataclass_field_is_declared() -> None:
    for f in dataclasses.fields(Profile):
        if f.name in pm.SECTIONS:
            section = pm.SECTIONS[f.name]
            for sf in dataclasses.fields(section):
                if sf.name == "extra":
                    continue  # the store of knobs declared only in the registry
                knob = knobs.find(f"{f.name}.{sf.name}")
                assert knob is not None, f"{section.__name__}.{sf.name} has no declaration in ortop.config.knobs"
                assert knob.default == _default(sf), f"{knob.key}: registry and dataclass defaults differ"
        else:
            knob = knobs.find(f.name)
            assert knob is not None, f"Profile.{f.name} has no declaration in ortop.config.knobs"
            assert knob.default == _default(f), knob.key


def test_every_top_level_knob_has_a_profile_field() -> None:
    # Sections keep registry-only knobs in `extra`; the top level has no such store.
    names = {f.name for f in dataclasses.fields(Profile)}
    assert {k.name for k in knobs.in_table("")} <= names
    assert set(knobs.sections()) == set(pm.SECTIONS)


def test_declarations_are_consistent() -> None:
    keys = [k.key for k in knobs.registry()]
    assert len(keys) == len(set(keys))
    config_keys = [k.ort_name for k in knobs.settings(CONFIG_ENTRY)]
    assert len(config_keys) == len(set(config_keys))
    refused: list[tuple[str, str]] = []
    for knob in knobs.registry():
        assert knob.help and "|" not in knob.help, knob.key
        if knob.target in (SESSION_OPTION, CONFIG_ENTRY, PROVIDER_OPTION, ENV) and not knob.is_map:
            assert knob.ort_name, knob.key
        if knob.choices and knob.default is not None:
            assert knob.default in knob.choices, knob.key
        if knob.section:
            assert knob.label, knob.key
        for value in knob.tune(8):
            check_value(knob, value, lambda msg, key: refused.append((key, msg)))
    assert not refused, f"tune values outside their knob's domain: {refused}"


def test_choice_knobs_name_ort_enums_ortop_can_spell() -> None:
    for knob in knobs.settings(SESSION_OPTION):
        if knob.ort_enum:
            assert set(ortopts.ENUM_NAMES[knob.ort_enum]) == set(knob.choices), knob.key
            assert set(ortopts.ENUM_VALUES[knob.ort_enum]) == set(knob.choices), knob.key


def test_session_option_knobs_are_attributes_of_onnxruntime() -> None:
    import onnxruntime as ort

    so = ort.SessionOptions()
    for knob in knobs.settings(SESSION_OPTION):
        assert hasattr(so, knob.ort_name), knob.key


def test_config_keys_are_read_by_the_installed_onnxruntime() -> None:
    """Every declared config key appears in onnxruntime's binary: ORT ignores unknown keys without a word, so a
    typo would otherwise silently do nothing."""
    import onnxruntime

    binaries = glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), "capi", "onnxruntime_pybind11_state*"))
    if not binaries:
        pytest.skip("no onnxruntime_pybind11_state binary to read")
    data = Path(binaries[0]).read_bytes()
    for knob in knobs.settings(CONFIG_ENTRY):
        assert knob.ort_name.encode() in data, f"{knob.key}: {knob.ort_name} is not a key this onnxruntime reads"


def test_tune_values() -> None:
    assert knobs.host_threads(8) == (1, 2, 4, 8)
    assert knobs.host_threads(6) == (1, 2, 4, 6)
    assert knobs.host_threads(1) == (1,)
    assert knobs.get("session.intra_op_num_threads").tune(4) == (1, 2, 4)
    assert knobs.get("session.execution_mode").tune(4) == ("sequential", "parallel")
    assert knobs.get("session.intra_op_thread_affinities").tune(4) == ()


def test_registry_only_knobs_live_in_extra() -> None:
    s = SessionSettings(extra={"inter_op_spin_backoff_max": 4, "inter_op_spin_duration_us": None})
    assert s.inter_op_spin_backoff_max == 4
    assert s.inter_op_spin_duration_us is None
    assert s.extra == {"inter_op_spin_backoff_max": 4}  # defaults are not kept: equal profiles compare equal
    assert SessionSettings(extra={"inter_op_spin_backoff_max": None}) == SessionSettings()
    with pytest.raises(TypeError):
        SessionSettings(extra={"intra_op_num_threads": 2})  # a typed field goes in its field
    with pytest.raises(TypeError):
        SessionSettings(extra={"no_such_knob": 1})
    with pytest.raises(AttributeError):
        _ = SessionSettings().no_such_knob


# ---- a fake knob flows everywhere ------------------------------------------------------------------------------

def test_without_the_declaration_the_fake_key_is_unknown() -> None:
    with pytest.raises(ProfileError, match="unknown key 'session.fake_spin_pause'"):
        pm.loads(FAKE_TOML)


@pytest.mark.usefixtures("fake")
def test_fake_knob_is_read_and_validated() -> None:
    p = pm.loads(FAKE_TOML)
    assert (p.session.fake_spin_pause, p.session.fake_verbosity) == (3, 1)
    with pytest.raises(ProfileError) as info:
        pm.loads("description = 'x'\n[session]\nfake_spin_pause = 0\n", path="f.toml")
    assert (info.value.key, info.value.line) == ("session.fake_spin_pause", 3)
    assert "fake_spin_pause must be 1..9, got 0" in str(info.value)
    with pytest.raises(ProfileError, match="session.fake_spin_pause must be an integer"):
        pm.loads("[session]\nfake_spin_pause = 'x'\n")
    with pytest.raises(ProfileError, match="did you mean 'fake_spin_pause'"):
        pm.loads("[session]\nfake_spin_paus = 2\n")
    with pytest.raises(ProfileError, match="has a field of its own: set session.fake_spin_pause instead"):
        pm.loads('[session.config]\n"session.ortop_fake_spin_pause" = "2"\n')
    cuda = '[provider]\nname = "cuda"\n[provider.options]\nfake_cuda_switch = '
    assert pm.loads(cuda + "true\n").provider.options == {"fake_cuda_switch": True}
    with pytest.raises(ProfileError, match="fake_cuda_switch must be true or false"):
        pm.loads(cuda + '"maybe"\n')


@pytest.mark.usefixtures("fake")
def test_fake_knob_round_trips(tmp_path: Path) -> None:
    p = pm.loads(FAKE_TOML)
    assert p.to_dict()["session"] == {"fake_spin_pause": 3, "fake_verbosity": 1}
    assert pm.loads(p.to_toml()) == p
    pm.save(p, tmp_path / "f.toml")
    assert pm.load(tmp_path / "f.toml") == p
    assert pm.from_dict(json.loads(render(p, "json"))) == p
    assert pm.merge(p, **{"session.fake_spin_pause": 5}).session.fake_spin_pause == 5
    assert "session.fake_spin_pause: 3 → default" in Profile().changes_from(p)


@pytest.mark.usefixtures("fake")
def test_fake_knob_reaches_a_real_session_options(model: str) -> None:
    import onnxruntime as ort

    p = pm.loads(FAKE_TOML)
    assert p.config_entries()["session.ortop_fake_spin_pause"] == "3"
    so = ortopts.session_options(p)
    assert so.get_session_config_entry("session.ortop_fake_spin_pause") == "3"
    assert so.log_verbosity_level == 1
    sess = ort.InferenceSession(model, sess_options=so, providers=ortopts.provider_list(p))
    assert sess.get_session_options().get_session_config_entry("session.ortop_fake_spin_pause") == "3"


@pytest.mark.usefixtures("fake")
def test_fake_knob_is_in_the_form() -> None:
    fields = form.FIELD_BY_KEY
    assert fields["session.fake_spin_pause"] == form.Field("session.fake_spin_pause", "fake pause", "opt_int",
                                                           hint="fake hint", section="Spinning")
    assert fields["session.fake_verbosity"].kind == "int"
    assert fields["provider.options.fake_cuda_switch"].kind == "tri"
    assert fields["env.ORTOP_FAKE_ENV"].kind == "env"
    spinning = [f.key for f in form.FIELDS if f.section == "Spinning"]
    assert spinning[-1] == "session.fake_spin_pause"  # grouped with its section, not at the end of the form
    p = pm.loads(FAKE_TOML)
    values = form.form_values(p)
    assert values["session.fake_spin_pause"] == "3"
    values.update({"session.fake_spin_pause": "7", "env.ORTOP_FAKE_ENV": "on"})
    assert form.changes(p, values) == {"session.fake_spin_pause": 7, "env.ORTOP_FAKE_ENV": "on"}
    assert form.build(p, values).session.fake_spin_pause == 7
    values["provider.options.fake_cuda_switch"] = "on"
    with pytest.raises(ProfileError, match="fake_cuda_switch is a CUDA option"):
        form.changes(p, values)


@pytest.mark.usefixtures("fake")
def test_fake_knob_is_in_every_export() -> None:
    p = pm.merge(pm.loads(FAKE_TOML), **{"env.ORTOP_FAKE_ENV": "1"})
    out = {fmt: render(p, fmt) for fmt in FORMATS if fmt != "olive"}
    assert "so.add_session_config_entry('session.ortop_fake_spin_pause', '3')" in out["python"]
    assert "so.log_verbosity_level = 1" in out["python"]
    assert 'so.AddConfigEntry("session.ortop_fake_spin_pause", "3");' in out["cpp"]
    assert "// fake_verbosity = \"1\": no C++ setter is known for SessionOptions.log_verbosity_level" in out["cpp"]
    assert 'so.AddSessionConfigEntry("session.ortop_fake_spin_pause", "3");' in out["csharp"]
    assert "// fake_verbosity = \"1\": no C# setter is known" in out["csharp"]
    assert "session.ortop_fake_spin_pause|3" in out["perf-test"]
    assert "# note: fake_verbosity = 1 has no perf_test flag" in out["perf-test"]
    assert "export ORTOP_FAKE_ENV=1" in out["env"]
    assert json.loads(out["json"])["session"]["fake_spin_pause"] == 3
    ns: dict = {}
    exec(compile(out["python"], "<export>", "exec"), ns)
    so = ns["session_options"]()
    assert so.get_session_config_entry("session.ortop_fake_spin_pause") == "3" and so.log_verbosity_level == 1
    # Olive cannot apply an attribute its evaluator never sets: refused by name; config entries travel.
    with pytest.raises(ExportError, match="cannot carry fake_verbosity = 1"):
        render(p, "olive")
    olive = json.loads(render(pm.merge(p, **{"session.fake_verbosity": 0}), "olive"))
    assert olive["session_options"]["extra_session_config"] == {"session.ortop_fake_spin_pause": "3"}


@pytest.mark.usefixtures("fake")
def test_fake_knob_is_in_the_markdown_table() -> None:
    table = docs.markdown_table()
    assert "| `session.fake_spin_pause` | `session.ortop_fake_spin_pause` — a fake config entry | ORT's |" in table
    assert "| `session.fake_verbosity` | `SessionOptions.log_verbosity_level` — a fake SessionOptions attribute | 0 |" \
        in table
    assert "`fake_cuda_switch`" in table and "`ORTOP_FAKE_ENV`" in table


def test_an_ortop_knob_left_unset_is_not_said_to_keep_orts_default() -> None:
    # workload.arrival is ortop's: unset, ortop picks the closed loop (fixed spacing with a rate), not ORT
    rows = {line.split(" | ")[0]: line for line in docs.markdown_table().splitlines()}
    arrival = rows["| `workload.arrival`"]
    assert arrival.endswith("| unset: closed, or fixed when rate_hz is set |")
    for knob in knobs.registry():
        if knob.optional and knob.target == knobs.WORKLOAD:
            assert not rows[f"| `{knob.key}`"].endswith("| ORT's |"), knob.key
    assert rows["| `session.dynamic_block_base`"].endswith("| ORT's |")  # an ORT setting's unset is ORT's


def _parser(*, session: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_workload_args(p, session=session)
    return p


@pytest.mark.usefixtures("fake")
def test_fake_knob_has_a_flag() -> None:
    """A declared flag and a derived one (every single-valued workload knob gets ``--name``), typed by the knob."""
    args = _parser(session=True).parse_args(["--fake-pause", "3", "--fake-burst", "4", "--threads", "2"])
    p = apply_flags(Profile(), args, "m.onnx")
    assert (p.session.fake_spin_pause, p.workload.fake_burst, p.session.intra_op_num_threads) == (3, 4, 2)
    assert "--fake-pause T" in _parser(session=True).format_help()
    assert "a fake workload knob" in _parser(session=False).format_help()  # the knob's help, when the flag has none
    for argv in (["--fake-pause", "3"], ["--fake-burst", "many"]):  # a quick session flag only where asked for
        with pytest.raises(SystemExit) as info:
            _parser(session=False).parse_args(argv)
        assert info.value.code == 2
    with pytest.raises(ProfileError, match="fake_burst must be 1..64, got 65"):
        apply_flags(Profile(), _parser(session=False).parse_args(["--fake-burst", "65"]), "m.onnx")
    assert apply_flags(Profile(), _parser(session=True).parse_args([]), "m.onnx").workload.fake_burst == 1


@pytest.mark.usefixtures("fake")
def test_fake_knob_has_a_label_and_a_display_everywhere() -> None:
    from ortop.engine.answers.space import describe
    from ortop.engine.live.snapshot import changes_between, label_of
    from ortop.tui.panels._format import compact_changes
    from ortop.tui.panels.model import settings_line

    p = pm.merge(Profile(), **{"session.fake_spin_pause": 3, "workload.fake_burst": 2})
    assert [(c.key, c.before, c.after, c.knob) for c in diff(Profile(), p)] == [
        ("session.fake_spin_pause", None, 3, FAKE_ENTRY), ("workload.fake_burst", 1, 2, FAKE_WORKLOAD)]
    assert compact_changes(Profile(), p) == ["pause 3 ticks", "fake burst 2"]  # shown at a glance first
    assert describe(p, Profile()) == "pause 3 ticks, fake burst 2"  # the tuner's label: the same terms
    assert label_of(changes_between(Profile(), p)) == "session.fake_spin_pause: default → 3; workload.fake_burst: 1 → 2"
    assert settings_line(p) == "threads default · spin default · closed loop · pause 3 ticks"  # declaration order
    assert settings_line(Profile()) == "threads default · spin default · closed loop"  # "set" knobs only when set


@pytest.mark.usefixtures("fake")
def test_fake_knob_has_a_verdict_metric() -> None:
    from ortop.engine.live.verdicts import primary_metric

    paced = pm.merge(Profile(), **{"workload.rate_hz": 100.0})
    assert primary_metric(paced, pm.merge(paced, **{"session.fake_spin_pause": 3})) == "cpu"  # "spin" in its name
    assert primary_metric(Profile(), pm.merge(Profile(), **{"session.fake_spin_pause": 3})) == "p50"  # closed loop
    assert primary_metric(paced, pm.merge(paced, **{"session.fake_verbosity": 1})) == "p50"
    callers = pm.merge(Profile(), **{"workload.concurrency": 2})
    assert primary_metric(callers, pm.merge(callers, **{"session.fake_verbosity": 1})) == "throughput"
    assert dataclasses.replace(FAKE_ATTR, verdict="p99").metric(100.0, 2) == "p99"  # declared: whatever the load
    with pytest.raises(ValueError, match="unknown verdict metric"):
        dataclasses.replace(FAKE_ATTR, verdict="p42")


def test_real_knobs_faces() -> None:
    """Flags are unique and none collides with another command flag; the tuner's dimensions read apart."""
    flags = [k.cli_flag.name for k in knobs.registry() if k.cli_flag is not None]
    assert len(flags) == len(set(flags))
    help_ = _parser(session=True).format_help()
    for flag in ("--threads", "--inter-threads", "--no-spinning", "--provider", "--rate", "--concurrency", "--replicas",
                 "--pin-replicas", "--shared-arena", "--arrival", "--max-queue", "--trace", "--trace-speed",
                 "--warmup", "--seed", "--batch", "--dim", "--shape", "--value", "--input"):
        assert flag in help_, flag
    tuned = [k.short_label for k in knobs.registry() if k.tune(8)]
    assert len(tuned) == len(set(tuned)), tuned
    assert knobs.get("session.dynamic_block_base").term_text(4) == "dbb 4"
    assert knobs.get("workload.rate_hz").term_text(0.0) == "closed loop"
    assert knobs.get("session.intra_op_thread_affinities").term_text(((0, 1), (2,))) == "pinned 0-2"


# ---- the inter-op spin knobs: declared once, present everywhere -------------------------------------------------

INTER_OP = {"session.inter_op_spin_duration_us": "session.inter_op.spin_duration_us",
            "session.inter_op_spin_backoff_max": "session.inter_op.spin_backoff_max"}
INTER_TOML = """\
[session]
execution_mode = "parallel"
inter_op_num_threads = 2
inter_op_spin_duration_us = 50
inter_op_spin_backoff_max = 4
"""


def test_inter_op_spin_knobs_are_declared_with_ort_keys() -> None:
    for key, ort_key in INTER_OP.items():
        knob = knobs.get(key)
        assert (knob.target, knob.ort_name, knob.optional) == (CONFIG_ENTRY, ort_key, True)


def test_inter_op_spin_knobs_in_profiles_and_validation() -> None:
    p = pm.loads(INTER_TOML)
    assert p.session.inter_op_spin_backoff_max == 4 and p.session.inter_op_spin_duration_us == 50
    assert p.config_entries()["session.inter_op.spin_backoff_max"] == "4"
    assert p.config_entries()["session.inter_op.spin_duration_us"] == "50"
    assert pm.loads(p.to_toml()) == p
    assert "inter_op_spin_backoff_max must be >= 1, got 0" in str(
        pytest.raises(ProfileError, pm.loads, "[session]\ninter_op_spin_backoff_max = 0\n").value)
    assert "inter_op_spin_duration_us must be >= 0, got -1" in str(
        pytest.raises(ProfileError, pm.loads, "[session]\ninter_op_spin_duration_us = -1\n").value)


def test_inter_op_spin_knobs_on_a_real_session(model: str) -> None:
    import numpy as np
    import onnxruntime as ort

    p = pm.loads(INTER_TOML)
    sess = ort.InferenceSession(model, sess_options=ortopts.session_options(p), providers=ortopts.provider_list(p))
    got = sess.get_session_options()
    assert got.get_session_config_entry("session.inter_op.spin_backoff_max") == "4"
    assert got.get_session_config_entry("session.inter_op.spin_duration_us") == "50"
    (y,) = sess.run(None, {"x": np.ones((2, 16), np.float32)})
    assert y.shape == (2, 16)


def test_every_spin_knob_is_judged_on_cpu_per_run_at_a_paced_rate() -> None:
    """A change of the inter-op spin knobs at a paced rate used to be judged on p50: what spinning costs is CPU."""
    from ortop.engine.live.verdicts import primary_metric

    paced = pm.merge(Profile(), **{"workload.rate_hz": 100.0})
    for key, value in (("session.allow_spinning", False), ("session.inter_op_allow_spinning", False),
                       ("session.spin_duration_us", 10), ("session.spin_backoff_max", 2),
                       ("session.inter_op_spin_duration_us", 10), ("session.inter_op_spin_backoff_max", 2),
                       ("env.OMP_WAIT_POLICY", "PASSIVE")):
        assert primary_metric(paced, pm.merge(paced, **{key: value})) == "cpu", key
        assert primary_metric(Profile(), pm.merge(Profile(), **{key: value})) == "p50", key
    assert primary_metric(paced, pm.merge(paced, **{"session.dynamic_block_base": 4})) == "p99"
    both = pm.merge(paced, **{"session.dynamic_block_base": 4, "session.inter_op_allow_spinning": False})
    assert primary_metric(paced, both) == "cpu"  # CPU first when several are named


def test_inter_op_spin_knobs_in_form_exports_and_readme() -> None:
    p = pm.loads(INTER_TOML)
    keys_page = (REPO / "docs" / "reference" / "profile-keys.md").read_text(encoding="utf-8")
    for key, ort_key in INTER_OP.items():
        assert form.FIELD_BY_KEY[key].kind == "opt_int"
        assert f"`{key}` | `{ort_key}`" in keys_page
        assert ort_key in render(p, "python") and ort_key in render(p, "cpp") and ort_key in render(p, "csharp")
        assert ort_key in render(p, "perf-test") and ort_key in render(p, "olive")
    assert form.changes(p, {**form.form_values(p), "session.inter_op_spin_backoff_max": ""}) == {
        "session.inter_op_spin_backoff_max": None}


# ---- the profile-keys page ---------------------------------------------------------------------------------------
# docs/reference/profile-keys.md is generated (python -m ortop.cli.docgen) and checked for drift by
# tests/test_docs_reference.py; its table is the one printed here.


def test_markdown_command() -> None:
    out = subprocess.run([sys.executable, "-m", "ortop.config.docs", "--markdown"], capture_output=True, text=True,
                         check=True)
    assert out.stdout == docs.markdown_table()
    assert out.stderr == ""  # no runpy warning about the module being imported twice
    bad = subprocess.run([sys.executable, "-m", "ortop.config.docs"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--markdown" in bad.stderr


def test_bounds_refuse_values_orts_parsers_or_the_host_cannot_take() -> None:
    from ortop.config import profile as P
    from ortop.config.errors import ProfileError

    cases = {
        "[session]\ndynamic_block_base = 9223372036854775807\n": "dynamic_block_base",
        "[session]\nintra_op_num_threads = 2147483648\n": "intra_op_num_threads",
        "[session]\nspin_duration_us = 4294967296\n": "spin_duration_us",
        "[workload]\nconcurrency = 1000\n": "concurrency",
        "[workload]\nwarmup_runs = 100000000000\n": "warmup_runs",
        "[workload.dims]\nbatch = 4294967296\n": "batch",
    }
    for text, key in cases.items():
        with pytest.raises(ProfileError, match=key):
            P.loads(text)
    many = P.loads("[session]\nintra_op_num_threads = 1000\n")  # structurally fine: a host decides
    with pytest.raises(ProfileError, match="far above this host's 2 logical CPUs"):
        P.validate(many, host_cpus=2)
    P.validate(many, host_cpus=128)
    P.validate(P.loads("[session]\nintra_op_num_threads = 8\n"), host_cpus=2)  # above the CPUs: allowed
