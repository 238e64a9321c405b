"""The knob registry: one declaration per profile setting, and every surface reads it.

Each :class:`Knob` says what a setting is (dotted key, type, domain, default), where it goes in ONNX Runtime (a
SessionOptions attribute, a session config entry, a provider option, an environment variable, the global thread
pools, or ortop's own workload), whether changing it needs a fresh worker process, and its face: how the settings
form shows it, its short label and how its value reads in one-line summaries (the settings line, change lines, the
tuner's candidate labels), its command-line flag, and the metric a change of it is judged on. Profile reading and
validation, ``session_options()``, the exporters, the form, the flags, :func:`ortop.config.diff.diff` and the README's
profile table all iterate :data:`REGISTRY`, so a knob declared here with a generic target (a config entry, a
SessionOptions attribute) reaches all of them with no other edit; the face's fields derive from the key and type
when left out. Exporter spellings that cannot be derived (a perf_test flag, a C++ setter) live in tables keyed by
the knob's key inside each exporter.

Over ~540 lines: the registry is one list of declarations, read and changed together.

The registry is looked up at call time (:func:`registry`), so a test can swap :data:`REGISTRY` for a longer tuple.
This module imports neither onnxruntime nor textual. ``python -m ortop.config.docs --markdown`` prints the
profile-key table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ortop.config.values import (
    affinity_string,
    callers_text,
    env_text,
    human,
    ort_str,
    pinned_text,
    unset_text,
    zero_is_default,
)
from ortop.present import hz_text

# ---- where a knob goes ----------------------------------------------------------------------------------------
SESSION_OPTION = "SessionOptions"        # an attribute of onnxruntime.SessionOptions (ort_name)
CONFIG_ENTRY = "config entry"            # SessionOptions.add_session_config_entry(ort_name, value)
PROVIDER = "provider"                    # which execution provider InferenceSession gets
PROVIDER_OPTION = "provider option"      # an entry of the provider's option map
ENV = "env"                              # the worker's environment, set before it starts
GLOBAL_POOL = "global pool"              # set_global_thread_pool_sizes: once per process
WORKLOAD = "workload"                    # ortop's own (how it drives the model), not an ORT setting
TARGETS = (SESSION_OPTION, CONFIG_ENTRY, PROVIDER, PROVIDER_OPTION, ENV, GLOBAL_POOL, WORKLOAD)

# Value types of map knobs beyond plain Python types: any non-table value, and a list of whole numbers.
SCALAR = "scalar"
SHAPE = "shape"

EXECUTION_MODES = ("sequential", "parallel")
OPT_LEVELS = ("disable", "basic", "extended", "layout", "all")
ARENA_STRATEGIES = ("kNextPowerOfTwo", "kSameAsRequested")
CONV_ALGO_SEARCH = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")
ARRIVAL_MODES = ("closed", "fixed", "poisson", "trace")

TuneValues = tuple[Any, ...] | Callable[[int], tuple[Any, ...]]


# Upper bounds: ORT reads config entries with stoi and takes thread counts as C ints, so values past INT32_MAX end
# in a raw IndexError or a pybind type error; thread counts far past any host hang in ORT's pool set-up; a warm-up
# or a caller count in the millions never ends. Host-dependent limits (threads against this host's CPUs) are
# checked by validate() when it is given the host's CPU count.
INT32_MAX = 2**31 - 1
MAX_THREADS = 4096
MAX_CALLERS = 256
MAX_REPLICAS = 64
MAX_WARMUP_RUNS = 1_000_000
MAX_RATE_HZ = 1_000_000.0

# The metrics a change can be judged on (``ortop.measure.compare`` names), and where a knob shows at a glance.
VERDICT_METRICS = ("cpu", "p99", "throughput", "p50")
GLANCE = ("always", "set")


@dataclass(frozen=True)
class Flag:
    """A knob's command-line flag (``ortop MODEL``, ``compare``, ``tune``, ``doctor``, ``ops``): it overrides the
    profile's value.

    A bool's flag stores True, or False when its name starts with ``--no-``. Left out, ``metavar`` is ``N`` for
    whole numbers and ``X`` for other numbers, ``help`` the knob's help, and ``group`` the help's "workload" group
    for workload knobs (the top of the help for the rest). ``session``: only on the commands that take the quick
    session knobs (``ortop MODEL``, ``ops``). An empty ``name`` means no flag.
    """

    name: str
    metavar: str = ""
    help: str = ""
    group: str | None = None
    session: bool = False

    @property
    def dest(self) -> str:
        """The argparse attribute the flag's value lands in (``--inter-threads`` → ``inter_threads``)."""
        return self.name.lstrip("-").replace("-", "_")


