#!/usr/bin/env python3
"""Plot benchmark results (bench/results/*.jsonl) into PNGs, from the newest row of each measured point (the same
choice as tools/results_table.py):

  moe_fused_vs_composed.png   fused vs composed MoE layer time over tokens per rank, one panel per model shape
  gemm_vs_cublaslt.png        grouped FP8 GEMM vs cuBLASLt TFLOPS, one bar pair per GEMM shape
  ep_vs_nccl.png              EP dispatch / combine time over tokens per rank (one line per SM count) vs NCCL

Each panel names the dates and commits its rows come from. Needs matplotlib (Debian: python3-matplotlib; run it
with /usr/bin/python3 where another python3 comes first on PATH).

usage: plot_results.py [--results DIR] [--out DIR] [--check]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_table  # noqa: E402  (load + newest_per_point: one definition of "a point")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SHAPES = ["flash", "pro", "v3"]


def provenance(rows):
    """'2026-11-30, commits 7536afd, c3800b1' for a panel's rows."""
    dates = sorted({r.get("date", "?") for r in rows})
    commits = sorted({r.get("commit", "unknown") for r in rows})
    span = dates[0] if len(dates) == 1 else f"{dates[0]}..{dates[-1]}"
    return f"{span}; commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}"


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.savefig(path, dpi=110, metadata={"Software": None})  # no version stamp: the same data gives the same file
    plt.close(fig)
    return path


def plot_moe(rows, out):
    rows = [r for r in rows if r.get("bench") == "moe" and r.get("time_us") is not None]
    shapes = [s for s in SHAPES if any(r.get("shape") == s for r in rows)]
    if not shapes:
        return None
    fig, axes = plt.subplots(1, len(shapes), figsize=(5.2 * len(shapes), 4.4), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        panel = [r for r in rows if r.get("shape") == shape]
        for op, style in (("composed", "s--"), ("fused", "o-")):
            pts = sorted((r["tokens"], r["time_us"]) for r in panel if r.get("op") == op)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=op)
        for r in panel:
            if r.get("op") == "fused" and r.get("speedup_vs_composed"):
                ax.annotate(f"{r['speedup_vs_composed']:.2f}x", (r["tokens"], r["time_us"]),
                            textcoords="offset points", xytext=(0, -14), ha="center", fontsize=8)
        ranks = sorted({r.get("ranks") for r in panel})
        ax.set(xscale="log", yscale="log", xlabel="tokens per rank", ylabel="layer time (us, median)",
               title=f"{shape}, {'/'.join(map(str, ranks))} ranks: fused vs composed")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right")
        ax.text(0.01, 0.99, provenance(panel), transform=ax.transAxes, va="top", fontsize=7, color="gray")
    fig.suptitle("MoE layer on H200: one fused kernel vs the composed pipeline (labels: fused speedup)")
    fig.tight_layout()
    return save(fig, out, "moe_fused_vs_composed.png")


