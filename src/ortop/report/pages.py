"""The pages of ``ortop compare --report``, ``ortop tune --report`` and capacity, each from its command's JSON dict.

Each page reads only the dict its command prints with ``--json`` (plus the host and, for compare, the profiles'
TOML, which that JSON does not carry), so a report can be made again later from a saved ``--json`` output, and the
page never depends on the engine's objects.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ortop.measure.bracket import NOT_APART
from ortop.measure.noise import STALLS_MOVE
from ortop.present import cell, ms_text, pct_unit, signed_pct, size_text
from ortop.report.curve import label as curve_label
from ortop.report.figures import capacity_curves, forest
from ortop.report.html import (
    esc,
    facts,
    figure,
    host_section,
    notes_section,
    page,
    profiles_section,
    table,
)

METRIC_LABEL = {"p50": "p50", "p99": "p99", "throughput": "runs/s", "cpu": "CPU/run"}
STATUS_ORDER = {"racing": 0, "ok": 1, "dropped": 2, "failed": 3}


def _toml(d: Mapping[str, Any]) -> str:
    """A profile dict (TOML-ready: no None) as TOML text."""
    import tomli_w

    return tomli_w.dumps(dict(d))


# ---- compare ------------------------------------------------------------------------------------------------------
def compare_page(data: Mapping[str, Any], *, host: Mapping[str, Any] | None = None,
                 profiles: Sequence[tuple[str, str]] = ()) -> str:
    """The page for ``ortop compare --json``'s dict: the configurations' figures, a forest plot of every
    comparison's change with its 95 % interval, the host and the profiles (``(name, TOML)`` pairs)."""
    configs = list(data.get("configs") or [])
    names = [str(c.get("profile", i)) for i, c in enumerate(configs)]
    objective = str(data.get("objective", "p50"))
    model = str(data.get("model", ""))

    short = [os.path.basename(n) or n for n in names]  # profile paths as typed: their file names, where unique
    labels = short if len(set(short)) == len(short) else names

    def name(i: Any) -> str:
        return labels[i] if isinstance(i, int) and 0 <= i < len(labels) else str(i)

    took = "decided after" if data.get("stopped_early") else "measured"
    subtitle = (f"{model}: {took} {cell(data.get('elapsed_s'), 1)} s of {cell(data.get('budget_s'), 1)} s in "
                f"{data.get('blocks', '?')} alternating blocks of {(data.get('block_s') or 0) * 1e3:.0f} ms; "
                f"objective {METRIC_LABEL.get(objective, objective)}")
    compared = any(c.get("agreement") for c in configs)
    rows = []
    for i, c in enumerate(configs):
        kept = "yes" if c.get("rate_kept", True) else f"no: offered {cell(c.get('offered_per_s'), 0)}/s"
        outputs = () if not compared else (_outputs_cell(i, c),)
        rows.append((i, names[i], c.get("runs", "—"), ms_text(c.get("p50_ms")), ms_text(c.get("p99_ms")),
                     cell(c.get("throughput_per_s"), 1), ms_text(c.get("cpu_ms_per_run")), kept, *outputs))
    comps = list(data.get("comparisons") or [])
    forest_rows = [{"label": f"{name(c.get('other'))} vs {name(c.get('baseline'))} · "
                             f"{METRIC_LABEL.get(str(c.get('metric')), c.get('metric'))}",
                    "change_pct": c.get("change_pct"), "ci_low_pct": c.get("ci_low_pct"),
                    "ci_high_pct": c.get("ci_high_pct"), "verdict": c.get("verdict"),
                    "bold": c.get("metric") == objective} for c in comps]
    verdicts = [(f"{name(c.get('other'))} vs {name(c.get('baseline'))}",
                 METRIC_LABEL.get(str(c.get("metric")), c.get("metric")), cell(c.get("before")), cell(c.get("after")),
                 signed_pct(c.get("change_pct")),
                 f"{signed_pct(c.get('ci_low_pct'))} … {signed_pct(c.get('ci_high_pct'))}",
                 c.get("pairs", "—"), c.get("verdict", "")) for c in comps]
    body = [
        "<h2>Configurations</h2>",
        table(("#", "profile", "runs", "p50 ms", "p99 ms", "runs/s", "CPU/run ms", "rate kept",
               *(("outputs",) if compared else ())), rows, numeric=(0, 2, 3, 4, 5, 6)),
        _models(configs),
        _agreement(configs, labels, data.get("tolerance")),
        "<h2>Changes against the first profile</h2>",
        figure(forest(forest_rows, prefix="cmp"),
               f"Each change with its 95 % interval from paired neighbouring blocks; bold: the objective "
               f"({METRIC_LABEL.get(objective, objective)}). Inside the shaded ±2 % band is no difference; for runs/s "
               "higher is better, for the others lower.") if comps else "<p>no comparison measured</p>",
        table(("comparison", "metric", "before", "after", "change %", "95 % interval", "pairs", "verdict"), verdicts,
              numeric=(2, 3, 4, 5, 6)) if comps else "",
        host_section(host),
        profiles_section(profiles),
        _memory(data.get("memory")),
        notes_section(data.get("warnings") or ()),
    ]
    return page(f"ortop compare — {os.path.basename(model) or 'model'}", subtitle, body)




