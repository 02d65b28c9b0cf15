#!/usr/bin/python3
"""tools/report.py - plots and one HTML page from a hetsim results database.

Run by `hetsim report` (sim/cli/report.c) with Debian's /usr/bin/python3 and
python3-matplotlib; reads the database read-only.

  report.py --db FILE --out DIR [--sweep NAME] [--format png|svg]

Figures (each skipped, with a note on the page, when the data is absent):
  latency_cdf      TTFT and E2E latency CDFs of representative runs (table requests)
  rate_latency     TTFT and TPOT p50/p99 versus request rate, one line per series
  rate_goodput     goodput and SLO attainment versus request rate
  pareto           cost ($/h) versus p99 E2E latency, non-dominated front per rate
  timeseries       per-replica utilisation and KV use over time (table samples)
  validation       predicted versus measured iteration times (table validations)

A series is a set of runs that differ only in request rate (and seed, which
is averaged: points are means, bars span min..max over seeds)."""

import argparse
import html
import json
import math
import os
import sqlite3
import sys
import urllib.parse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RATE_KEY = "workload.rate"
AVERAGED = {RATE_KEY, "seed", "workload.seed"}


def connect(path):
    # Quote the path: '#', '?' or '%' in it would otherwise end the URI's
    # path and open (and create) another file.
    con = sqlite3.connect("file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    return con


def has_table(con, name):
    return con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def load_runs(con, sweep):
    """Committed runs: id, config, params (swept keys, or a few config keys), summary."""
    runs = []
    have_cases = has_table(con, "sweep_cases")
    if sweep and has_table(con, "sweep_members"):
        # every case the sweep asked for, including those another stored
        rows = con.execute(
            "SELECT r.id, r.config, m.params FROM runs r JOIN sweep_cases c ON c.run = r.id "
            "JOIN sweep_members m ON m.case_key = c.case_key "
            "WHERE m.sweep = ? AND r.wall_s IS NOT NULL ORDER BY r.id", (sweep,)).fetchall()
    elif sweep:
        rows = con.execute(
            "SELECT r.id, r.config, c.params FROM runs r JOIN sweep_cases c ON c.run = r.id "
            "WHERE c.sweep = ? AND r.wall_s IS NOT NULL ORDER BY r.id", (sweep,)).fetchall()
    elif have_cases:
        rows = con.execute(
            "SELECT r.id, r.config, c.params FROM runs r LEFT JOIN sweep_cases c ON c.run = r.id "
            "WHERE r.wall_s IS NOT NULL ORDER BY r.id").fetchall()
    else:
        rows = con.execute("SELECT id, config, NULL AS params FROM runs WHERE wall_s IS NOT NULL "
                           "ORDER BY id").fetchall()
    for row in rows:
        try:
            cfg = json.loads(row["config"])
        except ValueError:
            cfg = {}
        if row["params"]:
            params = json.loads(row["params"])
        else:
            # A plain `hetsim run`: describe it by the keys people vary most.
            params = {k: cfg.get(k) for k in ("policy", "planner", "cluster", "model") if k in cfg}
            params[RATE_KEY] = cfg.get("workload", {}).get("rate")
        rate = cfg.get("workload", {}).get("rate")
        runs.append({"id": row["id"], "cfg": cfg, "params": params, "rate": rate, "m": {}})
    byid = {r["id"]: r for r in runs}
    for mrow in con.execute("SELECT run, metric, value FROM summary"):
        r = byid.get(mrow["run"])
        if r is not None and mrow["value"] is not None:
            r["m"][mrow["metric"]] = mrow["value"]
    for r in runs:
        if r["rate"] in (None, 0) and r["m"].get("duration_s"):
            # Trace replays: the offered rate is arrivals over the makespan.
            r["rate"] = r["m"].get("arrivals", 0) / r["m"]["duration_s"]
    return runs


def series_key(r):
    return tuple(sorted((k, str(v)) for k, v in r["params"].items() if k not in AVERAGED))


def series_label(key):
    if not key:
        return "all runs"
    return ", ".join("%s=%s" % (k.split(".")[-1], v) for k, v in key)


def group_series(runs):
    groups = {}
    for r in runs:
        groups.setdefault(series_key(r), []).append(r)
    return groups


def by_rate(runs, metric):
    """[(rate, mean, lo, hi)] of metric over seeds, sorted by rate."""
    acc = {}
    for r in runs:
        v = r["m"].get(metric)
        if v is None or r["rate"] is None or (isinstance(v, float) and math.isnan(v)):
            continue
        acc.setdefault(r["rate"], []).append(v)
    out = []
    for rate in sorted(acc):
        vs = acc[rate]
        # The mean of equal values can round 1 ulp outside [min, max].
        mean = min(max(sum(vs) / len(vs), min(vs)), max(vs))
        out.append((rate, mean, min(vs), max(vs)))
    return out


def plot_vs_rate(ax, groups, metric, style="-", label_suffix="", colors=None):
    drawn = 0
    for i, key in enumerate(sorted(groups)):
        pts = by_rate(groups[key], metric)
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        err = [[max(0.0, p[1] - p[2]) for p in pts], [max(0.0, p[3] - p[1]) for p in pts]]
        color = colors[key] if colors else None
        ax.errorbar(xs, ys, yerr=err if any(e > 0 for e in err[0] + err[1]) else None, fmt=style,
                    marker="o", ms=3, color=color, capsize=2,
                    label=series_label(key) + label_suffix)
        drawn += 1
    return drawn


def color_map(groups):
    cmap = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
    return {key: cmap(i % cmap.N) for i, key in enumerate(sorted(groups))}


def save(fig, out, name, fmt, figs, caption, legend_ax=None):
    """Writes the figure; legend_ax's legend goes below the panels, where
    it hides no data."""
    path = os.path.join(out, name + "." + fmt)
    if legend_ax is not None:
        handles, labels = legend_ax.get_legend_handles_labels()
        ncol = 3 if len(labels) > 6 else max(1, min(len(labels), 3))
        rows = (len(labels) + ncol - 1) // ncol
        h = fig.get_size_inches()[1]
        frac = min(0.6, (0.22 * rows + 0.2) / (h + 0.22 * rows))
        fig.set_size_inches(fig.get_size_inches()[0], h + 0.22 * rows)
        fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, frac, 1, 1))
    else:
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    figs.append((name + "." + fmt, caption))


