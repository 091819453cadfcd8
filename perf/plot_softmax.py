#!/usr/bin/env python3
"""GB/s against row length, one panel per GPU, for softfuse's CUDA kernels, softfuse's portable path,
torch.softmax, torch.compile and the device copy, from the committed results:

    python3 perf/plot_softmax.py --card perf/results/h100/softmax.json perf/results/h100/torch_softmax.json \
        perf/results/h100/cuda_softmax_kernels.json --card perf/results/h200/softmax.json \
        perf/results/h200/torch_softmax.json perf/results/h200/cuda_softmax_kernels.json -o perf/results/softmax_gbps.png

Each --card is a run of the softmax benchmark (softmax.json), the reference framework's run on the same
device (torch_softmax.json) and optionally the CUDA kernels' sweep (drawn where its device is the run's).
softfuse's points are CUDA-event medians of back-to-back calls where softmax.json has them (events_ms), as
torch's are, else fenced medians. The workload shapes (shared/WORKLOADS.md) are points from one run of each program; the thin line is the
standalone kernels' sweep at 2^28 elements per shape. 1024x8192 (32 MB, launch-bound) is left out of
the lines: it shares its row length with 32768x8192.
"""
import argparse
import json
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLES = {"softfuse cuda": ("o-", "tab:blue"), "softfuse portable": ("s-", "tab:green"),
          "torch.softmax": ("^-", "tab:red"), "torch.compile": ("v-", "tab:orange"), "copy": ("--", "black")}


def card_series(softfuse, torch, kernels=None):
    """The card's series {name: {cols: GB/s}}, the kernels' sweep [(cols, GB/s)] and the softfuse run."""
    series = {name: {} for name in STYLES}
    sf = json.load(open(softfuse))
    for b in sf["benchmarks"]:
        m = re.match(r"(copy|softmax_specialized|softmax_portable)/(\d+)x(\d+)$", b["name"])
        if not m or int(m.group(2)) * int(m.group(3)) < 2**26:
            continue
        key = {"copy": "copy", "softmax_specialized": "softfuse cuda", "softmax_portable": "softfuse portable"}[m.group(1)]
        # CUDA-event medians of back-to-back calls where the run has them: the torch side's timing
        series[key][int(m.group(3))] = b["GB/s"] * b["median_ms"] / b["events_ms"] if "events_ms" in b else b["GB/s"]
    for s in json.load(open(torch))["shapes"]:
        if s["rows"] * s["cols"] < 2**26:
            continue
        series["torch.softmax"][s["cols"]] = s["softmax"]["gbps"]
        if "compiled" in s:
            series["torch.compile"][s["cols"]] = s["compiled"]["gbps"]
    sweep = []
    if kernels:
        k = json.load(open(kernels))
        if k.get("device", sf.get("device")) == sf.get("device"):
            sweep = sorted((b["cols"], b["gbps"]) for b in k["bench"] if b["group"] == "sweep")
    return series, sweep, sf


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--card", nargs="+", action="append", required=True, metavar="JSON",
                    help="SOFTMAX_JSON TORCH_JSON [KERNELS_JSON] of one GPU")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    cards = [card_series(*c) for c in a.card]
    top = max(g for series, sweep, _ in cards for g in [g for pts in series.values() for g in pts.values()] +
              [g for _, g in sweep])

    fig, axes = plt.subplots(1, len(cards), figsize=(9 * len(cards), 5), squeeze=False, sharey=True)
    for ax, (series, sweep, sf) in zip(axes[0], cards):
        if sweep:
            ax.plot([c for c, _ in sweep], [g for _, g in sweep], "-", lw=1, color="tab:blue", alpha=0.5,
                    label="softfuse cuda, sweep (2^28 elements)")
        for name, pts in series.items():
            xs = sorted(pts)
            fmt, color = STYLES[name]
            ax.plot(xs, [pts[x] for x in xs], fmt, color=color, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("row length (fp32 columns)")
        ax.set_ylim(0, 1.1 * top)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"softmax, {sf.get('device', 'GPU')}, {sf.get('date', '')[:10]}, commit {sf.get('commit', '?')}\n"
                     "(points: the workload shapes; line: kernel sweep)", fontsize=10)
        ax.legend(fontsize=8, loc="lower left")
    axes[0][0].set_ylabel("GB/s (one read + one write per element)")
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)


if __name__ == "__main__":
    main()
