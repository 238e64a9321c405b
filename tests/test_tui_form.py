"""The settings form's values, parsing and error keys, without the screen."""

from __future__ import annotations

import pytest

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.tui import form


def test_form_round_trips_a_profile() -> None:
    p = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 4,
                                        "session.intra_op_thread_affinities": [[1], [2, 3], [5]],
                                        "session.allow_spinning": False, "workload.rate_hz": 100.0,
                                        "env.OMP_NUM_THREADS": "1"})
    values = form.form_values(p)
    assert values["session.intra_op_thread_affinities"] == "1;2,3;5"
    assert values["session.allow_spinning"] == "off"
    assert values["session.spin_duration_us"] == ""
    assert form.changes(p, values) == {}
    assert form.build(p, values) == p


def test_form_changes_tri_states_and_blanks() -> None:
    p = Profile()
    values = form.form_values(p)
    values.update({"session.allow_spinning": "off", "session.dynamic_block_base": "4",
                   "env.OMP_WAIT_POLICY": "PASSIVE"})
    assert form.changes(p, values) == {"session.allow_spinning": False, "session.dynamic_block_base": 4,
                                       "env.OMP_WAIT_POLICY": "PASSIVE"}
    new = form.build(p, values)
    assert new.session.allow_spinning is False and new.env == {"OMP_WAIT_POLICY": "PASSIVE"}


def test_form_bad_number_names_its_field() -> None:
    values = form.form_values(Profile())
    values["session.intra_op_num_threads"] = "four"
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.changes(Profile(), values)
    assert exc.value.key == "session.intra_op_num_threads"


def test_form_affinity_count_mismatch_is_keyed_to_the_affinity_field() -> None:
    values = form.form_values(Profile())
    values["session.intra_op_num_threads"] = "3"
    values["session.intra_op_thread_affinities"] = "1"
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.build(Profile(), values)
    keys = [k for k, _ in form.error_keys(exc.value)]
    assert "session.intra_op_thread_affinities" in keys
    assert form.field_for("provider.options.gpu_mem_limit") == "provider.options.gpu_mem_limit"
    assert form.field_for("workload.dims.batch") is None


def test_cores_helper_spreads_one_core_per_pool_thread() -> None:
    assert form.parse_affinity("cores: 0-3", 4) == ((1,), (2,), (3,))  # core 0 left to the calling thread
    assert form.parse_affinity("cores: 4-6", 4) == ((4,), (5,), (6,))
    assert form.parse_affinity("1;2,3", 3) == ((1,), (2, 3))
    assert form.parse_affinity("", 3) is None
    assert form.affinity_preview("cores: 0-3", 4) == 'ORT: "2;3;4" (1-based)'
    assert form.affinity_preview("cores: 0-3", 1).startswith("✗")
    for bad in ("cores: 0-1Z", "1;x"):
        with pytest.raises(profile_mod.ProfileError) as exc:
            form.parse_affinity(bad, 3)
        assert exc.value.key == "session.intra_op_thread_affinities"


def test_cuda_options_need_the_cuda_provider() -> None:
    values = form.form_values(Profile())
    values["provider.options.gpu_mem_limit"] = "1000000"
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.changes(Profile(), values)
    assert exc.value.key == "provider.options.gpu_mem_limit"
    values["provider.name"] = "cuda"
    assert form.changes(Profile(), values)["provider.options.gpu_mem_limit"] == 1000000


@pytest.mark.parametrize("name", ["CUDAExecutionProvider", "CUDA", "cudaexecutionprovider"])
def test_the_full_provider_name_edits_cuda_fields_like_cuda(name: str) -> None:
    """A profile naming the provider in full (or in capitals) edits CUDA options, instead of being told to set the
    provider to cuda first."""
    p = profile_mod.merge(Profile(), **{"provider.name": name})
    values = form.form_values(p)
    assert values["provider.name"] == name
    values["provider.options.gpu_mem_limit"] = "1000000"
    values["provider.options.cudnn_conv_algo_search"] = "HEURISTIC"
    assert form.changes(p, values) == {"provider.options.gpu_mem_limit": 1000000,
                                       "provider.options.cudnn_conv_algo_search": "HEURISTIC"}
    new = form.build(p, values)
    assert new.provider.name == name
    assert new.provider.options == {"gpu_mem_limit": 1000000, "cudnn_conv_algo_search": "HEURISTIC"}
    values["provider.options.gpu_mem_limit"] = "-5"  # and its values are checked as for cuda
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.build(p, values)
    assert [k for k, _ in form.error_keys(exc.value)] == ["provider.options.gpu_mem_limit"]
    values["provider.options.gpu_mem_limit"] = "1000000"
    values["provider.name"] = "cpu"  # moving away from CUDA still refuses its options
    with pytest.raises(profile_mod.ProfileError, match="set provider to cuda first"):
        form.changes(p, values)


def test_blank_means_the_default_in_every_field() -> None:
    """One rule: intra-op threads refused a blank while spin duration took it as ORT's default."""
    p = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 3, "workload.rate_hz": 100.0,
                                        "session.spin_duration_us": 50, "workload.warmup_runs": 3})
    values = form.form_values(p)
    for key in ("session.intra_op_num_threads", "workload.rate_hz", "session.spin_duration_us", "provider.name",
                "workload.warmup_runs"):
        values[key] = "  "
    assert form.changes(p, values) == {"session.intra_op_num_threads": 0, "workload.rate_hz": 0.0,
                                       "session.spin_duration_us": None, "workload.warmup_runs": 10}
    assert {f.kind for f in form.FIELDS if f.kind not in ("tri", "bool", "choice")} <= set(form.PLACEHOLDER)


def test_a_huge_core_range_is_refused_without_being_built() -> None:
    """`0-99999999` typed into the affinity field froze the app while the range was expanded. Held by what was
    allocated (a hundred million cores would be hundreds of MB), not by a wall-clock bound."""
    import tracemalloc

    tracemalloc.start()
    try:
        for text in ("0-99999999", "cores: 0-99999999", "0-3;0-99999999", "9000"):
            with pytest.raises(profile_mod.ProfileError) as exc:
                form.parse_affinity(text, 4)
            assert exc.value.key == "session.intra_op_thread_affinities" and "beyond any host" in exc.value.message
            assert form.affinity_preview(text, 4).startswith("✗ core ")
        with pytest.raises(profile_mod.ProfileError, match="too long"):
            profile_mod.parse_core_list("0-7," * 40, host_cpus=2)  # more than 4 entries per logical CPU
        assert profile_mod.parse_core_list("0-7,0-3", host_cpus=4) == (0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20