def _outputs_cell(i: int, c: Mapping[str, Any]) -> str:
    """A configuration's outputs against the first's, in a few words."""
    if i == 0:
        return "the reference"
    if c.get("outputs_differ"):
        return "differ: " + "; ".join(map(str, c["outputs_differ"]))
    ag = c.get("agreement")
    if not ag:
        return str(c.get("agreement_note") or "not compared")
    exact = all(isinstance(a, Mapping) and a.get("max_abs") == 0 and not a.get("nonfinite") for a in ag.values())
    return "identical" if exact else "within the tolerance"


def _models(configs: Sequence[Mapping[str, Any]]) -> str:
    """Each configuration's model, its size, session creation, first run, memory and onnxruntime: shown when the
    configurations run more than one model."""
    if len({c.get("model") for c in configs if c.get("model")}) < 2:
        return ""
    rows = [(i, c.get("model", ""), size_text(c.get("model_bytes")), ms_text(c.get("create_ms")),
             ms_text(c.get("first_run_ms")), cell(c.get("session_mib"), 1), cell(c.get("rss_mib"), 0),
             c.get("ort_version") or "—")
            for i, c in enumerate(configs)]
    return "<h2>Models</h2>" + table(("#", "model", "size", "create ms", "first run ms", "session MiB", "RSS MiB",
                                      "onnxruntime"), rows, numeric=(0, 2, 3, 4, 5, 6))


def _agreement(configs: Sequence[Mapping[str, Any]], names: Sequence[str], tol: Mapping[str, Any] | None) -> str:
    """Each output of each configuration against the first's on the same inputs, with the tolerance it was held to."""
    from ortop.measure.agreement import cosine_text, error_text

    def fig(x: Any, text: Any) -> str:
        return text(float(x)) if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"

    rows = []
    for i, c in enumerate(configs):
        if i == 0 or not c.get("agreement"):
            continue
        differs = [str(d) for d in c.get("outputs_differ") or []]
        for name, a in (c.get("agreement") or {}).items():
            a = a if isinstance(a, Mapping) else {}
            mine = [d for d in differs if d.startswith(f"{name} ")]
            verdict = a.get("note") or ("differs: " + "; ".join(mine) if mine else "within the tolerance")
            rows.append((names[i], name, fig(a.get("max_abs"), error_text), fig(a.get("mean_rel"), error_text),
                         fig(a.get("cosine"), cosine_text), fig(a.get("top1"), lambda x: f"{x:.3f}"),
                         a.get("elements", "—"), verdict))
    if not rows:
        return ""
    tol = tol or {}
    bounds = [f"{label} {tol[key]:g}" for key, label in (("atol", "max abs ≤"), ("rtol", "mean rel ≤"),
                                                          ("cosine", "cosine ≥"))
              if isinstance(tol.get(key), (int, float))]
    caption = (f"Each output of one run after the warm-up, on the same inputs as {names[0]}; mean rel is mean |b − a| "
               "/ mean |a|; top-1 is the share of rows with the same arg-max where the output has a class axis."
               + (f" Tolerance: {', '.join(bounds)}." if bounds else ""))
    return (f"<h2>Outputs against {esc(names[0])}</h2><p>{esc(caption)}</p>"
            + table(("configuration", "output", "max abs", "mean rel", "cosine", "top-1", "elements", "verdict"), rows,
                    numeric=(2, 3, 4, 5, 6)))


