#!/usr/bin/python3
"""Plots for bench/ab: reads OUT/aggregate.json, writes PNGs into OUT.

Run by bench/ab as `/usr/bin/python3 bench/ab_plot.py OUT` so that Debian's
python3-matplotlib is used whatever python is first on PATH. Prints the name
of every PNG it wrote, one a line.
"""

import json
import os
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:
    sys.exit("ab_plot.py: matplotlib cannot be imported by %s (%s).\n"
             "Install Debian's package: apt-get install python3-matplotlib"
             % (sys.executable, e))

LAT = [("mean_us", "mean"), ("p50_us", "p50"), ("p90_us", "p90"),
       ("p99_us", "p99"), ("p99_9_us", "p99.9")]
COLORS = {"off": "#7f7f7f", "static": "#d62728", "latgov": "#1f77b4",
          "latgov-dryrun": "#2ca02c", "static-waiter": "#ff9896",
          "static-completion": "#9467bd"}


def stat(agg, w, m, met):
    d = agg.get(w, {}).get(m, {}).get(met)
    if not d:
        return None
    return d["median"], d["min"], d["max"]


def grouped(ax, groups, modes, getter, ylabel):
    """Bars: one group per entry of groups, one bar per mode; median with
    min-max whiskers."""
    n = len(modes)
    width = 0.8 / max(n, 1)
    drawn = False
    for i, m in enumerate(modes):
        xs, ys, lo, hi = [], [], [], []
        for g, key in enumerate(groups):
            s = getter(m, key)
            if s is None:
                continue
            xs.append(g - 0.4 + width * (i + 0.5))
            ys.append(s[0])
            lo.append(s[0] - s[1])
            hi.append(s[2] - s[0])
        if xs:
            drawn = True
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=m,
                   color=COLORS.get(m))
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    return drawn


def latency_plot(data, w, out):
    agg, modes = data["aggregate"], data["modes"]
    dirs = [d for d in ("read", "write")
            if any(stat(agg, w["name"], m, d + "_clat_mean_us")
                   for m in modes)]
    # The whole request where the run has its percentiles (fio's lat);
    # runs made before the harness asked fio for them have clat only.
    whole = any(stat(agg, w["name"], m, d + "_lat_p50_us") for d in dirs for m in modes)
    measure, ylabel = (("lat", "request latency, submission included (us, log)") if whole
                       else ("clat", "completion latency (us, log)"))
    fig, axes = plt.subplots(1, max(len(dirs), 1),
                             figsize=(6 * max(len(dirs), 1), 4.2),
                             squeeze=False)
    for ax, d in zip(axes[0], dirs):
        grouped(ax, [k for k, _ in LAT], modes,
                lambda m, k: stat(agg, w["name"], m, "%s_%s_%s" % (d, measure, k)),
                ylabel)
        ax.set_yscale("log")
        ax.set_xticks(range(len(LAT)))
        ax.set_xticklabels([lbl for _, lbl in LAT])
        ax.set_title("%s" % d)
        ax.legend(fontsize=8)
    if not dirs:
        axes[0][0].text(0.5, 0.5, "no successful runs", ha="center")
    fig.suptitle("Workload %s: median over rounds, whiskers min-max"
                 % w["title"], fontsize=10)
    fig.tight_layout()
    name = "latency-%s.png" % w["name"]
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)
    return name


def idle_plot(data, out):
    agg, modes, cpus = data["aggregate"], data["modes"], data["cpus"]
    wls = data["workloads"]
    states = data["idle_states"]
    have_states = any(states.get(str(c)) for c in cpus)
    fig, axes = plt.subplots(1, len(wls), figsize=(4.2 * len(wls), 4.2),
                             squeeze=False)
    for ax, w in zip(axes[0], wls):
        if have_states:
            # stacked per-state time (all CPUs), seconds, per mode
            names = []
            for c in cpus:
                for n in states[str(c)]:
                    if n not in names:
                        names.append(n)
            bottoms = [0.0] * len(modes)
            for n in names:
                vals = []
                for m in modes:
                    v = 0.0
                    for c in cpus:
                        s = stat(agg, w["name"], m, "cpu%d_%s_time_us" % (c, n))
                        if s:
                            v += s[0] / 1e6
                    vals.append(v)
                ax.bar(range(len(modes)), vals, 0.6, bottom=bottoms, label=n)
                bottoms = [b + v for b, v in zip(bottoms, vals)]
            ax.set_xticks(range(len(modes)))
            ax.set_xticklabels(modes, rotation=20, fontsize=8)
            ax.set_ylabel("time in idle state, all CPUs (s)")
            ax.legend(fontsize=7)
            ax.grid(axis="y", alpha=0.3)
        else:
            grouped(ax, ["cpu%d" % c for c in cpus], modes,
                    lambda m, k: stat(agg, w["name"], m,
                                      "%s_procstat_idle_s" % k),
                    "/proc/stat idle time (s)")
            ax.set_xticks(range(len(cpus)))
            ax.set_xticklabels(["cpu%d" % c for c in cpus])
            ax.legend(fontsize=7)
        ax.set_title(w["title"], fontsize=8)
    if have_states:
        sup = "Time per idle state per mode (median over rounds)"
    else:
        sup = ("No cpuidle driver (%s): no idle states; /proc/stat idle time "
               "per CPU instead (median, whiskers min-max)"
               % data["cpuidle_driver"])
    fig.suptitle(sup + "; idle workload: the %g s with no IO"
                 % data["idle_sec"], fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "idle-time.png"), dpi=110)
    plt.close(fig)
    return "idle-time.png"


def held_plot(data, out):
    """Left: fraction of samples with any constraint held. Right: CPU-seconds
    held, all CPUs (the energy side: static holds every CPU all along)."""
    agg, modes = data["aggregate"], data["modes"]
    wls = data["workloads"]
    fig, axes = plt.subplots(2, 1, figsize=(2.2 * len(wls) + 3, 7.5),
                             squeeze=False)
    panels = [("any_held_frac", "fraction of samples with a constraint held",
               "Constraint held (global or any CPU)"),
              ("held_cpu_s", "CPU-seconds held, all CPUs",
               "CPU-seconds held over the measured window")]
    for ax, (metric, ylabel, title) in zip(axes[:, 0], panels):
        grouped(ax, [w["name"] for w in wls], modes,
                lambda m, w, metric=metric: stat(agg, w, m, metric), ylabel)
        ax.set_xticks(range(len(wls)))
        ax.set_xticklabels([w["name"] for w in wls], fontsize=7, rotation=15)
        if metric == "any_held_frac":
            ax.set_ylim(0, 1.05)
        ax.legend(fontsize=8)
        ax.set_title(title + ", median over rounds", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "held.png"), dpi=110)
    plt.close(fig)
    return "held.png"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ab_plot.py OUT_DIR")
    out = sys.argv[1]
    with open(os.path.join(out, "aggregate.json")) as f:
        data = json.load(f)
    names = [latency_plot(data, w, out) for w in data["workloads"]]
    names.append(idle_plot(data, out))
    names.append(held_plot(data, out))
    for n in names:
        print(n)


if __name__ == "__main__":
    main()