NO_FLAG = Flag("")


@dataclass(frozen=True)
class Knob:
    """One setting, declared once.

    Attributes:
        key: dotted profile key (``session.intra_op_num_threads``); the TOML table is everything before the last dot.
        type: ``bool``, ``int``, ``float`` or ``str``; ``tuple`` for a thread affinity; ``dict`` for a map.
        default: the value when the profile leaves the key out (``None``: ORT's own default applies, or for an
            ortop knob what ``unset`` says).
        target: where the value goes (one of :data:`TARGETS`).
        ort_name: the name at the target: attribute, config key, provider option or variable name.
        optional: ``None`` is a value ("leave ORT's default"): tri-state bools, blank numbers.
        unset: what ``None`` means when it is not ORT's default (a workload knob ortop decides), in a few words
            (``closed, or fixed when rate_hz is set``); "" for ORT's default.
        minimum: lowest allowed number, if any. maximum: highest, if any.
        choices: the allowed strings, if the value is one of a fixed set.
        note: what the lower bound means, quoted in its error ("0 = ORT's default").
        values: for maps, the type of each value (``str``, ``int``, ``float``, :data:`SCALAR` or :data:`SHAPE`).
        ort_enum: for choices, the ORT enum type each names (``ExecutionMode``).
        provider: for provider options, the provider (short name) that knows them.
        restarts: changing it needs a fresh worker process (environment, global thread pools).
        help: one line on what it does, for the README and docs.
        label: the settings form's short label. section: the form section ("" keeps it out of the form).
        hint: the form's hint beside the control.
        tune_values: what a tuner may try: a tuple, a callable of the host's CPU count, or () when not tunable.
        short: the label in one-line summaries and the tuner's candidate labels (``threads``, ``spin``, ``dbb``);
            left out: the form's label, else the key's last part with spaces.
        display: how a value reads there (``closed loop`` for a rate of 0); left out: ``values.human``.
        term: the one-line form, from ``{label}`` and ``{value}``; left out: ``"{label} {value}"``.
        glance: ``always`` (the settings line shows it), ``set`` (shows it when it is not the default) or "".
        flag: its command-line flag (:class:`Flag`); left out, a single-valued workload knob gets ``--name`` and
            every other knob none; :data:`NO_FLAG` for none.
        verdict: the metric a change of it is judged on (one of :data:`VERDICT_METRICS`); left out, a spin knob
            (``spin`` in its name) is judged on CPU per run at a paced rate (what spinning costs is CPU between
            runs, invisible in a closed loop), every other on the workload's own metric (throughput with
            concurrent callers, else p50).
    """

    key: str
    type: type
    default: Any = None
    target: str = WORKLOAD
    ort_name: str = ""
    optional: bool = False
    unset: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    note: str = ""
    values: Any = None
    ort_enum: str = ""
    provider: str = ""
    restarts: bool = False
    help: str = ""
    label: str = ""
    section: str = ""
    hint: str = ""
    tune_values: TuneValues = ()
    short: str = ""
    display: Callable[[Any], str] | None = None
    term: str = ""
    glance: str = ""
    flag: Flag | None = None
    verdict: str = ""

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"knob {self.key}: unknown target {self.target!r}")
        if self.verdict and self.verdict not in VERDICT_METRICS:
            raise ValueError(f"knob {self.key}: unknown verdict metric {self.verdict!r}")
        if self.glance and self.glance not in GLANCE:
            raise ValueError(f"knob {self.key}: unknown glance {self.glance!r}")

    @property
    def name(self) -> str:
        """The last part of the key: the attribute or table entry name."""
        return self.key.rpartition(".")[2]

    @property
    def table(self) -> str:
        """The TOML table holding the key ("" for top level, ``session``, ``provider.options``)."""
        return self.key.rpartition(".")[0]

    @property
    def is_map(self) -> bool:
        """A table of free-form entries ([session.config], [env]) rather than one value."""
        return self.type is dict

    def read(self, profile: Any) -> Any:
        """This knob's value in ``profile``; an entry of a map (a CUDA option, an env variable) is None when absent."""
        parent = find(self.table) if self.table else None
        if parent is not None and parent.is_map:
            return parent.read(profile).get(self.name)
        node = profile
        for part in self.key.split("."):
            node = getattr(node, part)
        return node

    def ort_value(self, value: Any) -> str:
        """The string ORT's config and option maps take for ``value``."""
        if self.type is tuple:
            return affinity_string(value)
        return ort_str(value)

    def tune(self, host_cpus: int) -> tuple[Any, ...]:
        """The values a tuner may try on a host with ``host_cpus`` logical CPUs (empty: not tunable)."""
        return self.tune_values(host_cpus) if callable(self.tune_values) else tuple(self.tune_values)

    # ---- its face ----
    @property
    def short_label(self) -> str:
        """The label in one-line summaries (``threads``, ``spin``, ``dbb``)."""
        return self.short or self.label or self.name.replace("_", " ")

    def show(self, value: Any) -> str:
        """``value`` as one-line summaries read it (``closed loop``, ``×2 callers``, ``off``)."""
        return self.display(value) if self.display is not None else human(value)

    def term_text(self, value: Any) -> str:
        """The knob at ``value`` in a few words: ``threads 2``, ``spin off``, ``100 Hz``."""
        return (self.term or "{label} {value}").format(label=self.short_label, value=self.show(value))

    @property
    def judged_on(self) -> str:
        """The declared verdict metric, or "cpu" for a spin knob, or "" (the workload's own metric)."""
        return self.verdict or ("cpu" if "spin" in self.name else "")

    def metric(self, rate_hz: float, concurrency: int) -> str:
        """The metric a change of this knob is judged on under a workload: CPU per run for a "cpu" knob at a
        paced rate, the declared metric, else throughput with concurrent callers and p50 without."""
        judged = self.judged_on
        if judged == "cpu" and rate_hz > 0 or judged not in ("", "cpu"):
            return judged
        return "throughput" if concurrency > 1 else "p50"

    @property
    def cli_flag(self) -> Flag | None:
        """Its command-line flag, declared or derived (``workload.max_queue`` → ``--max-queue``); None: none."""
        if self.flag is not None:
            return self.flag if self.flag.name else None
        if self.table == "workload" and not self.is_map and not is_entry(self):
            return Flag("--" + self.name.replace("_", "-"))
        return None