def _memory(mem: Mapping[str, Any] | None) -> str:
    if not mem:
        return ""
    cells = [f"{cell(mem.get(key), 0)} MiB" for key in ("rss_one_mib", "rss_all_mib", "per_session_mib",
                                                       "available_mib")]
    return "<h2>Memory</h2>" + table(("with one session", "with every session", "a session", "available"), [cells],
                                     numeric=(0, 1, 2, 3))


# ---- tune ---------------------------------------------------------------------------------------------------------
def _improvement(t: Mapping[str, Any], objective: str) -> float:
    c = t.get("change_pct")
    if not isinstance(c, (int, float)):
        return -1e9
    return float(c) if objective == "throughput" else -float(c)


def tune_page(data: Mapping[str, Any]) -> str:
    """The page for ``ortop tune --json``'s dict: the verdict, the leaderboard, a forest plot of each candidate's
    change on the objective against the profile it raced, the baseline and the best profile, and the host."""
    objective = str(data.get("objective", "p50"))
    model = str(data.get("model", ""))
    best = data.get("best") or {}
    base = data.get("baseline") or {}
    trials = sorted(data.get("trials") or [], key=lambda t: (STATUS_ORDER.get(str(t.get("status")), 9),
                                                             -_improvement(t, objective)))
    limit = data.get("max_p99_ms")
    subtitle = (f"{model}: objective {METRIC_LABEL.get(objective, objective)}"
                + (f" with p99 ≤ {limit:g} ms" if isinstance(limit, (int, float)) else "")
                + f"; {cell(data.get('elapsed_s'), 1)} s of {cell(data.get('budget_s'), 1)} s"
                + (f"; a worker was lost for good ({data['fault']}): these are the figures so far"
                   if data.get("fault") else
                   "; stopped by the user, these are the figures so far" if data.get("stopped") else ""))
    rows, classes = [], []
    for t in trials:
        status = "winner" if t.get("winner") else str(t.get("status", ""))
        what = t.get("reason") if status in ("dropped", "failed") else t.get("verdict") or ""
        if not t.get("rate_kept", True):
            what = f"{what}; rate not kept" if what else "rate not kept"
        ci = (f"{signed_pct(t.get('ci_low_pct'))} … {signed_pct(t.get('ci_high_pct'))}"
              if t.get("ci_low_pct") is not None else "")
        rows.append((t.get("label", ""), t.get("stage", ""), status, signed_pct(t.get("change_pct")), ci,
                     t.get("pairs", 0), ms_text(t.get("p50_ms")), ms_text(t.get("p99_ms")),
                     cell(t.get("throughput_per_s"), 1), ms_text(t.get("cpu_ms_per_run")), what))
        classes.append("best" if t.get("winner") else "dim" if status in ("dropped", "failed") else "")
    raced = [t for t in trials if t.get("status") != "failed"]
    forest_rows = []
    if best.get("comparison") is not None:
        which = "best" if best.get("verdict") == "better" else best.get("candidate_label") or "candidate"
        forest_rows.append({"label": f"verified: {which} vs baseline"[:70], "change_pct": best.get("change_pct"),
                            "ci_low_pct": best.get("ci_low_pct"), "ci_high_pct": best.get("ci_high_pct"),
                            "verdict": (best.get("comparison") or {}).get("verdict"), "bold": True})
    forest_rows += [{"label": f"{t.get('label', '')} (vs {t.get('against', '?')})"[:70],
                     "change_pct": t.get("change_pct"), "ci_low_pct": t.get("ci_low_pct"),
                     "ci_high_pct": t.get("ci_high_pct"), "verdict": t.get("verdict"), "bold": bool(t.get("winner"))}
                    for t in raced]
    figures = table(("", "p50 ms", "p99 ms", "runs/s", "CPU/run ms"),
                    [(label, ms_text(d.get("p50_ms")), ms_text(d.get("p99_ms")), cell(d.get("throughput_per_s"), 1),
                      ms_text(d.get("cpu_ms_per_run"))) for label, d in (("baseline", base), ("best", best))],
                    numeric=(1, 2, 3, 4))
    changes = best.get("changes") or []
    profiles = [("baseline (the start profile)", _toml(base.get("profile") or {}))]
    if best.get("profile") is not None:
        head = "".join(f"# {c}\n" for c in changes)
        profiles.append(("best" + (": " + ", ".join(changes) if changes else ": the baseline"),
                         head + _toml(best.get("profile") or {})))
    not_tried = [(n.get("label", ""), n.get("stage", ""), n.get("reason", "")) for n in data.get("not_tried") or []]
    body = [
        f'<p class="verdict">{esc(best.get("text") or best.get("verdict") or "no verdict")}</p>',
        figures,
        "<h2>Leaderboard</h2>",
        table(("candidate", "dimension", "status", "change %", "95 % interval", "pairs", "p50 ms", "p99 ms", "runs/s",
               "CPU/run ms", "verdict / reason"), rows, numeric=(3, 4, 5, 6, 7, 8, 9), classes=classes)
        if rows else "<p>no candidate was tried</p>",
        figure(forest(forest_rows, prefix="tune", xlabel=f"change in {METRIC_LABEL.get(objective, objective)}, % "
                                                           "(95 % interval)"),
               "Each candidate's change on the objective against the profile it raced (the incumbent then), and the "
               "winner's verification against the start profile; bold: the winner. Inside the shaded ±2 % band is "
               "no difference.") if forest_rows else "",
        table(("not tried", "dimension", "why"), not_tried) if not_tried else "",
        notes_section(data.get("pruned") or (), title="Pruned"),
        host_section(data.get("host")),
        profiles_section(profiles),
        f"<p>saved as {esc(data.get('saved'))}</p>" if data.get("saved") else "",
    ]
    return page(f"ortop tune — {os.path.basename(model) or 'model'}", subtitle, body)


