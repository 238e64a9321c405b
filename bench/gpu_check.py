"""Do ortop's CUDA paths do on a real GPU what ONNX Runtime's source says they should? A script to run on a GPU host.

    python bench/gpu_check.py [--model MODEL.onnx] [--device-id 0] [--runs 200]

It works on the demo model, a fixed-shape convolution model and a control-flow model (If), both built here with
onnx.helper (plus MODEL, when given, for the IO-binding and graph checks), and prints one line per check:

  cuda-active        a CUDA session is made and CUDA is among its active providers (the CUDA libraries preloaded
                     through onnxruntime.preload_dlls() first, as ortop's worker does)
  cuda-option NAME   each CUDA provider option ortop knows, as ortop passes it, read back from get_provider_options()
  io-binding MODEL   ortop's IO-binding path (runtime.session) against plain run(): outputs equal, median times
  cuda-graph MODEL   ortop's graph path: first run (the capture) against the median of later runs (replays), the
                     outputs equal to a session without graphs, and a new input copied in place read by the replay
  cuda-graph-headless  ``ortop --headless`` with profiles/cuda-graph.toml on the demo model: runs, CUDA active
  control-flow       enable_cuda_graph on the If model: refused with a clear message, by ORT and by ortop (one line)
  nvml-memory        a real ortop worker's GPU memory from NVML (ortop's collector) against
                     ``nvidia-smi --query-compute-apps=pid,used_memory --format=csv``
  mem-limit          gpu_mem_limit caps the CUDA arena: a run needing more than the cap fails, one under it passes
  export NAME        the Python export of each shipped CUDA profile (profiles/cuda-*.toml), run in a fresh
                     interpreter: the session has CUDA active and its outputs match the CPU's

Each line reads ``PASS``, ``FAIL`` or ``SKIP``, the check's name and what was seen. Checks are independent: one that
fails (or raises) does not stop the others. Exit status: 0 when nothing failed, 1 when a check failed; on a host
where CUDA is not active (no GPU, no driver, the CUDA libraries missing) it says so in one line and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
IR, OPSET = 10, 17

results: list[tuple[str, str, str]] = []


def say(status: str, name: str, detail: str) -> None:
    results.append((status, name, detail))
    print(f"{status:4} {name}: {detail}", flush=True)


def check(name: str, fn: Callable[[], tuple[str, str] | None]) -> None:
    """Run one check; its exception is a FAIL line with the error, never the end of the script."""
    try:
        out = fn()
    except Exception as exc:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
        say("FAIL", name, detail)
        if os.environ.get("GPU_CHECK_DEBUG"):
            traceback.print_exc()
        return
    if out is not None:
        say(out[0], name, out[1])


@contextlib.contextmanager
def quiet() -> Iterator[list[str]]:
    """fd 1 and 2 (ORT's C++ log, preload_dlls' prints) into a buffer for the duration; the lines are kept."""
    lines: list[str] = []
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            tmp.seek(0)
            lines.extend(ln for ln in tmp.read().decode("utf-8", "replace").splitlines() if ln.strip())


# ---- models ---------------------------------------------------------------------------------------------------------
def conv_model(path: Path) -> str:
    """x [1, 32, 64, 64] -> 3 x (Conv 3x3 + Relu) -> y: fixed shapes, every node on CUDA."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(3):
        w = (rng.standard_normal((32, 32, 3, 3)) / np.sqrt(32 * 9)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}" if i < 2 else "y"])]
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 64, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 64, 64])], inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR), path)


def if_model(path: Path) -> str:
    """cond (bool), x [16] -> If(cond) {x + x} else {x * x} -> y: control flow, which CUDA graphs cannot hold."""
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [], [vi("t", TensorProto.FLOAT,
                                                                                          [16])])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["e"])], "else", [], [vi("e", TensorProto.FLOAT,
                                                                                          [16])])
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)
    graph = helper.make_graph([node], "if", [vi("cond", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [16])],
                              [vi("y", TensorProto.FLOAT, [16])])
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR), path)


def big_model(path: Path, mib: int) -> str:
    """x [1] -> Expand to ``mib`` MiB of float32 -> ReduceSum -> y [1]: one intermediate of that size on the GPU."""
    from onnx import TensorProto, helper, numpy_helper

    n = mib * 1024 * 1024 // 4
    shape = numpy_helper.from_array(np.array([n], np.int64), "shape")
    nodes = [helper.make_node("Expand", ["x", "shape"], ["big"]),
             helper.make_node("ReduceSum", ["big"], ["y"], keepdims=1)]
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], [shape])
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR), path)


