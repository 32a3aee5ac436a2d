# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PNG plot of a bench_sweep report: decode tok/s against concurrency, measured aggregate and per-stream
curves, the profile's seed reference figures beside them.  matplotlib (controller requirements.txt) is
imported only when a plot is drawn, so the module_utils import everywhere.

  plot_series(report) -> dict of the series drawn (testable without matplotlib)
  render_plot(report, path, dpi=120) -> path
"""

from __future__ import annotations

from typing import Any


def plot_series(report: dict[str, Any]) -> dict[str, Any]:
    levels = [lv for lv in report.get("levels", []) if lv.get("aggregate_tps") is not None]
    ref = report.get("seed_reference") or {}
    agg_ref = sorted((int(k), float(v)) for k, v in (ref.get("aggregate") or {}).items())
    ps_ref = sorted((int(k), float(v)) for k, v in (ref.get("per_stream") or {}).items())
    return {
        "measured_aggregate": [(lv["concurrency"], lv["aggregate_tps"]) for lv in levels],
        "measured_per_stream": [(lv["concurrency"], lv["per_stream_tps_mean"]) for lv in levels
                                if lv.get("per_stream_tps_mean") is not None],
        "seed_aggregate": agg_ref,
        "seed_per_stream": ps_ref,
        "seed_source": ref.get("source"),
        "seed_conditions": ref.get("conditions"),
    }


def _short_source(source: str | None) -> str:
    if not source:
        return "seed"
    return source.split(" (", 1)[0]


def render_plot(report: dict[str, Any], path: str, dpi: int = 120) -> str:
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    series = plot_series(report)
    s = report.get("settings") or {}
    fig, ax = plt.subplots(figsize=(9.5, 6.0), dpi=dpi)
    xs_all: set[int] = set()

    def draw(points: list[tuple[int, float]], label: str, below: bool = False, side: int = -1, skip_c1_label: bool = False,
             **kw: Any) -> None:
        """side -1: value labels left of the point (measured), +1: right (seed), so equal x never collide."""
        if not points:
            return
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        xs_all.update(xs)
        ax.plot(xs, ys, label=label, **kw)
        for x, y in points:
            if skip_c1_label and x == 1:
                continue  # per-stream = aggregate at one stream: the aggregate label says it
            ax.annotate("%.1f" % y, (x, y), textcoords="offset points", xytext=(6 * side, -13 if below else 6),
                        ha="right" if side < 0 else "left", fontsize=8, color=kw.get("color", "black"))

    src = _short_source(series["seed_source"])
    draw(series["measured_aggregate"], "measured: aggregate decode", color="tab:blue", marker="o", linewidth=2.2)
    draw(series["measured_per_stream"], "measured: per-stream decode (mean)", below=True, skip_c1_label=True, color="tab:blue", marker="s",
         linestyle="--", linewidth=1.4, alpha=0.85)
    draw(series["seed_aggregate"], "%s reference: aggregate" % src, side=1, color="tab:orange", marker="D", linestyle=":",
         linewidth=2.0)
    draw(series["seed_per_stream"], "%s reference: per-stream" % src, below=True, side=1, skip_c1_label=True, color="tab:orange", marker="v", linestyle=":",
         linewidth=1.2, alpha=0.85)
    if not xs_all:
        ax.text(0.5, 0.5, "no level produced a steady-state window", transform=ax.transAxes, ha="center")
    ax.set_xscale("log", base=2)
    ticks = sorted(xs_all) or [1]
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("concurrency (simultaneous streams)")
    ax.set_ylabel("decode throughput (tokens/s)")
    ax.set_ylim(bottom=0)
    top = ax.get_ylim()[1]
    ax.set_ylim(0, top * 1.08)
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title("DeepSeek-V4-Flash decode tok/s vs concurrency: profile %s\n%s output tokens, thinking %s, %s UTC"
                 % (report.get("profile") or "?", s.get("max_tokens"), "on" if s.get("thinking") else "off",
                    report.get("started_utc") or "?"), fontsize=11)
    ax.legend(loc="upper left", fontsize=9, framealpha=0.9)
    note = "Seed reference: %s" % (series["seed_source"] or "none for this profile")
    if series["seed_conditions"]:
        note += "\nseed conditions: %s" % series["seed_conditions"]
    note += "\nmeasured: steady-state window, tokens from streamed usage (see report header)"
    fig.text(0.01, 0.01, note, fontsize=7, va="bottom", ha="left", wrap=True)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path)
    plt.close(fig)
    return path


def benchy_series(report: dict[str, Any]) -> dict[str, Any]:
    """Per cell (label 'cN dD'): measured and seed pp and tg tok/s (testable without matplotlib)."""
    cells = report.get("cells") or []
    return {
        "labels": ["c%d d%d" % (c["concurrency"], c["depth"]) for c in cells],
        "pp": [c.get("pp_tps") for c in cells], "seed_pp": [c.get("seed_pp_tps") for c in cells],
        "tg": [c.get("tg_tps") for c in cells], "seed_tg": [c.get("seed_tg_tps") for c in cells],
        "seed_source": (report.get("seed_reference") or {}).get("source"),
    }


def render_benchy_plot(report: dict[str, Any], path: str, dpi: int = 120) -> str:
    """Two panels (pp and tg tok/s per cell), measured bars beside the seed's."""
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    series = benchy_series(report)
    s = report.get("settings") or {}
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 5.5), dpi=dpi)
    xs = list(range(len(series["labels"])))
    src = _short_source(series["seed_source"]) if series["seed_source"] else None
    for ax, key, title in ((axes[0], "pp", "prompt processing (pp%s) tok/s" % s.get("pp")),
                           (axes[1], "tg", "token generation (tg%s) tok/s" % s.get("tg"))):
        meas = [v or 0.0 for v in series[key]]
        seed = series["seed_" + key]
        ax.bar([x - 0.2 for x in xs], meas, width=0.4, color="tab:blue", label="measured")
        for x, v in zip(xs, series[key]):
            if v is not None:
                ax.annotate("%.1f" % v, (x - 0.2, v), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
        if src and any(v is not None for v in seed):
            ax.bar([x + 0.2 for x in xs], [v or 0.0 for v in seed], width=0.4, color="tab:orange", label="%s reference" % src)
            for x, v in zip(xs, seed):
                if v is not None:
                    ax.annotate("%.1f" % v, (x + 0.2, v), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
        ax.set_xticks(xs)
        ax.set_xticklabels(series["labels"])
        ax.set_xlabel("concurrency / context depth")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, (ax.get_ylim()[1] or 1.0) * 1.12)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    fig.suptitle("llama-benchy %s: profile %s, %s UTC" % (report.get("llama_benchy_version"), report.get("profile") or "?",
                                                          report.get("started_utc") or "?"), fontsize=11)
    fig.text(0.01, 0.01, "Seed reference: %s" % (series["seed_source"] or "none for this profile"), fontsize=7)
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    fig.savefig(path)
    plt.close(fig)
    return path