def legend(ax, n):
    if n:
        ax.legend(fontsize=7, loc="best", ncol=1 if n <= 6 else 2)


def fig_rate_latency(runs, groups, colors, out, fmt, figs, notes):
    if not any(r["rate"] for r in runs) or len({r["rate"] for r in runs}) < 2:
        notes.append("TTFT/TPOT versus rate: the runs do not vary the request rate.")
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for ax, (name, unit) in zip(axes, (("ttft", "TTFT"), ("tpot", "TPOT"))):
        n = plot_vs_rate(ax, groups, name + "_p50_ms", "-", " p50", colors)
        plot_vs_rate(ax, groups, name + "_p99_ms", "--", " p99", colors)
        ax.set_xlabel("request rate (req/s)")
        ax.set_ylabel(unit + " (ms), solid p50, dashed p99")
        if name == "ttft":
            ax.set_yscale("log")   # TTFT spans queueing blow-ups; TPOT stays within a few x
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(unit + " versus request rate")
    save(fig, out, "rate_latency", fmt, figs,
         "TTFT and TPOT (p50 solid, p99 dashed) versus offered request rate; one colour per series; "
         "bars span seeds.", legend_ax=axes[0])


def fig_rate_goodput(runs, groups, colors, out, fmt, figs, notes):
    if len({r["rate"] for r in runs}) < 2:
        notes.append("Goodput versus rate: the runs do not vary the request rate.")
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    n = plot_vs_rate(axes[0], groups, "goodput", "-", "", colors)
    rmax = max(r["rate"] for r in runs if r["rate"])
    axes[0].plot([0, rmax], [0, rmax], ":", color="gray", label="goodput = rate")
    axes[0].set_xlabel("request rate (req/s)")
    axes[0].set_ylabel("goodput (SLO-meeting req/s)")
    axes[0].set_title("Goodput versus request rate")
    axes[0].grid(True, alpha=0.3)
    n = plot_vs_rate(axes[1], groups, "slo_attainment", "-", "", colors)
    axes[1].axhline(0.9, ls="--", color="gray", lw=0.8)
    axes[1].set_ylim(-0.02, 1.02)
    axes[1].set_xlabel("request rate (req/s)")
    axes[1].set_ylabel("SLO attainment (fraction of requests)")
    axes[1].set_title("SLO attainment versus request rate")
    axes[1].grid(True, alpha=0.3)
    save(fig, out, "rate_goodput", fmt, figs,
         "Goodput (requests meeting the TTFT/TPOT SLO per second; dotted: goodput = rate) and SLO "
         "attainment (dashed: 0.9) versus rate.", legend_ax=axes[0])