def _save(model, path: Path) -> str:
    import onnx

    onnx.save(model, str(path))
    return str(path)


# ---- helpers --------------------------------------------------------------------------------------------------------
def profile(model: str, **dotted):
    from ortop.config import profile as pm

    return pm.merge(pm.Profile(model=model), **dotted)


def shipped(name: str, model: str, **dotted):
    from ortop.config import profile as pm

    return pm.merge(replace(pm.load(REPO / "profiles" / f"{name}.toml"), model=model), **dotted)


def session_of(prof):
    from ortop import model as model_mod
    from ortop.runtime.session import Session

    return Session(prof, model_mod.load_model(prof.model))


def timed(s, n: int) -> tuple[float, list[np.ndarray]]:
    """Median ms of ``n`` runs of ortop's runner, on the session's own server thread; the outputs after."""
    def job():
        run = s.runner(0)
        times = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            out = run()
            times.append(time.perf_counter_ns() - t0)
        return float(np.median(times)) / 1e6, outputs(s, out)

    return s.servers[0].call(job)


def outputs(s, out) -> list[np.ndarray]:
    if s.io_binding:
        return [np.asarray(v) for v in s.binding(0).copy_outputs_to_cpu()]
    return [np.asarray(v) for v in out]


def close(a, b, rtol: float = 1e-3, atol: float = 1e-4) -> str | None:
    """None when the output lists agree; else what differs."""
    if len(a) != len(b):
        return f"{len(a)} outputs against {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            return f"output {i}: shape {x.shape} against {y.shape}"
        if not np.allclose(x, y, rtol=rtol, atol=atol):
            return f"output {i}: max abs difference {float(np.max(np.abs(x - y))):.3g}"
    return None


def ortop_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ortop", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