def host_threads(cpus: int) -> tuple[int, ...]:
    """Thread counts worth trying on a host: powers of two up to its CPU count, and the count itself."""
    out, n = [], 1
    while n < cpus:
        out.append(n)
        n *= 2
    return (*out, max(cpus, 1))


_T = "Threads"
_SPIN = "Spinning"
_MEM = "Graph and memory"
_POOLS = "Global thread pools"
_LOG = "Logging"
_PROV = "Provider"
_CUDA = "CUDA (provider cuda)"
_ENV = "Environment"
_WL = "Workload"
_ORT_DEFAULT = "0 = ORT's default"


# The C types ORT's CUDA provider parses its integer options into (cuda_execution_provider_info.h): the device
# is an OrtDevice::DeviceId (int16_t), the arena limit a size_t, the rest ints.
INT16_MAX = 2**15 - 1
SIZE_T_MAX = 2**64 - 1


def _cuda(name: str, type_: type, help_: str, *, choices: tuple[str, ...] = (), hint: str = "",
          short: str = "", maximum: float | None = None) -> Knob:
    """A CUDA provider option: absent means ORT's default, so it is optional, and numbers are never negative nor
    past the C type ORT parses them into (an int unless ``maximum`` says otherwise)."""
    if type_ is int and maximum is None:
        maximum = INT32_MAX
    return Knob(f"provider.options.{name}", type_, None, PROVIDER_OPTION, name, optional=True,
                minimum=0 if type_ is int else None, maximum=maximum, choices=choices, provider="cuda", help=help_,
                label=name, section=_CUDA, hint=hint, tune_values=choices, short=short)


