#!/usr/bin/python3
"""tools/report.py - plots and one HTML page from a hetsim results database.

Run by `hetsim report` (sim/cli/report.c) with Debian's /usr/bin/python3 and
python3-matplotlib; reads the database read-only.

  report.py --db FILE --out DIR [--sweep NAME] [--format png|svg]
            [--slo-ttft MS] [--slo-tpot MS]

Figures (each skipped, with a note on the page, when the data is absent):
  latency_cdf      TTFT, TPOT and E2E latency CDFs of representative runs (table requests)
  rate_latency     TTFT and TPOT p50/p99 versus offered rate, one line per series
  rate_goodput     goodput and SLO attainment versus offered rate
  pareto           cost ($/h) versus p99 E2E latency, one panel per workload and rate
  timeseries       per-replica utilisation and KV use over time (table samples)
  validation       predicted versus measured iteration times (table validations)

A series is a set of runs that differ only in offered rate (and seed, which
is averaged: points are means, bars span min..max over seeds).  The offered
rate is workload.rate x workload.time_scale, or for a timed trace (azure)
the rate measured on its stored arrivals, which includes the time_scale.
A series is labelled by its runs' --label, else by the keys that differ
between series.  SLO lines come from --slo-ttft/--slo-tpot, else from the
runs' slo section when they share one."""

import argparse
import html
import json
import math
import os
import sqlite3
import sys
import textwrap
import urllib.parse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RATE_KEY = "workload.rate"
SCALE_KEY = "workload.time_scale"
# Keys that place a run on the x axis (the offered rate) or are averaged
# over (seeds): never part of a series.
AVERAGED = {RATE_KEY, SCALE_KEY, "seed", "workload.seed"}
# Trace kinds whose arrivals come from the file's timestamps: their offered
# rate is the trace's own rate times workload.time_scale, not workload.rate.
TIMED_TRACES = {"azure"}
# What a plain `hetsim run` (no sweep_cases row) is described by; only the
# keys whose values differ between the runs end up in a label.
DESCRIBE = ("label", "model", "cluster", "deployment", "planner", "policy", "router", "tp", "pp",
            "max_replicas", "prefill_replicas", "workload.kind", "workload.path", "workload.preset")
# A run is overloaded when its queue keeps growing: the mean queueing delay
# of the later half of its arrivals exceeds twice the earlier half's plus
# QUEUE_SLACK_S (a stable system has the same delay in both halves; a short
# run's tail does not count, unlike throughput over the makespan), or it
# drops more than 1% of arrivals.  Without request rows: completing under
# half the offered rate.
QUEUE_SLACK_S = 1.0
LABEL_WIDTH = 48
# The numbers behind every figure, written to DIR/report.json: series
# labels and points, Pareto panels and fronts (for scripts and tests).
DATA = {}