# ---- capacity -----------------------------------------------------------------------------------------------------
def host_noise_text(noise: Mapping[str, Any]) -> str:
    """The host's noise over a capacity search (``host_noise`` in its JSON), in a sentence or two."""
    def share(x: Any) -> str:
        return f"{x:.2g} %" if isinstance(x, (int, float)) else "?"

    slow = noise.get("slow_share")
    text = (f"The host over the search: steal {share(noise.get('steal_pct'))}, CPU pressure "
            f"{share(noise.get('cpu_pressure_pct'))}; runs slower than {noise.get('slow_k', 3):g}\u00d7 their "
            f"shape's median: {share(slow * 100) if isinstance(slow, (int, float)) else '?'}.")
    text += f" {noise['verdict'][0].upper()}{noise['verdict'][1:]}." if noise.get("verdict") else ""
    return text + (f" {STALLS_MOVE[0].upper()}{STALLS_MOVE[1:]}." if noise.get("stalls_reach_slo") else "")


def capacity_page(data: Mapping[str, Any], *, host: Mapping[str, Any] | None = None,
                  profiles: Sequence[tuple[str, str]] = ()) -> str:
    """The page for ``ortop capacity --json``'s dict: each profile's capacity within the SLO with its bracket, the
    curves (response time and served rate against offered rate), every point's figures, the host and profiles."""
    slo = data.get("slo") or {}
    metric, limit = str(slo.get("metric", "?")), slo.get("ms")
    slo_text = f"{metric} ≤ {limit:g} ms" if isinstance(limit, (int, float)) else metric
    model = str(data.get("model", ""))
    results = list(data.get("profiles") or [])
    best = data.get("best")
    if not (isinstance(best, int) and 0 <= best < len(results)):
        best = None
    subtitle = (f"{model}: the most {data.get('arrival', 'poisson')} traffic each profile serves within {slo_text} "
                f"of response time; {cell(data.get('elapsed_s'), 1)} s of {cell(data.get('budget_s'), 1)} s"
                + ("; stopped early" if data.get("stopped") else ""))
    rows, classes = [], []
    for i, p in enumerate(results):
        lo, hi = (list(p.get("bracket") or []) + [None, None])[:2]
        cap = f"{cell(p.get('capacity_per_s'), 1)}/s" if p.get("met") else "0 (met at no rate)"
        span = p.get("interval")
        conf = p.get("interval_confidence") or 0.9
        interval = f"{cell(span[0], 1)} … {cell(span[1], 1)}/s" if span and None not in span else "—"
        flat = "" if not (p.get("interval_terms") or {}).get("flat") else (
            "flat: the SLO metric barely climbs with the rate where it crosses (a tail set by stalls or wake-ups): "
            "a rerun can land outside the interval")
        rows.append((i, curve_label(p), cap, interval, f"{cell(lo, 1)} … {cell(hi, 1)}/s",
                     f"{cell(p.get('ceiling_per_s'), 1)}/s",
                     "; ".join(x for x in (p.get("note") or "", flat, *(p.get("input_notes") or ())) if x)))
        classes.append("best" if i == best and len(results) > 1 else "")
    if best is None:
        verdict = f"No profile meets {slo_text} at any rate measured here."
    else:
        b = results[best]
        span = b.get("interval")
        conf = (b.get('interval_confidence') or 0.9) * 100
        within = (f" ({conf:g} % interval {cell(span[0], 1)}–{cell(span[1], 1)}/s)"
                  if span and None not in span else "")
        verdict = (f"Best within {slo_text}: {curve_label(b)}, {cell(b.get('capacity_per_s'), 1)} requests/s{within}.")
        if len(results) > 1 and data.get("best_separated") is False:
            verdict = (f"Ahead within {slo_text}: {curve_label(b)}, {cell(b.get('capacity_per_s'), 1)} "
                       f"requests/s, but {NOT_APART}: not shown to serve more.")
    points = []
    for p in results:
        for q in p.get("points") or []:
            own = () if metric in ("p50", "p99") else (ms_text(q.get("slo_ms")),)
            model_ms = q.get("model_ms") or [None]
            points.append((curve_label(p), cell(q.get("rate_per_s"), 1), cell(q.get("served_per_s"), 1),
                           cell(q.get("goodput_per_s"), 1), q.get("dropped", 0), ms_text(q.get("p50_ms")),
                           ms_text(q.get("p99_ms")), *own, ms_text(model_ms[0]), q.get("decision", ""),
                           q.get("decided_by") or ""))
    heads = ("profile", "offered /s", "served /s", "within the SLO /s", "shed", "p50 ms", "p99 ms",
             *(() if metric in ("p50", "p99") else (f"{metric} ms",)), f"long-run {metric} ms", "decision",
             "decided by")
    noise = data.get("host_noise") or {}
    body = [
        f'<p class="verdict">{esc(verdict)}</p>',
        table(("#", "profile", "capacity", f"{conf * 100:g} % interval" if results else "interval", "bracket",
               "closed-loop ceiling", "note"), rows, numeric=(0,), classes=classes),
        "<p>The interval: where a rerun of the same search on this host is expected to land (the tail's sampling, "
        "the host's drift during the search and the bracket, combined). The bracket: the search's resolution, the "
        "highest rate measured to meet the SLO and the lowest measured not to.</p>",
        *([f"<p>{esc(host_noise_text(noise))}</p>"] if noise else []),
        "<h2>Response time against load</h2>",
        figure(capacity_curves(data, prefix="cap"),
               f"Left: each profile's {metric} (solid, markers: each point's decision) and p50 (dashed) against the "
               "offered rate; the dash-dotted line is the SLO, a dotted vertical line a profile's capacity (its "
               "knee). Right: served against offered rate; points under the dashed line y = x were not kept up "
               "with.") if any(p.get("points") for p in results) else "<p>no point measured</p>",
        "<h2>Points</h2>",
        "<p>A point is decided by its measured share of requests over the SLO, or by the queue model's long-run "
        "estimate (the column \u201cdecided by\u201d): a point whose measured p99 is under the SLO may still miss it "
        "in the long run.</p>",
        table(heads, points, numeric=range(1, len(heads) - 2)) if points else "<p>none</p>",
        host_section(host),
        profiles_section(profiles),
        notes_section(data.get("warnings") or ()),
    ]
    return page(f"ortop capacity — {os.path.basename(model) or 'model'}", subtitle, body)