def pick_representatives(groups, k=8):
    """One run per series (the median rate), at most k series."""
    reps = []
    for key in sorted(groups)[:k]:
        rs = sorted(groups[key], key=lambda r: (r["rate"] or 0, r["id"]))
        reps.append((key, rs[len(rs) // 2]))
    return reps


def fig_cdf(con, groups, colors, out, fmt, figs, notes):
    reps = pick_representatives(groups)
    data = []
    for key, r in reps:
        rows = con.execute("SELECT ttft, e2e FROM requests WHERE run = ? AND dropped = 0", (r["id"],)).fetchall()
        if rows:
            data.append((key, r, sorted(x[0] for x in rows if x[0] is not None),
                         sorted(x[1] for x in rows if x[1] is not None)))
    if not data:
        notes.append("Latency CDFs: no per-request rows (runs stored with write_requests=0).")
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for key, r, ttft, e2e in data:
        lab = "%s @ %.3g req/s (run %d)" % (series_label(key), r["rate"] or 0, r["id"])
        for ax, vals in ((axes[0], ttft), (axes[1], e2e)):
            if vals:
                ys = [(i + 1) / len(vals) for i in range(len(vals))]
                ax.step([v * 1e3 for v in vals], ys, where="post", color=colors[key], label=lab)
    for ax, name in ((axes[0], "TTFT"), (axes[1], "end-to-end latency")):
        ax.set_xscale("log")
        ax.set_xlabel(name + " (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.01)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(name + " CDF")
    save(fig, out, "latency_cdf", fmt, figs,
         "Latency CDFs of one run per series (its median rate); dropped requests excluded.",
         legend_ax=axes[0])


def fig_pareto(runs, out, fmt, figs, notes):
    # One point per series and rate: the mean over seeds.
    acc = {}
    for r in runs:
        if "cost_per_hour" in r["m"] and "e2el_p99_ms" in r["m"]:
            acc.setdefault((series_key(r), r["rate"]), []).append(r)
    pts = []
    for (key, rate), rs in sorted(acc.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        pts.append({"rate": rate, "key": key, "cfg": rs[0]["cfg"],
                    "x": sum(r["m"]["cost_per_hour"] for r in rs) / len(rs),
                    "y": sum(r["m"]["e2el_p99_ms"] for r in rs) / len(rs)})
    if len({p["x"] for p in pts}) < 2:
        notes.append("Cost-latency Pareto: every run has the same cost (vary cluster, planner or tp).")
        return
    rates = sorted({p["rate"] for p in pts if p["rate"] is not None})
    if len(rates) > 4:
        rates = [rates[int(round(i * (len(rates) - 1) / 3))] for i in range(4)]
    rates = rates or [None]
    fig, axes = plt.subplots(1, len(rates), figsize=(4.2 * len(rates) + 1, 4.4), squeeze=False)
    # Colour: planner and policy (what the front compares); marker: cluster.
    def kind(p):
        return "%s / %s" % (p["cfg"].get("planner", "?"), p["cfg"].get("policy", "?"))
    kinds = sorted({kind(p) for p in pts})
    clusters = sorted({str(p["cfg"].get("cluster", "?")) for p in pts})
    cmap = plt.get_cmap("tab10")
    markers = "osD^v<>ph*"
    for ax, rate in zip(axes[0], rates):
        sel = [p for p in pts if p["rate"] == rate]
        for p in sel:
            ax.scatter(p["x"], p["y"], color=cmap(kinds.index(kind(p)) % 10),
                       marker=markers[clusters.index(str(p["cfg"].get("cluster", "?"))) % len(markers)],
                       s=30, alpha=0.85)
        # Non-dominated (both minimised): the lowest latency at each cost.
        front, best = [], math.inf
        for p in sorted(sel, key=lambda p: (p["x"], p["y"])):
            if p["y"] < best:
                best = p["y"]
                front.append(p)
        if front:
            ax.step([p["x"] for p in front], [p["y"] for p in front], where="post", color="black", lw=1.2)
        ax.set_yscale("log")
        ax.set_xlabel("deployment cost ($/h)")
        ax.set_ylabel("p99 end-to-end latency (ms)")
        ax.set_title("rate %s req/s" % ("%.3g" % rate if rate is not None else "?"))
        ax.grid(True, which="both", alpha=0.3)
    handles = [plt.Line2D([], [], ls="", marker="o", color=cmap(i % 10), label="planner/policy " + k)
               for i, k in enumerate(kinds)]
    handles += [plt.Line2D([], [], ls="", marker=markers[i % len(markers)], color="gray", label="cluster " + cl)
                for i, cl in enumerate(clusters[:10])]
    handles.append(plt.Line2D([], [], color="black", label="Pareto front"))
    axes[0][0].legend(handles=handles, fontsize=7, loc="best")
    save(fig, out, "pareto", fmt, figs,
         "Cost versus p99 end-to-end latency (mean over seeds), one panel per request rate; colour = "
         "planner/policy, marker = cluster; the black step is the non-dominated front.")


def fig_timeseries(con, runs, groups, out, fmt, figs, notes):
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
        title = "run %d: %s @ %.3g req/s" % (r["id"], series_label(series_key(r)), r["rate"] or 0)
        axes[0][col].set_title(title, fontsize=9)
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


def write_html(out, db, sweep, runs, figs, notes):
    cols = ["request_throughput", "goodput", "slo_attainment", "ttft_p99_ms", "tpot_p99_ms",
            "e2el_p99_ms", "cost_per_hour"]
    p = []
    p.append("<!doctype html><html><head><meta charset='utf-8'><title>hetsim report</title>")
    p.append("<style>body{font-family:sans-serif;margin:2em;max-width:1400px}img{max-width:100%;"
             "border:1px solid #ddd}table{border-collapse:collapse;font-size:12px}td,th{border:1px solid "
             "#ccc;padding:2px 6px;text-align:right}td.l{text-align:left}</style></head><body>")
    p.append("<h1>hetsim report</h1>")
    p.append("<p>database <code>%s</code>%s: %d runs.</p>" % (
        html.escape(db), (", sweep <code>%s</code>" % html.escape(sweep)) if sweep else "", len(runs)))
    p.append("<ul>" + "".join("<li><a href='#%s'>%s</a></li>" % (html.escape(f), html.escape(f))
                              for f, _ in figs) + "<li><a href='#runs'>runs</a></li></ul>")
    for f, cap in figs:
        p.append("<h2 id='%s'>%s</h2><p>%s</p><a href='%s'><img src='%s' alt='%s'></a>" % (
            html.escape(f), html.escape(f), html.escape(cap), html.escape(f), html.escape(f), html.escape(f)))
    if notes:
        p.append("<h2>Not drawn</h2><ul>" + "".join("<li>%s</li>" % html.escape(n) for n in notes) + "</ul>")
    p.append("<h2 id='runs'>Runs</h2><table><tr><th>run</th><th>settings</th>%s</tr>" %
             "".join("<th>%s</th>" % c for c in cols))
    for r in runs[:1000]:
        settings = " ".join("%s=%s" % (k, v) for k, v in r["params"].items())
        vals = "".join("<td>%s</td>" % ("%.4g" % r["m"][c] if c in r["m"] else "") for c in cols)
        p.append("<tr><td>%d</td><td class='l'>%s</td>%s</tr>" % (r["id"], html.escape(settings), vals))
    p.append("</table>")
    if len(runs) > 1000:
        p.append("<p>(first 1000 of %d runs)</p>" % len(runs))
    p.append("</body></html>")
    with open(os.path.join(out, "index.html"), "w") as fp:
        fp.write("\n".join(p))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sweep", default="")
    ap.add_argument("--format", default="png", choices=("png", "svg"))
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
    figs, notes = [], []
    fig_cdf(con, groups, colors, a.out, a.format, figs, notes)
    fig_rate_latency(runs, groups, colors, a.out, a.format, figs, notes)
    fig_rate_goodput(runs, groups, colors, a.out, a.format, figs, notes)
    fig_pareto(runs, a.out, a.format, figs, notes)
    fig_timeseries(con, runs, groups, a.out, a.format, figs, notes)
    fig_validation(con, runs, a.out, a.format, figs, notes)
    write_html(a.out, a.db, a.sweep, runs, figs, notes)
    print("hetsim report: %d figures for %d runs in %s/index.html" % (len(figs), len(runs), a.out))
    for n in notes:
        print("hetsim report: not drawn: " + n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
