"""The worker's stderr read as events: ORT's own lines by their level, a few known-harmless warnings as info."""

from __future__ import annotations

from ortop.engine.events import worker_line


def test_ort_lines_keep_their_level_and_a_plain_line_is_info_unless_it_warns():
    w = "2026-11-26 23:47:59.812459196 [W:onnxruntime:Default, inference_session.cc:1 f] Some initializer is unused"
    assert worker_line(w) == ("warning", "ORT: Some initializer is unused")
    e = "2026-11-26 23:47:59.8 [E:onnxruntime:, provider_bridge_ort.cc:2043 Get] Failed to load library x.so"
    assert worker_line(e) == ("error", "ORT: Failed to load library x.so")
    assert worker_line("numpy: WARNING something") == ("warning", "worker: numpy: WARNING something")
    assert worker_line("loaded") == ("info", "worker: loaded")


def test_the_plugin_ep_registry_line_that_comes_with_every_cuda_session_is_not_a_warning():
    line = ("2026-11-26 23:47:59.812459196 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:856 operator()] "
            "No registered plugin EP device found for 'CUDAExecutionProvider' with device_id=0")
    assert worker_line(line) == ("info", "ORT: No registered plugin EP device found for 'CUDAExecutionProvider' "
                                         "with device_id=0")
    other = line.replace("No registered plugin EP device found", "No device found")
    assert worker_line(other)[0] == "warning"