def _env(name: str, help_: str, hint: str = "", *, verdict: str = "") -> Knob:
    """A known environment variable: set in the worker's environment, so changing it restarts the worker."""
    return Knob(f"env.{name}", str, None, ENV, name, optional=True, restarts=True, help=help_, label=name,
                section=_ENV, hint=hint, term="{label}={value}", verdict=verdict)


REGISTRY: tuple[Knob, ...] = (
    Knob("model", str, "", WORKLOAD, help="the model path (relative to the profile file)"),
    Knob("description", str, "", WORKLOAD, help="one line shown by `ortop profiles list`"),
    # ---- session ----
    Knob("session.intra_op_num_threads", int, 0, SESSION_OPTION, "intra_op_num_threads", minimum=0, maximum=MAX_THREADS,
         note=_ORT_DEFAULT, help="threads inside one operator; 0 = ORT's default (physical cores)",
         label="intra-op threads", section=_T, hint="0 = ORT's default (physical cores)", tune_values=host_threads,
         short="threads", display=zero_is_default, glance="always",
         flag=Flag("--threads", "N", "intra-op threads (0 = ORT's default)", session=True)),
    Knob("session.inter_op_num_threads", int, 0, SESSION_OPTION, "inter_op_num_threads", minimum=0, maximum=MAX_THREADS,
         note=_ORT_DEFAULT, help="threads running independent nodes at once (parallel mode)",
         label="inter-op threads", section=_T, hint="0 = default; used in parallel mode", tune_values=(0, 2, 4),
         short="inter-op", display=zero_is_default, glance="set",
         flag=Flag("--inter-threads", "N", "inter-op threads", session=True)),
    Knob("session.execution_mode", str, "sequential", SESSION_OPTION, "execution_mode", choices=EXECUTION_MODES,
         ort_enum="ExecutionMode", help="run nodes one at a time or independent ones at once",
         label="execution mode", section=_T, tune_values=EXECUTION_MODES, short="mode", term="{value}", glance="set"),
    Knob("session.graph_optimization_level", str, "all", SESSION_OPTION, "graph_optimization_level",
         choices=OPT_LEVELS, ort_enum="GraphOptimizationLevel", help="graph rewrites before the first run",
         label="optimization", section=_MEM, tune_values=("basic", "extended", "all")),
    Knob("session.enable_cpu_mem_arena", bool, True, SESSION_OPTION, "enable_cpu_mem_arena",
         help="pool CPU allocations in an arena", label="CPU memory arena", section=_MEM,
         tune_values=(True, False), short="arena"),
    Knob("session.enable_mem_pattern", bool, True, SESSION_OPTION, "enable_mem_pattern",
         help="plan allocations from the first run's pattern", label="memory pattern", section=_MEM,
         tune_values=(True, False), short="mem pattern"),
    Knob("session.enable_mem_reuse", bool, True, SESSION_OPTION, "enable_mem_reuse",
         help="reuse buffers between nodes", label="memory reuse", section=_MEM, tune_values=(True, False),
         short="mem reuse"),
    Knob("session.use_per_session_threads", bool, True, SESSION_OPTION, "use_per_session_threads", restarts=True,
         help="false = the process's global thread pools", label="per-session threads", section=_POOLS,
         hint="off = the global pools below; restarts the worker"),
    Knob("session.global_intra_op_num_threads", int, 0, GLOBAL_POOL, "set_global_thread_pool_sizes",
         minimum=0, maximum=MAX_THREADS,
         note=_ORT_DEFAULT, restarts=True, help="intra-op size of the global pools (per-session threads off)",
         label="global intra-op", section=_POOLS, hint="used with per-session threads off; 0 = default"),
    Knob("session.global_inter_op_num_threads", int, 0, GLOBAL_POOL, "set_global_thread_pool_sizes",
         minimum=0, maximum=MAX_THREADS,
         note=_ORT_DEFAULT, restarts=True, help="inter-op size of the global pools (per-session threads off)",
         label="global inter-op", section=_POOLS, hint="used with per-session threads off; 0 = default"),
    Knob("session.allow_spinning", bool, None, CONFIG_ENTRY, "session.intra_op.allow_spinning", optional=True,
         help="intra-op pool threads spin-wait for work (ORT's default: on)", label="allow spinning",
         section=_SPIN, hint="intra-op pool spin-waits between work", tune_values=(True, False), short="spin",
         glance="always", flag=Flag("--no-spinning", help="turn the thread pool's spin-wait off", session=True)),
    Knob("session.inter_op_allow_spinning", bool, None, CONFIG_ENTRY, "session.inter_op.allow_spinning",
         optional=True, help="inter-op pool threads spin-wait for work (ORT's default: on)",
         label="inter-op spinning", section=_SPIN, tune_values=(True, False), short="inter-op spin"),
    Knob("session.spin_duration_us", int, None, CONFIG_ENTRY, "session.intra_op.spin_duration_us", optional=True,
         minimum=0, maximum=INT32_MAX,
         help="how long intra-op threads spin before blocking, in µs", label="spin duration µs",
         section=_SPIN, hint="blank = ORT's default", tune_values=(100, 1000), short="spin µs"),
    Knob("session.spin_backoff_max", int, None, CONFIG_ENTRY, "session.intra_op.spin_backoff_max", optional=True,
         minimum=1, maximum=INT32_MAX, help="cap of the intra-op spin loop's exponential backoff (1 = none)",
         label="spin backoff max", section=_SPIN, hint="blank = ORT's default", tune_values=(1, 4, 8),
         short="spin backoff"),
    Knob("session.inter_op_spin_duration_us", int, None, CONFIG_ENTRY, "session.inter_op.spin_duration_us",
         optional=True, minimum=0, maximum=INT32_MAX, help="how long inter-op threads spin before blocking, in µs",
         label="inter-op spin µs", section=_SPIN, hint="blank = ORT's default; parallel mode",
         tune_values=(100, 1000)),
    Knob("session.inter_op_spin_backoff_max", int, None, CONFIG_ENTRY, "session.inter_op.spin_backoff_max",
         optional=True, minimum=1, maximum=INT32_MAX,
         help="cap of the inter-op spin loop's exponential backoff (1 = none)",
         label="inter-op backoff max", section=_SPIN, hint="blank = ORT's default; parallel mode",
         tune_values=(1, 4, 8)),
    Knob("session.dynamic_block_base", int, None, CONFIG_ENTRY, "session.dynamic_block_base", optional=True,
         minimum=0, maximum=INT32_MAX,
         note="0 = off", help="split parallel loops into shrinking blocks (ORT's default: off)",
         label="dynamic_block_base", section=_SPIN, hint="blank = off; 4 often tightens p99", tune_values=(0, 4, 8),
         short="dbb", display=unset_text, glance="set", verdict="p99"),
    Knob("session.intra_op_thread_affinities", tuple, None, CONFIG_ENTRY, "session.intra_op_thread_affinities",
         optional=True, help="0-based cores per pool thread (intra − 1 lists); written as ORT's 1-based \"2;3,4\"",
         label="thread affinity", section=_T,
         hint="0-based cores per pool thread: 1;2,3 — or cores: 0-3 to spread one per thread", short="affinity",
         display=pinned_text, term="{value}", glance="set"),
    Knob("session.disable_cpu_ep_fallback", bool, None, CONFIG_ENTRY, "session.disable_cpu_ep_fallback",
         optional=True, help="fail instead of running unsupported nodes on CPU (ORT's default: off)",
         label="no CPU fallback", section=_PROV, hint="on = nodes the provider cannot run fail the session"),
    Knob("session.use_env_allocators", bool, None, CONFIG_ENTRY, "session.use_env_allocators", optional=True,
         help="share one CPU arena between the process's sessions (ORT's environment allocator, registered once "
         "per process; ORT's default: each session its own)", label="shared arena", section=_MEM,
         hint="on = replicas share one CPU arena",
         flag=Flag("--shared-arena", help="one CPU arena shared by the sessions (ORT's environment allocator)",
                   group="workload")),
    Knob("session.log_severity_level", int, 2, SESSION_OPTION, "log_severity_level", minimum=0, maximum=4,
         help="ORT's log level: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal", label="log severity",
         section=_LOG, hint="0 verbose … 4 fatal"),
    Knob("session.config", dict, {}, CONFIG_ENTRY, values=str, help="any other session config entry, verbatim"),
    # ---- provider ----
    Knob("provider.name", str, "cpu", PROVIDER, "providers",
         help="`cpu`, `cuda`, `tensorrt`, `openvino`, … or any full EP name", label="provider", section=_PROV,
         hint="cpu, cuda, tensorrt, openvino… (any name ORT knows)", term="{value}", glance="set",
         flag=Flag("--provider", "NAME", "execution provider: cpu, cuda, or any name ORT knows")),
    Knob("provider.io_binding", bool, False, WORKLOAD, "IOBinding",
         help="run through `IOBinding` (inputs copied to the device once)", label="IO binding", section=_PROV,
         hint="inputs and outputs bound on the device", glance="set"),
    Knob("provider.options", dict, {}, PROVIDER_OPTION, values=SCALAR, help="provider options as given"),
    # ORT 1.31's CUDA options, every one CUDAExecutionProviderInfo::FromProviderOptions parses but the process
    # pointers (user_compute_stream, gpu_external_*), which config.validate refuses by name.
    _cuda("device_id", int, "the GPU to run on (CUDA's numbering: after CUDA_VISIBLE_DEVICES)", maximum=INT16_MAX),
    _cuda("gpu_mem_limit", int, "byte limit of the CUDA arena", hint="bytes; blank = no limit", maximum=SIZE_T_MAX),
    _cuda("arena_extend_strategy", str, "how the CUDA arena grows", choices=ARENA_STRATEGIES),
    _cuda("cudnn_conv_algo_search", str, "how cuDNN picks convolution algorithms", choices=CONV_ALGO_SEARCH,
          short="conv algo"),
    _cuda("cudnn_conv_use_max_workspace", bool, "let cuDNN use its largest workspace", short="conv workspace"),
    _cuda("cudnn_conv1d_pad_to_nc1d", bool, "pad 1-D convolutions to NC1D"),
    _cuda("enable_cuda_graph", bool, "capture and replay the run as a CUDA graph",
          hint="needs IO binding and sequential mode", short="CUDA graph"),
    _cuda("do_copy_in_default_stream", bool, "copy on the default stream"),
    _cuda("use_tf32", bool, "allow TF32 math on Ampere and later", short="TF32"),
    _cuda("prefer_nhwc", bool, "prefer NHWC kernels", short="NHWC"),
    _cuda("enable_skip_layer_norm_strict_mode", bool, "SkipLayerNorm in strict (exact) mode",
          hint="ORT 1.31 takes it but leaves it out of get_provider_options()"),
    _cuda("use_ep_level_unified_stream", bool, "one stream for the whole provider"),
    _cuda("tunable_op_enable", bool, "use TunableOp kernels"),
    _cuda("tunable_op_tuning_enable", bool, "let TunableOp tune at run time"),
    _cuda("tunable_op_max_tuning_duration_ms", int, "time limit of one TunableOp tuning, in ms"),
    _cuda("sdpa_kernel", int, "attention kernels allowed, a bitmask of ORT's AttentionBackend (0 = ORT's choice)",
          hint="bitmask; blank = ORT's choice", short="SDPA kernel"),
    _cuda("fuse_conv_bias", bool, "fuse Conv with its bias through cuDNN's frontend (compiled at run time)",
          short="conv bias fusion"),
    _cuda("enable_cudnn", bool, "use cuDNN where it is installed (off: CUDA's own kernels only)"),
    # ---- environment ----
    Knob("env", dict, {}, ENV, values=str, restarts=True, help="set in the worker's environment before it starts",
         display=env_text, glance="set"),
    _env("OMP_NUM_THREADS", "OpenMP threads of OpenMP-built kernels", "blank = unset"),
    _env("OMP_WAIT_POLICY", "OpenMP threads spin (ACTIVE) or sleep (PASSIVE)", "PASSIVE or ACTIVE", verdict="cpu"),
    _env("LD_PRELOAD", "libraries loaded first, e.g. mimalloc", "e.g. a mimalloc .so"),
    _env("CUDA_VISIBLE_DEVICES", "the GPUs the worker can see"),
    _env("ORT_INTRA_OP_NUM_THREADS", "intra-op threads for builds that read it"),
    _env("MIMALLOC_OPTIONS", "mimalloc's settings when it is preloaded"),
    # ---- workload (ortop's own) ----
    Knob("workload.rate_hz", float, 0.0, minimum=0, maximum=MAX_RATE_HZ,
         note="0 = closed loop", help="paced loop rate; 0 = closed loop",
         label="rate Hz", section=_WL, hint="0 = closed loop; 100 shows the cost of spinning", short="rate",
         display=hz_text, term="{value}", glance="always",
         flag=Flag("--rate", "HZ", "paced loop at HZ runs per second (0 = closed loop)")),
    Knob("workload.concurrency", int, 1, minimum=1, maximum=MAX_CALLERS,
         help="concurrent callers of one session", label="concurrency",
         section=_WL, hint="concurrent callers", short="callers", display=callers_text, term="{value}", glance="set",
         flag=Flag("--concurrency", "K", "K concurrent callers")),
    Knob("workload.replicas", int, 1, minimum=1, maximum=MAX_REPLICAS,
         help="sessions of the model served at once in one worker, each with its own callers", label="replicas",
         section=_WL, hint="sessions served at once, each with its callers",
         flag=Flag("--replicas", "N", "serve N sessions of the model at once in one worker, each with its own "
                   "callers")),
    Knob("workload.pin_replicas", bool, False,
         help="give each replica its own share of the cores (its pool threads and callers pinned there)",
         label="pin replicas", section=_WL, hint="on = each replica on its own cores",
         flag=Flag("--pin-replicas", help="give each replica its own share of the cores (pool threads and callers "
                   "pinned there)")),
    Knob("workload.warmup_runs", int, 10, minimum=0, maximum=MAX_WARMUP_RUNS,
         help="runs after each build, excluded from figures",
         label="warm-up runs", section=_WL,
         flag=Flag("--warmup", "N", "warm-up runs after each build, excluded from figures")),
    Knob("workload.seed", int, 0, help="seed of the synthetic inputs, the arrivals and the shape draws",
         label="seed", section=_WL,
         flag=Flag("--seed", "S", "seed for the synthetic inputs, the arrivals and the shape draws")),
    Knob("workload.batch", int, 0, minimum=0, maximum=INT32_MAX,
         note="0 = the model's own", help="the leading free dimension of "
         "every input (0 = the model's own)", label="batch", section=_WL, hint="0 = the model's own",
         flag=Flag("--batch", "N", "set the leading free dimension of every input", group="inputs")),
    Knob("workload.dims", dict, {}, values=int, minimum=1, maximum=INT32_MAX, help="free dimension sizes by name"),
    Knob("workload.shapes", dict, {}, values=SHAPE, help="whole input shapes by input name"),
    Knob("workload.values", dict, {}, values=float, help="constant fills by input name (e.g. a sample rate)"),
    Knob("workload.inputs", dict, {}, values=str, help="`.npy` files by input name"),
    Knob("workload.arrival", str, None, optional=True, choices=ARRIVAL_MODES,
         unset="closed, or fixed when rate_hz is set",
         help="how requests come: closed loop, or open (fixed spacing, Poisson, a trace) with a FIFO queue; "
         "unset = fixed when rate_hz is set, else closed", label="arrival", section=_WL,
         hint="closed | fixed | poisson | trace", term="{value} arrivals", glance="set",
         flag=Flag("--arrival", help="how requests come: closed loop, or open arrivals at --rate (fixed spacing or "
                   "Poisson) or from --trace, waiting in a FIFO queue; default: fixed with --rate, else closed")),
    Knob("workload.max_queue", int, 0, minimum=0, maximum=INT32_MAX, note="0 = one second of requests",
         help="open arrivals: requests waiting beyond this are shed and counted (0 = one second of requests at "
         "the offered rate, at least 64)", label="max queue", section=_WL, hint="0 = one second of requests",
         flag=Flag("--max-queue", "N", "open arrivals: shed requests beyond N waiting (default: one second of "
                   "requests)")),
    Knob("workload.trace", str, "", help="a JSON-lines trace of requests to replay (`t` seconds, dims, shapes "
         "or inputs per line), relative to the profile file",
         flag=Flag("--trace", "FILE.jsonl", "replay requests from a JSON-lines trace ({\"t\": s, "
                   "\"dims\"|\"shapes\"|\"inputs\": …})")),
    Knob("workload.trace_speed", float, 1.0, minimum=0.001, maximum=1e6,
         help="replay a trace this many times faster than recorded",
         flag=Flag("--trace-speed", "X", "replay the trace X times faster than recorded")),
    Knob("workload.trace_loop", bool, False, help="replay the trace again and again (a run longer than the trace)"),
    Knob("workload.dim_mix", dict, {}, values=str,
         help="free dims drawn per request: `16..512` (a range) or `32:5,128:3` (sizes with weights)"),
    Knob("workload.shape_mix", dict, {}, values=str,
         help="whole input shapes drawn per request: `1x3x48x160,1x3x48x320` (`:W` weighs one)"),
)