# ---- a certification (``ortop capacity --certify``) ---------------------------------------------------------------
def certification_section(cert: Mapping[str, Any] | None, slo_text: str) -> str:
    """The certification of ``ortop capacity --certify --json``'s ``certification``: the verdict, the requests, those
    over the bound, those needed, the rule, and the host's noise over the run."""
    if not cert:
        return "<h2>Certification</h2><p>no rate was certified</p>"
    verdict = str(cert.get("verdict", "?"))
    rate = cell(cert.get("rate_per_s"), 1)
    line = {"certified": f"Certified: {slo_text} at {rate} requests/s.",
            "violated": f"Violated: {slo_text} does not hold at {rate} requests/s.",
            }.get(verdict, f"Undecided at {rate} requests/s: {cert.get('needed_more', '?')} more requests needed "
                           "(none of them over), or more time.")
    def count(x: Any) -> Any:
        return f"{x:,}" if isinstance(x, int) and not isinstance(x, bool) else x

    rows = [("verdict", verdict), ("requests", count(cert.get("requests"))),
            ("over the bound", count(cert.get("over_slo"))), ("needed", count(cert.get("needed"))),
            ("still needed", count(cert.get("needed_more"))),
            ("clump factor", cell(cert.get("clump_factor"))), ("confidence", cert.get("confidence")),
            ("percentile", cert.get("percentile")), ("measured", f"{cell(cert.get('duration_s'), 1)} s"),
            ("minimum duration", f"{cell(cert.get('min_duration_s'), 1)} s (MLPerf asks 600 s)"),
            ("ended", cert.get("ended", "")), ("rule", cert.get("rule", ""))]
    noise = cert.get("host_noise") or {}
    share = noise.get("slow_share")

    noise_rows = [("steal", pct_unit(noise.get("steal_pct"), missing="—")),
                  ("CPU pressure", pct_unit(noise.get("cpu_pressure_pct"), missing="—")),
                  (f"runs over {noise.get('slow_k', 3):g}× their shape's median",
                   pct_unit(100 * share, missing="—") if isinstance(share, (int, float)) else "—")]
    return "".join([
        "<h2>Certification</h2>",
        f'<p class="verdict">{esc(line)}</p>',
        facts([(k, "—" if v is None else v) for k, v in rows]),
        "<h3>The host's noise over the run</h3>",
        facts(noise_rows),
        f"<p>{esc(noise['verdict'])}</p>" if noise.get("verdict") else "",
    ])