# ---- the checks -----------------------------------------------------------------------------------------------------
class Checks:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        from ortop.model.demo import ensure_demo

        self.args = args
        self.demo = str(ensure_demo())
        self.conv = conv_model(work / "conv.onnx")
        self.cf = if_model(work / "if.onnx")
        self.work = work
        self.models = {"demo": self.demo, "conv": self.conv}
        if args.model:
            self.models["model"] = args.model
        self.dev = {"device_id": args.device_id}

    def cuda_options(self) -> None:
        import onnxruntime as ort

        from ortop.config import knobs
        from ortop.config.ort_names import provider_list

        for knob in knobs.registry():
            if knob.provider != "cuda":
                continue
            name = knob.ort_name
            if knob.type is bool:
                value: object = True
            elif name == "device_id":
                value = self.args.device_id
            elif name == "gpu_mem_limit":
                value = 1 << 30
            elif knob.type is int:
                value = 100
            elif knob.choices:
                value = knob.choices[-1]
            else:
                say("SKIP", f"cuda-option {name}", f"no test value for a {knob.type.__name__} option")
                continue

            def one(name=name, value=value, key=knob.key):
                # CUDA graphs replay fixed device addresses: ortop asks for IO binding with them
                bound = {"provider.io_binding": True} if name == "enable_cuda_graph" else {}
                prof = profile(self.demo, **{"provider.name": "cuda", key: value,
                                             "provider.options.device_id": self.args.device_id, **bound})
                asked = prof.provider_options()[name]
                with quiet() as log:
                    try:
                        sess = ort.InferenceSession(self.demo, providers=provider_list(prof))
                    except Exception as exc:
                        return "FAIL", f"asked {asked!r}: the session was refused: {' '.join(str(exc).split())[:200]}"
                if CUDA not in sess.get_providers():
                    return "FAIL", f"asked {asked!r}: CUDA not active ({'; '.join(log[-2:])})"
                got = sess.get_provider_options()[CUDA].get(name)
                if got is None:  # onnxruntime 1.31 builds the session with enable_skip_layer_norm_strict_mode
                    #              but leaves it out of get_provider_options(): nothing to read back
                    return "SKIP", f"asked {asked!r}: the session took it, but this ORT does not report it back"
                return ("PASS" if got == asked else "FAIL"), f"asked {asked!r}, ORT reports {got!r}"

            check(f"cuda-option {name}", one)

    def io_binding(self, label: str, model: str) -> tuple[str, str]:
        plain = session_of(profile(model, **{"provider.name": "cuda", "provider.options": self.dev,
                                             "workload.warmup_runs": 5}))
        bound = session_of(profile(model, **{"provider.name": "cuda", "provider.options": self.dev,
                                             "provider.io_binding": True, "workload.warmup_runs": 5}))
        try:
            for s in (plain, bound):
                if CUDA not in s.providers_active:
                    return "FAIL", f"CUDA not active: {s.providers_active}"
                s.warm()
            t_plain, out_plain = timed(plain, self.args.runs)
            t_bound, out_bound = timed(bound, self.args.runs)
            diff = close(out_bound, out_plain, 1e-4, 1e-5)
            said = f"run() {t_plain:.3f} ms, IO binding {t_bound:.3f} ms (median of {self.args.runs})"
            return ("FAIL", f"outputs differ: {diff}; {said}") if diff else ("PASS", f"outputs equal; {said}")
        finally:
            plain.close()
            bound.close()

    def cuda_graph(self, label: str, model: str) -> tuple[str, str]:
        from ortop.runtime.iobind import SKIP_CAPTURE

        graph = session_of(shipped("cuda-graph", model, **{"provider.options.device_id": self.args.device_id,
                                                           "workload.warmup_runs": 1}))
        ref = session_of(profile(model, **{"provider.name": "cuda", "provider.options": self.dev,
                                           "provider.io_binding": True, "workload.batch": 1,
                                           "workload.warmup_runs": 3}))
        try:
            if not graph.graphs:
                return "FAIL", f"the graph path is off (providers {graph.providers_active}, device {graph.device})"
            first_ns, _ = graph.warm()  # the first run of the server thread captures
            ref.warm()
            replay_ms, out_graph = timed(graph, self.args.runs)
            ref_ms, out_ref = timed(ref, self.args.runs)
            diff = close(out_graph, out_ref)
            if diff:
                return "FAIL", f"graph outputs differ from a session without graphs: {diff}"
            # New input data, copied into the bound buffer in place: the replay must read it.
            b, rb = graph.bound(0, 0), ref.bound(0, 0)
            new = {k: (np.asarray(v) * 0.5 + 0.25).astype(v.dtype) for k, v in graph.feeds.items()}
            graph.servers[0].call(lambda: (b.refresh(new), graph.runner(0)()))
            ref.servers[0].call(lambda: (rb.refresh(new), ref.runner(0)()))
            diff = close(outputs(graph, None), outputs(ref, None))
            if diff:
                return "FAIL", f"after a new input in place the replay differs: {diff}"
            assert b.run_options.get_run_config_entry("gpu_graph_id") == "1" and SKIP_CAPTURE == -1
            return "PASS", (f"first run (capture) {first_ns / 1e6:.2f} ms, replays {replay_ms:.3f} ms median; "
                            f"without graphs {ref_ms:.3f} ms; outputs equal, new inputs read in place")
        finally:
            graph.close()
            ref.close()

    def graph_headless(self) -> tuple[str, str]:
        out = ortop_cli(self.demo, "--profile", str(REPO / "profiles" / "cuda-graph.toml"), "--headless",
                        "--duration", "3", "--json")
        if out.returncode != 0:
            return "FAIL", f"exit {out.returncode}: {out.stderr.strip()[-300:]}"
        data = json.loads(out.stdout)
        if CUDA not in data.get("providers_active", []):
            return "FAIL", f"providers active: {data.get('providers_active')}"
        lat = data["latency_ms"]
        return "PASS", (f"{data['runs']} runs, p50 {lat['p50']:.3f} ms, p99 {lat['p99']:.3f} ms, first run "
                        f"{data['session']['first_run_ms']:.1f} ms")

    def control_flow(self) -> tuple[str, str]:
        import onnxruntime as ort

        with quiet():
            try:
                ort.InferenceSession(self.cf, providers=[(CUDA, {"enable_cuda_graph": "1",
                                                                 "device_id": str(self.args.device_id)}), CPU])
                refused = ""
            except Exception as exc:
                refused = " ".join(str(exc).split())
        if not refused:
            return "FAIL", "ORT made a graph-enabled session of a model with If"
        out = ortop_cli(self.cf, "--profile", str(REPO / "profiles" / "cuda-graph.toml"), "--headless",
                        "--duration", "1")
        lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
        ok = out.returncode in (1, 2) and len(lines) == 1 and "Traceback" not in out.stderr
        detail = f"ORT: {refused[:160]}; ortop: exit {out.returncode}, {lines[-1][:160] if lines else 'nothing said'}"
        return ("PASS" if ok else "FAIL"), detail

    def nvml_memory(self) -> tuple[str, str]:
        import threading

        from ortop.collectors.gpu import NvmlGpuCollector
        from ortop.engine.workerproc import WorkerProc
        from ortop.runtime import protocol as P

        smi = shutil.which("nvidia-smi")
        if smi is None:
            return "SKIP", "nvidia-smi is not on PATH"
        done = threading.Event()
        seen: list = []

        def on_message(msg):
            seen.append(msg)
            if isinstance(msg, (P.Built, P.BuildFailed)):
                done.set()

        w = WorkerProc(self.conv, {}, on_message)
        w.start()
        try:
            prof = profile(self.conv, **{"provider.name": "cuda", "provider.options": self.dev,
                                         "workload.warmup_runs": 20})
            w.send(P.Build(1, prof.to_dict(full=True)))
            if not done.wait(120):
                return "FAIL", "the worker did not build in 120 s"
            built = next(m for m in seen if isinstance(m, (P.Built, P.BuildFailed)))
            if isinstance(built, P.BuildFailed):
                return "FAIL", f"the worker could not build: {built.message}"
            pid = w.pid
            time.sleep(1.0)
            col = NvmlGpuCollector(pid=pid)
            sample = col.sample()
            col.close()
            nvml = [d.process_mem for d in sample.devices if d.process_mem is not None]
            q = subprocess.run([smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=30)
            smi_mib = [int(parts[1]) for parts in (ln.split(",") for ln in q.stdout.splitlines())
                       if len(parts) == 2 and parts[0].strip() == str(pid) and parts[1].strip().isdigit()]
        finally:
            w.stop()
        if not nvml and not smi_mib:
            return "SKIP", (f"pid {pid} listed by neither NVML nor nvidia-smi (a container reports host pids): "
                            f"{sample.pid_note or sample.status}")
        if not nvml or not smi_mib:
            return "FAIL", f"pid {pid}: NVML {nvml}, nvidia-smi {smi_mib} MiB ({sample.pid_note or sample.status})"
        a, b = sum(nvml) / 2**20, sum(smi_mib)
        return ("PASS" if abs(a - b) <= 1 else "FAIL"), f"worker pid {pid}: NVML {a:.0f} MiB, nvidia-smi {b} MiB"

    def mem_limit(self) -> tuple[str, str]:
        import onnxruntime as ort

        model = big_model(self.work / "big.onnx", 512)
        x = {"x": np.ones(1, np.float32)}

        def run(limit: int) -> str:
            providers = [(CUDA, {"device_id": str(self.args.device_id), "gpu_mem_limit": str(limit),
                                 "arena_extend_strategy": "kSameAsRequested"}), CPU]
            with quiet():
                sess = ort.InferenceSession(model, providers=providers)
                if CUDA not in sess.get_providers():
                    return "CUDA not active"
                try:
                    (y,) = sess.run(None, x)
                except Exception as exc:
                    return "refused: " + " ".join(str(exc).split())[:160]
            return f"ran (sum {float(y[0]):.0f})"

        capped, roomy = run(256 << 20), run(2 << 30)
        ok = capped.startswith("refused") and roomy.startswith("ran")
        return ("PASS" if ok else "FAIL"), f"512 MiB intermediate, cap 256 MiB: {capped}; cap 2 GiB: {roomy}"

    def export(self, name: str) -> tuple[str, str]:
        from ortop.config import profile as pm
        from ortop.export import render

        prof = pm.load(REPO / "profiles" / f"{name}.toml")
        prof = pm.merge(prof, **{"provider.options.device_id": self.args.device_id})
        path = self.work / f"export_{name.replace('-', '_')}.py"
        path.write_text(render(prof, "python", model_path=self.demo))
        driver = textwrap.dedent("""
            import importlib.util, json, sys, warnings
            import numpy as np
            import onnxruntime as ort
            spec = importlib.util.spec_from_file_location("exported", sys.argv[1])
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sess = mod.make_session(strict=True)
            cpu = ort.InferenceSession(mod.MODEL_PATH, providers=["CPUExecutionProvider"])
            rng = np.random.default_rng(0)
            worst = 0.0
            for _ in range(3):  # with a graph: the capture, then replays of new inputs copied in place
                feeds = {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape])
                         .astype(np.float32) for i in sess.get_inputs()}
                got = mod.run_with_io_binding(sess, feeds) if hasattr(mod, "run_with_io_binding") \\
                    else sess.run(None, feeds)
                want = cpu.run(None, feeds)
                worst = max(worst, max(float(np.max(np.abs(g - w) / (np.abs(w) + 1e-3))) for g, w in zip(got, want)))
            print(json.dumps({"providers": sess.get_providers(), "worst": worst}))
        """)
        out = subprocess.run([sys.executable, "-c", driver, str(path)], capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            return "FAIL", f"exit {out.returncode}: {out.stderr.strip().splitlines()[-1][:300] if out.stderr else ''}"
        data = json.loads(out.stdout.strip().splitlines()[-1])
        ok = data["providers"][0] == CUDA and data["worst"] < 1e-2
        return ("PASS" if ok else "FAIL"), (f"providers {data['providers']}, largest relative difference from the "
                                            f"CPU {data['worst']:.2g}")


def cuda_status(device_id: int, demo: str) -> str | None:
    """None when a CUDA session is active here; else why not, in one line."""
    import onnxruntime as ort

    from ortop.runtime.child import preload_cuda_libraries

    problem = preload_cuda_libraries(lambda text: None)
    if CUDA not in ort.get_available_providers():
        return f"this onnxruntime ({ort.__version__}) has no CUDA provider (install onnxruntime-gpu)"
    so = ort.SessionOptions()
    so.log_severity_level = 4
    with quiet() as log:
        try:
            sess = ort.InferenceSession(demo, sess_options=so, providers=[(CUDA, {"device_id": str(device_id)}), CPU])
            active = sess.get_providers()
        except Exception as exc:
            return f"no CUDA session could be made: {' '.join(str(exc).split())[:200]}"
    if CUDA in active:
        return None
    why = problem or next((ln for ln in reversed(log) if "cuda" in ln.lower() or "error" in ln.lower()), "")
    return f"CUDA is not active on this host (no GPU, driver or CUDA libraries{': ' + why[:200] if why else ''})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="also run the IO-binding and CUDA-graph checks on this model")
    ap.add_argument("--device-id", type=int, default=0, help="the CUDA device to check (default 0)")
    ap.add_argument("--runs", type=int, default=200, help="timed runs per median (default 200)")
    args = ap.parse_args(argv)
    if args.model and not os.path.isfile(args.model):
        print(f"gpu_check: --model {args.model}: no such file", file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO / "src"))
    from ortop.model.demo import ensure_demo

    why = cuda_status(args.device_id, str(ensure_demo()))
    if why is not None:
        print(f"gpu_check: {why}; nothing to check")
        return 0
    with tempfile.TemporaryDirectory(prefix="ortop-gpu-check-") as tmp:
        c = Checks(args, Path(tmp))
        check("cuda-active", lambda: ("PASS", f"onnxruntime {__import__('onnxruntime').__version__}, device "
                                              f"{args.device_id}: {gpu_name(args.device_id)}"))
        c.cuda_options()
        for label, model in c.models.items():
            check(f"io-binding {label}", lambda m=model, n=label: c.io_binding(n, m))
        for label, model in c.models.items():
            check(f"cuda-graph {label}", lambda m=model, n=label: c.cuda_graph(n, m))
        check("cuda-graph-headless", c.graph_headless)
        check("control-flow", c.control_flow)
        check("nvml-memory", c.nvml_memory)
        check("mem-limit", c.mem_limit)
        for p in sorted((REPO / "profiles").glob("cuda-*.toml")):
            check(f"export {p.stem}", lambda n=p.stem: c.export(n))
    failed = [r for r in results if r[0] == "FAIL"]
    passed = sum(1 for r in results if r[0] == "PASS")
    skipped = sum(1 for r in results if r[0] == "SKIP")
    print(f"gpu_check: {passed} passed, {len(failed)} failed, {skipped} skipped")
    return 1 if failed else 0


def gpu_name(device_id: int) -> str:
    """The name of CUDA device ``device_id`` as NVML gives it (ortop's collector, mapped through UUIDs and PCI bus
    ids: NVML numbers GPUs otherwise than CUDA), or a word why not."""
    from ortop.collectors.cuda import cuda_device
    from ortop.collectors.gpu import NvmlGpuCollector

    col = NvmlGpuCollector()
    try:
        sample = col.sample()
    finally:
        col.close()
    found = cuda_device(sample.devices, device_id, os.environ)
    if found.device is None:
        return f"(NVML: {found.note or sample.status})"
    return found.device.name + (f" ({found.note})" if found.note else "")


if __name__ == "__main__":
    sys.exit(main())