def plot_gemm(rows, out):
    rows = [r for r in rows if r.get("bench") == "gemm" and r.get("tflops") and r.get("baseline_tflops")]
    if not rows:
        return None
    newest = {}  # nvidia-h200 and nvidia-h200-x2 are the same chip: one bar pair per GEMM shape
    for r in rows:
        newest[(r.get("op"), r.get("shape"), r.get("experts"), r.get("m"), r.get("n"), r.get("k"))] = r
    rows = sorted(newest.values(), key=lambda r: (r.get("op", ""), str(r.get("shape")), r.get("m", 0)))
    panels = [("prefill and training (contiguous layout, L1 with SwiGLU)", [r for r in rows if r["op"] != "masked"]),
              ("decode (masked layout: weight-bandwidth bound)", [r for r in rows if r["op"] == "masked"])]
    panels = [p for p in panels if p[1]]
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 5.0), squeeze=False,
                             gridspec_kw={"width_ratios": [len(p[1]) + 2 for p in panels]})
    for ax, (title, panel) in zip(axes[0], panels):
        labels = [f"{r['shape']} ({r['op']})\n{r.get('experts', 1)}x{r.get('m')}, N{r.get('n')} K{r.get('k')}"
                  for r in panel]
        xs = range(len(panel))
        ax.bar([x - 0.2 for x in xs], [r["tflops"] for r in panel], width=0.4, label="symmoe")
        ax.bar([x + 0.2 for x in xs], [r["baseline_tflops"] for r in panel], width=0.4, label="cuBLASLt (same run)")
        for x, r in zip(xs, panel):
            ax.annotate(f"{r['tflops'] / r['baseline_tflops']:.2f}x", (x - 0.2, r["tflops"]),
                        textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
        ax.set_xticks(list(xs), labels, fontsize=7, rotation=30, ha="right")
        ax.set(ylabel="TFLOPS", title=title)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
        ax.text(0.01, 0.99, provenance(panel), transform=ax.transAxes, va="top", fontsize=7, color="gray")
    fig.suptitle("Grouped FP8 GEMM vs cuBLASLt per shape, H200 (labels: symmoe / cuBLASLt)")
    fig.tight_layout()
    return save(fig, out, "gemm_vs_cublaslt.png")


def plot_ep(rows, out):
    # Whole dispatches/combines only (skip 0 or, since `bench ep --skip` was removed, absent) timed like the
    # baseline (CUDA graphs).
    rows = [r for r in rows if r.get("bench") == "ep" and not r.get("skip")
            and r.get("baseline_timing", "cuda_graph") == "cuda_graph" and r.get("time_us") is not None]
    newest = {}  # one point per line position (older rows of another dtype label or device kind give way)
    for r in rows:
        newest[(r.get("shape"), r.get("op"), r.get("ranks"), r.get("tokens"), r.get("sms"))] = r
    rows = list(newest.values())
    shapes = [s for s in ("v3", "flash", "pro") if any(r.get("shape") == s for r in rows)]
    if not shapes:
        return None
    ops = ["dispatch", "combine"]
    fig, axes = plt.subplots(len(shapes), 2, figsize=(11, 4.2 * len(shapes)), squeeze=False)
    for i, shape in enumerate(shapes):
        for ax, op in zip(axes[i], ops):
            panel = [r for r in rows if r.get("shape") == shape and r.get("op") == op]
            for sms in sorted({r.get("sms") for r in panel}):
                pts = sorted((r["tokens"], r["time_us"]) for r in panel if r.get("sms") == sms)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"symmoe, {sms} SMs")
            base = {}
            for r in panel:  # the NCCL all-to-all does not depend on our SM count: its newest value per tokens
                if r.get("baseline_time_us"):
                    base[r["tokens"]] = r["baseline_time_us"]
            if base:
                pts = sorted(base.items())
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "k^--", label="NCCL all-to-all")
            ranks = sorted({r.get("ranks") for r in panel})
            ax.set(xscale="log", yscale="log", xlabel="tokens per rank", ylabel="time (us, median)",
                   title=f"EP {op}, {shape}, {'/'.join(map(str, ranks))} ranks")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8, loc="lower right")
            if panel:
                ax.text(0.01, 0.99, provenance(panel), transform=ax.transAxes, va="top", fontsize=7, color="gray")
    fig.suptitle("EP dispatch / combine over NVLink vs NCCL (H200)")
    fig.tight_layout()
    return save(fig, out, "ep_vs_nccl.png")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(REPO, "bench", "results"), help="directory of *.jsonl")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "figures"), help="directory for the PNGs")
    ap.add_argument("--check", action="store_true", help="fail unless all three figures were written")
    args = ap.parse_args(argv)
    rows = results_table.newest_per_point(results_table.load([args.results]))
    os.makedirs(args.out, exist_ok=True)
    written = [p for p in (plot_moe(rows, args.out), plot_gemm(rows, args.out), plot_ep(rows, args.out)) if p]
    for p in written:
        print(f"wrote {os.path.relpath(p)} ({os.path.getsize(p)} bytes)")
    if args.check and len(written) != 3:
        print(f"expected 3 figures, wrote {len(written)}: a bench has no rows in {args.results}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