def connect(path):
    # Quote the path: '#', '?' or '%' in it would otherwise end the URI's
    # path and open (and create) another file.
    con = sqlite3.connect("file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    return con


def has_table(con, name):
    return con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def cfg_get(cfg, dotted):
    v = cfg
    for part in dotted.split("."):
        if not isinstance(v, dict) or part not in v:
            return None
        v = v[part]
    return v


def short_value(v):
    """A value as a label shows it: file paths by their base name."""
    s = str(v)
    if "/" in s or s.endswith(".json") or s.endswith(".csv"):
        s = os.path.basename(s.rstrip("/"))
        for ext in (".json", ".csv", ".jsonl"):
            if s.endswith(ext):
                s = s[:-len(ext)]
    return s


def fix_planner(params, planner):
    """A run's planner is the one that made its deployment: runs.planner
    (schema 4), also for a deployment file, whatever default planner name
    the configuration carries; an older database without it shows no
    planner for a deployment file's runs."""
    if planner and ("planner" in params or params.get("deployment")):
        params["planner"] = planner
    elif params.get("deployment") and params.get("planner") == "uniform":
        del params["planner"]


def describe(cfg, label, planner=None):
    params = {}
    for k in DESCRIBE:
        v = label if k == "label" else cfg_get(cfg, k)
        if v in (None, ""):
            continue
        params[k] = v
    fix_planner(params, planner)
    if cfg_get(cfg, "workload.kind") in TIMED_TRACES:
        params.pop("workload.preset", None)
    return params


def trace_id(cfg):
    """What fixes a timed trace's arrivals apart from time_scale."""
    w = cfg.get("workload", {})
    return (w.get("path"), w.get("window_start"), w.get("window_end"), w.get("max_requests"))


def load_runs(con, sweep):
    """Committed runs: id, config, params (swept keys, or a few config keys),
    summary, offered rate."""
    runs = []
    have_cases = has_table(con, "sweep_cases")
    # runs.planner: the planner that made the run's deployment (schema 4)
    pcol = "r.planner" if any(c[1] == "planner" for c in con.execute("PRAGMA table_info(runs)")) else "NULL"
    if sweep and has_table(con, "sweep_members"):
        # every case the sweep asked for, including those another stored
        rows = con.execute(
            "SELECT r.id, r.config, r.label, " + pcol + " AS planner, m.params FROM runs r "
            "JOIN sweep_cases c ON c.run = r.id JOIN sweep_members m ON m.case_key = c.case_key "
            "WHERE m.sweep = ? AND r.wall_s IS NOT NULL ORDER BY r.id", (sweep,)).fetchall()
    elif sweep:
        rows = con.execute(
            "SELECT r.id, r.config, r.label, " + pcol + " AS planner, c.params FROM runs r "
            "JOIN sweep_cases c ON c.run = r.id WHERE c.sweep = ? AND r.wall_s IS NOT NULL ORDER BY r.id", (sweep,)).fetchall()
    elif have_cases:
        rows = con.execute(
            "SELECT r.id, r.config, r.label, " + pcol + " AS planner, c.params FROM runs r "
            "LEFT JOIN sweep_cases c ON c.run = r.id WHERE r.wall_s IS NOT NULL GROUP BY r.id ORDER BY r.id").fetchall()
    else:
        rows = con.execute("SELECT r.id, r.config, r.label, " + pcol + " AS planner, NULL AS params FROM runs r "
                           "WHERE r.wall_s IS NOT NULL ORDER BY r.id").fetchall()
    for row in rows:
        try:
            cfg = json.loads(row["config"])
        except ValueError:
            cfg = {}
        label = row["label"] or ""
        if row["params"]:
            params = json.loads(row["params"])
            fix_planner(params, row["planner"])
        else:
            params = describe(cfg, label, row["planner"])
        w = cfg.get("workload", {})
        scale = w.get("time_scale") or 1.0
        timed = w.get("kind") in TIMED_TRACES
        rate = None if timed else (w.get("rate") or 0) * scale or None
        runs.append({"id": row["id"], "cfg": cfg, "params": params, "label": label, "rate": rate,
                     "base": describe(cfg, label, row["planner"]), "swept": bool(row["params"]),
                     "scale": scale, "timed": timed, "approx": False, "m": {}})
    byid = {r["id"]: r for r in runs}
    for mrow in con.execute("SELECT run, metric, value FROM summary"):
        r = byid.get(mrow["run"])
        if r is not None and mrow["value"] is not None:
            r["m"][mrow["metric"]] = mrow["value"]
    # Timed traces: the offered rate is measured on the arrivals stored
    # (n - 1 gaps over the span), which already include time_scale; a run
    # stored without request rows takes the base rate of another run of the
    # same trace times its own scale, else arrivals over the makespan.
    base = {}
    for r in runs:
        if not r["timed"]:
            continue
        n, lo, hi = con.execute("SELECT count(*), min(arrival), max(arrival) FROM requests WHERE run = ?",
                                (r["id"],)).fetchone()
        if n and n > 1 and hi > lo:
            r["rate"] = (n - 1) / (hi - lo)
            base.setdefault(trace_id(r["cfg"]), r["rate"] / r["scale"])
    for r in runs:
        if r["timed"] and r["rate"] is None:
            b = base.get(trace_id(r["cfg"]))
            if b is not None:
                r["rate"] = b * r["scale"]
            elif r["m"].get("duration_s"):
                r["rate"] = (r["m"].get("completed", 0) + r["m"].get("dropped", 0)) / r["m"]["duration_s"]
                r["approx"] = True
    return runs


def mark_overloaded(con, runs):
    for r in runs:
        m = r["m"]
        arrivals = m.get("completed", 0) + m.get("dropped", 0)
        q = [row[0] for row in con.execute("SELECT queue_delay FROM requests WHERE run = ? AND dropped = 0 "
                                           "ORDER BY arrival, id", (r["id"],))]
        if arrivals and m.get("dropped", 0) > 0.01 * arrivals:
            r["over"] = True
        elif len(q) >= 4:
            h = len(q) // 2
            early, late = sum(q[:h]) / h, sum(q[h:]) / (len(q) - h)
            r["over"] = late > 2 * early + QUEUE_SLACK_S
        else:
            r["over"] = bool(r["rate"]) and m.get("request_throughput", 0) < 0.5 * r["rate"]


def series_key(r):
    return tuple(sorted((k, str(v)) for k, v in r["params"].items() if k not in AVERAGED))


def make_labeler(groups):
    """series key -> legend text: the runs' --label when the whole series
    shares one, else only the keys whose values differ between series
    (short names, file paths by base name), wrapped to LABEL_WIDTH."""
    keys = sorted({k for key in groups for k, _ in key})
    varying = [k for k in keys if k != "label" and len({dict(key).get(k) for key in groups}) > 1]
    texts = {}
    for key, runs in groups.items():
        labels = {r["label"] for r in runs}
        d = dict(key)
        if len(labels) == 1 and next(iter(labels)):
            text = next(iter(labels))
        elif varying:
            text = ", ".join("%s=%s" % (k.split(".")[-1], short_value(d[k])) for k in varying if k in d)
        else:
            c = runs[0]["cfg"]
            text = " / ".join(short_value(v) for v in (c.get("model"), c.get("cluster") or c.get("deployment"),
                                                       c.get("policy")) if v) or "all runs"
        texts[key] = "\n".join(textwrap.wrap(text, LABEL_WIDTH)) or text
    return lambda key: texts.get(key, "?")


def group_series(runs):
    groups = {}
    for r in runs:
        groups.setdefault(series_key(r), []).append(r)
    return groups


def slo_targets(runs, args):
    """{'ttft': ms or None, 'tpot': ms or None}: --slo-ttft/--slo-tpot, else
    the runs' own targets when they all share one (0 = none)."""
    out = {}
    for name, given in (("ttft", args.slo_ttft), ("tpot", args.slo_tpot)):
        if given is not None:
            out[name] = given if given > 0 else None
            continue
        vals = {cfg_get(r["cfg"], "slo.%s_ms" % name) for r in runs}
        vals.discard(None)
        out[name] = vals.pop() if len(vals) == 1 and next(iter(vals)) else None
    return out


def slo_line(ax, name, value, vertical=False):
    if not value:
        return
    kw = dict(color="crimson", ls="-.", lw=1.1, label="%s SLO %g ms" % (name, value))
    if vertical:
        ax.axvline(value, **kw)
    else:
        ax.axhline(value, **kw)


def rate_axis_label(runs):
    if any(r["timed"] for r in runs):
        return "offered request rate (req/s; trace rate x time_scale)"
    return "offered request rate (req/s)"


def by_rate(runs, metric):
    """[(rate, mean, lo, hi)] of metric over seeds, sorted by rate."""
    acc = {}
    for r in runs:
        v = r["m"].get(metric)
        if v is None or r["rate"] is None or (isinstance(v, float) and math.isnan(v)):
            continue
        # Measured trace rates of equal scales agree to rounding: one point.
        acc.setdefault(float("%.6g" % r["rate"]), []).append(v)
    out = []
    for rate in sorted(acc):
        vs = acc[rate]
        # The mean of equal values can round 1 ulp outside [min, max].
        mean = min(max(sum(vs) / len(vs), min(vs)), max(vs))
        out.append((rate, mean, min(vs), max(vs)))
    return out


def plot_vs_rate(ax, groups, metric, style="-", label_suffix="", colors=None, label=None, legend=True):
    """One line per series; legend=False keeps it out of the legend (a
    second statistic of series already listed)."""
    drawn = 0
    for i, key in enumerate(sorted(groups)):
        pts = by_rate(groups[key], metric)
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        err = [[max(0.0, p[1] - p[2]) for p in pts], [max(0.0, p[3] - p[1]) for p in pts]]
        color = colors[key] if colors else None
        text = (label(key) if label else "") + label_suffix
        ax.errorbar(xs, ys, yerr=err if any(e > 0 for e in err[0] + err[1]) else None, fmt=style,
                    marker="o", ms=3, color=color, capsize=2,
                    label=(label(key) if label else text) if legend else "_" + text)
        DATA.setdefault("vs_rate", {}).setdefault(metric, {})[text.replace("\n", " ")] = \
            [[x, y] for x, y in zip(xs, ys)]
        drawn += 1
    return drawn


def color_map(groups):
    cmap = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
    return {key: cmap(i % cmap.N) for i, key in enumerate(sorted(groups))}


def save(fig, out, name, fmt, figs, caption, legend_ax=None, handles=None):
    """Writes the figure; the legend (legend_ax's entries, or handles) goes
    below the panels, where it hides no data, and bbox_inches='tight'
    grows the image to hold all of it."""
    path = os.path.join(out, name + "." + fmt)
    extra = []
    if legend_ax is not None or handles is not None:
        if handles is None:
            handles, labels = [], []
            for ax in legend_ax if isinstance(legend_ax, (list, tuple)) else [legend_ax]:
                h, lab = ax.get_legend_handles_labels()
                handles += h
                labels += lab
        else:
            labels = [h.get_label() for h in handles]
        # One entry per label: series drawn in several panels repeat.
        seen, hs, ls = set(), [], []
        for h, lab in zip(handles, labels):
            if lab not in seen and not lab.startswith("_"):
                seen.add(lab)
                hs.append(h)
                ls.append(lab)
        ncol = max(1, min(len(ls), 3 if fig.get_size_inches()[0] >= 10 else 2))
        fig.tight_layout()
        extra.append(fig.legend(hs, ls, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol,
                                fontsize=8, frameon=False))
    else:
        fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight", bbox_extra_artists=extra, pad_inches=0.15)
    plt.close(fig)
    figs.append((name + "." + fmt, caption))


def legend(ax, n):
    if n:
        ax.legend(fontsize=7, loc="best", ncol=1 if n <= 6 else 2)


def fig_rate_latency(runs, groups, colors, label, slo, out, fmt, figs, notes):
    if len({r["rate"] for r in runs if r["rate"]}) < 2:
        notes.append("TTFT/TPOT versus rate: the runs do not vary the offered rate "
                     "(workload.rate or workload.time_scale).")
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for ax, (name, unit) in zip(axes, (("ttft", "TTFT"), ("tpot", "TPOT"))):
        plot_vs_rate(ax, groups, name + "_p50_ms", "-", " p50", colors, label)
        plot_vs_rate(ax, groups, name + "_p99_ms", "--", " p99", colors, label, legend=False)
        ax.plot([], [], color="black", ls="-", label="p50 (solid)")
        ax.plot([], [], color="black", ls="--", label="p99 (dashed)")
        slo_line(ax, unit, slo[name])
        ax.set_xlabel(rate_axis_label(runs))
        ax.set_ylabel(unit + " (ms), solid p50, dashed p99")
        if name == "ttft":
            ax.set_yscale("log")   # TTFT spans queueing blow-ups; TPOT stays within a few x
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(unit + " versus offered rate")
    save(fig, out, "rate_latency", fmt, figs,
         "TTFT and TPOT (p50 solid, p99 dashed) versus offered request rate; one colour per series; "
         "bars span seeds; dash-dotted red: the SLO target.", legend_ax=list(axes))


def fig_rate_goodput(runs, groups, colors, label, out, fmt, figs, notes):
    if len({r["rate"] for r in runs if r["rate"]}) < 2:
        notes.append("Goodput versus rate: the runs do not vary the offered rate.")
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    plot_vs_rate(axes[0], groups, "goodput", "-", "", colors, label)
    rmax = max(r["rate"] for r in runs if r["rate"])
    axes[0].plot([0, rmax], [0, rmax], ":", color="gray", label="goodput = rate")
    axes[0].set_xlabel(rate_axis_label(runs))
    axes[0].set_ylabel("goodput (SLO-meeting req/s)")
    axes[0].set_title("Goodput versus offered rate")
    axes[0].grid(True, alpha=0.3)
    plot_vs_rate(axes[1], groups, "slo_attainment", "-", "", colors, label)
    axes[1].axhline(0.9, ls="--", color="gray", lw=0.8)
    axes[1].set_ylim(-0.02, 1.02)
    axes[1].set_xlabel(rate_axis_label(runs))
    axes[1].set_ylabel("SLO attainment (fraction of requests)")
    axes[1].set_title("SLO attainment versus offered rate")
    axes[1].grid(True, alpha=0.3)
    save(fig, out, "rate_goodput", fmt, figs,
         "Goodput (requests meeting the TTFT/TPOT SLO per second; dotted: goodput = rate) and SLO "
         "attainment (dashed: 0.9) versus offered rate.", legend_ax=axes[0])


def pick_representatives(groups, k=8):
    """One run per series (the median rate), at most k series."""
    reps = []
    for key in sorted(groups)[:k]:
        rs = sorted(groups[key], key=lambda r: (r["rate"] or 0, r["id"]))
        reps.append((key, rs[len(rs) // 2]))
    return reps


def fig_cdf(con, groups, colors, label, slo, out, fmt, figs, notes):
    reps = pick_representatives(groups)
    data = []
    for key, r in reps:
        rows = con.execute("SELECT ttft, tpot, e2e FROM requests WHERE run = ? AND dropped = 0",
                           (r["id"],)).fetchall()
        if rows:
            data.append((key, r, [sorted(x[i] for x in rows if x[i] is not None) for i in range(3)]))
    if not data:
        notes.append("Latency CDFs: no per-request rows (runs stored with write_requests=0).")
        return
    # The rate goes into a label only when the runs shown differ in it.
    rates = {"%.3g" % (r["rate"] or 0) for _, r, _ in data}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    for key, r, cols in data:
        lab = label(key) + (" @ %.3g req/s" % (r["rate"] or 0) if len(rates) > 1 else "")
        for ax, vals in zip(axes, cols):
            if vals:
                ys = [(i + 1) / len(vals) for i in range(len(vals))]
                ax.step([v * 1e3 for v in vals], ys, where="post", color=colors[key], label=lab)
        DATA.setdefault("cdf", {})[lab.replace("\n", " ")] = {"run": r["id"], "requests": len(cols[0])}
    for ax, name, target in ((axes[0], "TTFT", slo["ttft"]), (axes[1], "TPOT", slo["tpot"]),
                             (axes[2], "end-to-end latency", None)):
        slo_line(ax, name, target, vertical=True)
        ax.set_xscale("log")
        ax.set_xlabel(name + " (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.01)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(name + " CDF")
    only = "" if len(rates) > 1 else " at %s req/s" % rates.pop()
    save(fig, out, "latency_cdf", fmt, figs,
         "TTFT, TPOT and end-to-end latency CDFs of one run per series (its median rate)%s; dropped "
         "requests excluded; dash-dotted red: the SLO target." % only, legend_ax=list(axes))


def workload_name(r):
    w = r["cfg"].get("workload", {})
    if w.get("kind") in ("azure", "sharegpt-csv", "sharegpt-json") and w.get("path"):
        name = short_value(w["path"])
    elif w.get("preset"):
        name = str(w["preset"])
    else:
        name = str(w.get("kind", "?"))
    return name


def fig_pareto(runs, label, slo, out, fmt, figs, notes):
    """Cost versus p99 E2E, one panel per workload and offered rate (never
    mixing them); points are series means over seeds; the front is drawn
    through the points that are neither overloaded nor outside the SLO."""
    acc = {}
    for r in runs:
        if "cost_per_hour" in r["m"] and "e2el_p99_ms" in r["m"]:
            wl = (workload_name(r), "%.3g" % r["rate"] if r["rate"] else "?")
            acc.setdefault((wl, series_key(r)), []).append(r)
    pts = []
    for (wl, key), rs in sorted(acc.items()):
        mean = lambda m: sum(r["m"].get(m, 0) for r in rs) / len(rs)  # noqa: E731
        ok_slo = all((not slo[n]) or mean(n + "_p99_ms") <= slo[n] for n in ("ttft", "tpot"))
        pts.append({"wl": wl, "key": key, "x": mean("cost_per_hour"), "y": mean("e2el_p99_ms"),
                    "over": any(r["over"] for r in rs), "slo": ok_slo})
    if len({p["x"] for p in pts}) < 2:
        notes.append("Cost-latency Pareto: every run has the same cost (vary cluster, planner or tp).")
        return
    # Panels: the workloads and rates where the cost varies, at most six.
    panels = sorted({p["wl"] for p in pts}, key=lambda w: (w[0], float(w[1]) if w[1] != "?" else 0))
    panels = [w for w in panels if len({p["x"] for p in pts if p["wl"] == w}) > 1] or panels
    if len(panels) > 6:
        panels = [panels[int(round(i * (len(panels) - 1) / 5))] for i in range(6)]
    ncols = min(3, len(panels))
    nrows = (len(panels) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols + 0.6, 4.0 * nrows), squeeze=False)
    keys = sorted({p["key"] for p in pts})
    cmap = plt.get_cmap("tab10" if len(keys) <= 10 else "tab20")
    col = {k: cmap(i % cmap.N) for i, k in enumerate(keys)}
    for i, wl in enumerate(panels):
        ax = axes[i // ncols][i % ncols]
        sel = [p for p in pts if p["wl"] == wl]
        for p in sel:
            good = not p["over"] and p["slo"]
            ax.scatter(p["x"], p["y"], s=34, marker="o" if not p["over"] else "X",
                       facecolors=col[p["key"]] if good else "none", edgecolors=col[p["key"]],
                       linewidths=1.2)
        # Non-dominated (both minimised) among the usable points.
        front, best = [], math.inf
        for p in sorted((p for p in sel if not p["over"] and p["slo"]), key=lambda p: (p["x"], p["y"])):
            if p["y"] < best:
                best = p["y"]
                front.append(p)
        DATA.setdefault("pareto", []).append({
            "workload": wl[0], "rate": wl[1],
            "points": [{"series": label(p["key"]).replace("\n", " "), "cost_per_hour": p["x"],
                        "e2el_p99_ms": p["y"], "overloaded": p["over"], "meets_slo": p["slo"]} for p in sel],
            "front": [label(p["key"]).replace("\n", " ") for p in front]})
        if front:
            ax.step([p["x"] for p in front], [p["y"] for p in front], where="post", color="black", lw=1.2)
        ax.set_yscale("log")
        ax.set_xlabel("deployment cost ($/h)")
        ax.set_ylabel("p99 end-to-end latency (ms)")
        ax.set_title("%s @ %s req/s" % wl, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    for j in range(len(panels), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    handles = [plt.Line2D([], [], ls="", marker="o", color=col[k], label=label(k)) for k in keys[:20]]
    handles.append(plt.Line2D([], [], ls="", marker="o", mfc="none", color="gray",
                              label="outside the SLO (hollow)"))
    handles.append(plt.Line2D([], [], ls="", marker="X", mfc="none", color="gray", label="overloaded (X)"))
    handles.append(plt.Line2D([], [], color="black", label="Pareto front"))
    over = sum(p["over"] for p in pts)
    save(fig, out, "pareto", fmt, figs,
         "Cost versus p99 end-to-end latency (mean over seeds), one panel per workload and offered rate; "
         "one colour per series. Hollow: p99 TTFT/TPOT outside the SLO; X: overloaded (queueing delay "
         "still growing: the later half of the arrivals waits over twice as long as the earlier half "
         "plus %g s, or over 1%% dropped; %d points). The black step is the non-dominated front of the "
         "remaining points." % (QUEUE_SLACK_S, over), handles=handles)


def fig_timeseries(con, runs, groups, label, out, fmt, figs, notes):
    if not has_table(con, "samples"):
        notes.append("Utilisation/KV over time: this database predates table samples.")
        return
    ids = {r["id"] for r in runs}
    have = {row[0] for row in con.execute("SELECT DISTINCT run FROM samples")} & ids
    if not have:
        notes.append("Utilisation/KV over time: no samples (runs stored with sample_s=0).")
        return
    # The lowest- and highest-rate runs of the series with the most replicas
    # (first in order on ties) among those that have samples.
    nrep = dict(con.execute("SELECT run, count(DISTINCT replica) FROM samples GROUP BY run").fetchall())
    chosen, most = [], 0
    for key in sorted(groups):
        rs = sorted((r for r in groups[key] if r["id"] in have), key=lambda r: (r["rate"] or 0, r["id"]))
        if rs and max(nrep.get(r["id"], 0) for r in rs) > most:
            most = max(nrep.get(r["id"], 0) for r in rs)
            chosen = [rs[0]] if len(rs) == 1 else [rs[0], rs[-1]]
    fig, axes = plt.subplots(2, len(chosen), figsize=(6.2 * len(chosen), 6.4), squeeze=False)
    for col, r in enumerate(chosen):
        rows = con.execute("SELECT replica, t, util, kv_used FROM samples WHERE run = ? ORDER BY replica, t",
                           (r["id"],)).fetchall()
        reps = sorted({row[0] for row in rows})
        cmap = plt.get_cmap("tab10" if len(reps) <= 10 else "tab20")
        for i, rep in enumerate(reps[:20]):
            sel = [row for row in rows if row[0] == rep]
            axes[0][col].plot([s[1] for s in sel], [s[2] for s in sel], lw=0.9, color=cmap(i % cmap.N),
                              label="replica %d" % rep)
            axes[1][col].plot([s[1] for s in sel], [100 * s[3] for s in sel], lw=0.9, color=cmap(i % cmap.N),
                              label="replica %d" % rep)
        title = "run %d: %s @ %.3g req/s" % (r["id"], label(series_key(r)).replace("\n", " "), r["rate"] or 0)
        axes[0][col].set_title("\n".join(textwrap.wrap(title, 60)), fontsize=9)
        axes[0][col].set_ylabel("utilisation (busy fraction)")
        axes[0][col].set_ylim(-0.02, 1.05)
        axes[1][col].set_ylabel("KV cache used (%)")
        axes[1][col].set_ylim(-2, 105)
        axes[1][col].set_xlabel("simulated time (s)")
        for ax in (axes[0][col], axes[1][col]):
            ax.grid(True, alpha=0.3)
        legend(axes[0][col], min(len(reps), 20))
    save(fig, out, "timeseries", fmt, figs,
         "Per-replica utilisation (busy fraction of each sampling interval) and KV-cache use over "
         "simulated time, at the lowest and highest rate of the series with the most replicas.")


def fig_validation(con, runs, out, fmt, figs, notes):
    if not has_table(con, "validations"):
        notes.append("Predicted versus measured: no validations table.")
        return
    ids = {r["id"] for r in runs}
    rows = [row for row in con.execute("SELECT run, device, predicted_ns, measured_ns FROM validations")
            if row[0] in ids]
    if not rows:
        notes.append("Predicted versus measured: no validations (run `hetsim validate`).")
        return
    devices = sorted({row[1] for row in rows})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    cmap = plt.get_cmap("tab10")
    lo, hi = math.inf, 0
    for i, d in enumerate(devices):
        sel = [row for row in rows if row[1] == d]
        p = [row[2] / 1e6 for row in sel]
        m = [row[3] / 1e6 for row in sel]
        lo, hi = min(lo, min(p + m)), max(hi, max(p + m))
        axes[0].scatter(m, p, s=6, alpha=0.5, color=cmap(i % 10), label=d)
        rel = [100 * (a - b) / b for a, b in zip(p, m) if b > 0]
        axes[1].hist(rel, bins=60, alpha=0.6, color=cmap(i % 10), label=d)
    lo = max(lo, 1e-3)
    axes[0].plot([lo, hi], [lo, hi], "k--", lw=1, label="predicted = measured")
    if hi / lo > 20:   # log axes only when the times span decades
        axes[0].set_xscale("log")
        axes[0].set_yscale("log")
    axes[0].set_xlabel("measured iteration time (ms)")
    axes[0].set_ylabel("predicted iteration time (ms)")
    axes[0].set_title("Predicted versus measured")
    axes[0].grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    axes[1].axvline(0, color="black", lw=1)
    axes[1].set_xlabel("prediction error (%) = (predicted - measured) / measured")
    axes[1].set_ylabel("iterations")
    axes[1].set_title("Prediction error")
    axes[1].legend(fontsize=7)
    save(fig, out, "validation", fmt, figs,
         "Predicted (simulator) versus measured (executor) iteration times, one point per iteration.")


# Column headers of the runs table for keys a plain rewrite would leave
# cryptic; other keys drop "workload." and turn "_" into spaces.
READABLE = {RATE_KEY: "rate (req/s)", SCALE_KEY: "time scale", "workload.path": "trace",
            "workload.kind": "workload kind", "workload.preset": "preset", "tp": "TP", "pp": "PP",
            "workload.max_requests": "requests", "slo.ttft_ms": "TTFT SLO (ms)", "slo.tpot_ms": "TPOT SLO (ms)"}


def readable_key(k):
    if k in READABLE:
        return READABLE[k]
    if k.startswith("workload."):
        k = k[len("workload."):]
    return k.replace("_", " ")


def readable_value(v):
    if isinstance(v, float):
        return "%g" % v
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return short_value(v)


def run_settings(r):
    """What the runs table knows of r: a few configuration keys (model,
    cluster, planner, ...) under its swept keys."""
    d = dict(r["base"])
    d.update(r["params"])
    # 0 is these keys' default ("smallest that fits", "all", "none"):
    # shown only when swept
    for k in ("tp", "max_replicas", "prefill_replicas"):
        if d.get(k) == 0 and not (r["swept"] and k in r["params"]):
            del d[k]
    if r["label"]:
        d.setdefault("label", r["label"])
    return d


def table_keys(runs):
    """The runs table's setting columns: the keys whose values differ
    between the runs (first-seen order), and those every run shares (said
    once above the table)."""
    keys = []
    for r in runs:
        for k in run_settings(r):
            if k not in keys:
                keys.append(k)
    varying, shared = [], {}
    for k in keys:
        vals = {readable_value(run_settings(r)[k]) if k in run_settings(r) else "" for r in runs}
        if len(vals) > 1:
            varying.append(k)
        else:
            shared[k] = vals.pop()
    return varying, shared


def write_html(out, db, sweep, runs, figs, notes, slo):
    cols = ["request_throughput", "goodput", "slo_attainment", "ttft_p99_ms", "tpot_p99_ms",
            "e2el_p99_ms", "cost_per_hour"]
    col_heads = ["throughput (req/s)", "goodput (req/s)", "SLO attainment", "TTFT p99 (ms)", "TPOT p99 (ms)",
                 "E2E p99 (ms)", "cost ($/h)"]
    p = []
    p.append("<!doctype html><html><head><meta charset='utf-8'><title>hetsim report</title>")
    p.append("<style>body{font-family:sans-serif;margin:2em;max-width:1400px}img{max-width:100%;"
             "border:1px solid #ddd}table{border-collapse:collapse;font-size:12px}td,th{border:1px solid "
             "#ccc;padding:2px 6px;text-align:right}td.l{text-align:left}</style></head><body>")
    p.append("<h1>hetsim report</h1>")
    p.append("<p>database <code>%s</code>%s: %d runs.</p>" % (
        html.escape(db), (", sweep <code>%s</code>" % html.escape(sweep)) if sweep else "", len(runs)))
    p.append("<p>SLO targets drawn: TTFT %s, TPOT %s. Offered rates of timed traces are measured "
             "on their arrivals (the trace's rate times workload.time_scale)%s.</p>" % (
                 "%g ms" % slo["ttft"] if slo["ttft"] else "none", "%g ms" % slo["tpot"] if slo["tpot"] else "none",
                 "; approximated by arrivals over the makespan for runs %s (no request rows)" %
                 ", ".join(str(r["id"]) for r in runs if r["approx"]) if any(r["approx"] for r in runs) else ""))
    p.append("<p id='imgcheck'></p>")
    p.append("<ul>" + "".join("<li><a href='#%s'>%s</a></li>" % (html.escape(f), html.escape(f))
                              for f, _ in figs) + "<li><a href='#runs'>runs</a></li></ul>")
    for f, cap in figs:
        p.append("<h2 id='%s'>%s</h2><p>%s</p><a href='%s'><img src='%s' alt='%s'></a>" % (
            html.escape(f), html.escape(f), html.escape(cap), html.escape(f), html.escape(f), html.escape(f)))
    if notes:
        p.append("<h2>Not drawn</h2><ul>" + "".join("<li>%s</li>" % html.escape(n) for n in notes) + "</ul>")
    # Only what tells the runs apart gets a column (readable names, file
    # paths by base name); what they all share is said once.
    varying, shared = table_keys(runs)
    offered = RATE_KEY not in varying and len({r["rate"] for r in runs}) > 1
    heads = [readable_key(k) for k in varying] + (["offered (req/s)"] if offered else [])
    DATA["runs_table"] = {"columns": heads, "shared": {readable_key(k): v for k, v in shared.items() if v}}
    p.append("<h2 id='runs'>Runs</h2>")
    if any(shared.values()):
        p.append("<p>All runs: %s.</p>" % html.escape(", ".join(
            "%s %s" % (readable_key(k), v) for k, v in shared.items() if v)))
    p.append("<table><tr><th>run</th>%s</tr>" % "".join("<th>%s</th>" % html.escape(h) for h in heads + col_heads))
    for r in runs[:1000]:
        d = run_settings(r)
        cells = [readable_value(d[k]) if k in d else "" for k in varying]
        if offered:
            cells.append("%.3g" % r["rate"] if r["rate"] else "")
        vals = "".join("<td>%s</td>" % ("%.4g" % r["m"][c] if c in r["m"] else "") for c in cols)
        p.append("<tr><td>%d</td>%s%s</tr>" % (r["id"], "".join("<td class='l'>%s</td>" % html.escape(c)
                                                               for c in cells), vals))
    p.append("</table>")
    if len(runs) > 1000:
        p.append("<p>(first 1000 of %d runs)</p>" % len(runs))
    # A broken image (a figure missing or unreadable) is named on the page;
    # the headless-browser test reads the verdict from data-images.
    p.append("<script>window.addEventListener('load', function () {"
             "var imgs = document.images, bad = [];"
             "for (var i = 0; i < imgs.length; i++)"
             "  if (!imgs[i].complete || imgs[i].naturalWidth === 0) bad.push(imgs[i].alt);"
             "document.body.setAttribute('data-images', bad.length ? 'broken ' + bad.join(' ') : 'ok ' + imgs.length);"
             "if (bad.length) document.getElementById('imgcheck').textContent = 'Figures that did not load: ' + bad.join(', ');"
             "});</script>")
    p.append("</body></html>")
    with open(os.path.join(out, "index.html"), "w") as fp:
        fp.write("\n".join(p))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sweep", default="")
    ap.add_argument("--format", default="png", choices=("png", "svg"))
    ap.add_argument("--slo-ttft", type=float, default=None, help="TTFT target (ms) drawn; 0: none")
    ap.add_argument("--slo-tpot", type=float, default=None, help="TPOT target (ms) drawn; 0: none")
    a = ap.parse_args()
    try:
        con = connect(a.db)
        runs = load_runs(con, a.sweep)
    except sqlite3.Error as e:
        print("hetsim report: %s: %s" % (a.db, e), file=sys.stderr)
        return 2
    if not runs:
        print("hetsim report: %s: no committed runs%s" % (a.db, " in sweep " + a.sweep if a.sweep else ""),
              file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    groups = group_series(runs)
    colors = color_map(groups)
    label = make_labeler(groups)
    slo = slo_targets(runs, a)
    mark_overloaded(con, runs)
    figs, notes = [], []
    fig_cdf(con, groups, colors, label, slo, a.out, a.format, figs, notes)
    fig_rate_latency(runs, groups, colors, label, slo, a.out, a.format, figs, notes)
    fig_rate_goodput(runs, groups, colors, label, a.out, a.format, figs, notes)
    fig_pareto(runs, label, slo, a.out, a.format, figs, notes)
    fig_timeseries(con, runs, groups, label, a.out, a.format, figs, notes)
    fig_validation(con, runs, a.out, a.format, figs, notes)
    write_html(a.out, a.db, a.sweep, runs, figs, notes, slo)
    DATA.update({"runs": len(runs), "slo_ms": slo, "figures": [f for f, _ in figs], "not_drawn": notes,
                 "offered_rate": {str(r["id"]): r["rate"] for r in runs}})
    with open(os.path.join(a.out, "report.json"), "w") as fp:
        json.dump(DATA, fp, indent=1, sort_keys=True)
    print("hetsim report: %d figures for %d runs in %s/index.html" % (len(figs), len(runs), a.out))
    for n in notes:
        print("hetsim report: not drawn: " + n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