# ---- lookups (always against the current REGISTRY, so tests can extend it) ------------------------------------
_index: tuple[tuple[Knob, ...], dict[str, Knob]] | None = None


def registry() -> tuple[Knob, ...]:
    """Every knob, in declaration order (the order of TOML output, exports and the README table)."""
    return REGISTRY


def _by_key() -> dict[str, Knob]:
    """The registry indexed by key, rebuilt when REGISTRY is replaced (lookups happen on every profile read)."""
    global _index
    reg = registry()
    if _index is None or _index[0] is not reg:
        _index = (reg, {k.key: k for k in reg})
    return _index[1]


def find(key: str) -> Knob | None:
    """The knob with this dotted key, or None."""
    return _by_key().get(key)


def get(key: str) -> Knob:
    """The knob with this dotted key; KeyError names it when there is none."""
    knob = find(key)
    if knob is None:
        raise KeyError(f"no knob {key!r}")
    return knob


def is_entry(knob: Knob) -> bool:
    """Whether the knob is a known entry of a map knob (a CUDA option, a known environment variable)."""
    parent = find(knob.table) if knob.table else None
    return parent is not None and parent.is_map


def in_table(table: str) -> list[Knob]:
    """The knobs held directly by one TOML table ("" = top level), maps included, entries of maps excluded."""
    return [k for k in registry() if k.table == table and not is_entry(k)]


def entries(map_key: str, provider: str | None = None) -> list[Knob]:
    """The declared entries of a map knob; with ``provider``, only those belonging to it."""
    return [k for k in registry() if k.table == map_key and (provider is None or k.provider == provider)]


def sections() -> list[str]:
    """The profile's sections ([session], [provider], [workload]) in declaration order."""
    out: list[str] = []
    for k in registry():
        if "." in k.key and not is_entry(k) and k.table not in out:
            out.append(k.table)
    return out


def settings(*targets: str) -> list[Knob]:
    """Single-valued knobs (no maps, no map entries) going to any of ``targets``, in declaration order."""
    return [k for k in registry() if k.target in targets and not k.is_map and not is_entry(k)]