def certify_page(data: Mapping[str, Any], *, host: Mapping[str, Any] | None = None,
                 profiles: Sequence[tuple[str, str]] = ()) -> str:
    """The page for ``ortop capacity --certify --json``'s dict: the certification, the host and the profile."""
    slo = data.get("slo") or {}
    metric, limit = str(slo.get("metric", "?")), slo.get("ms")
    slo_text = f"{metric} ≤ {limit:g} ms" if isinstance(limit, (int, float)) else metric
    model = str(data.get("model", ""))
    cert = data.get("certification")
    subtitle = (f"{model}: certifying {slo_text} of response time at a Poisson rate, MLPerf Inference's Server "
                f"early-stopping rule; {cell(data.get('elapsed_s'), 1)} s of {cell(data.get('budget_s'), 1)} s"
                + ("; stopped early" if data.get("stopped") else ""))
    searched = data.get("capacity") or {}
    found = [p for p in searched.get("profiles") or () if p.get("met")]
    lead = (f"<p>The rate is 0.9 × the capacity the search before it found: {cell(found[0].get('capacity_per_s'), 1)} "
            f"requests/s in {cell(searched.get('elapsed_s'), 1)} s.</p>" if found else "")
    body = [lead, certification_section(cert, slo_text), host_section(host), profiles_section(profiles),
            notes_section([*(data.get("warnings") or ()), *([data["fault"]] if data.get("fault") else [])])]
    return page(f"ortop capacity --certify — {os.path.basename(model) or 'model'}", subtitle, body)
