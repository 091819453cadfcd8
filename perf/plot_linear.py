#!/usr/bin/env python3
"""Time per fused layer and GEMM precision on the H100 (batch 1024, in 8192, out 8192), softfuse's CUDA
layers against cuBLAS's GEMM alone in the matching precision, torch eager and torch.compile, from the
committed results of one benchmark run:

    python3 perf/plot_linear.py perf/results/h100/fused.json perf/results/h100/torch_fused.json \
        -o perf/results/h100/fused_layers.png

softfuse tf32x3 (split operands, fp32 accuracy) is drawn in the fp32 group: its peers are the fp32
GEMM and the reference framework in fp32. Medians of CUDA-event timings.
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LAYERS = [("gelu_exact", "gelu", "Linear → GELU → softmax"),
          ("bn_train", "bn_train", "Linear → BatchNorm (training) → softmax"),
          ("bn_infer", "bn_infer", "Linear → BatchNorm (inference) → softmax")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fused")
    ap.add_argument("torch")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    ours = {b["name"]: b["ms"] for b in json.load(open(a.fused))["bench"]}
    th = json.load(open(a.torch))
    theirs = {r["name"]: r["ms"] for r in th["results"]}

    # bars per layer: (label, ms, colour)
    groups = []
    for key, tkey, title in LAYERS:
        groups.append((title, [
            ("cuBLAS SGEMM alone", ours["cublas_sgemm"], "#9e9e9e"),
            ("torch eager fp32", theirs[f"{tkey}_fp32_eager"], "#e6a04e"),
            ("torch.compile fp32", theirs[f"{tkey}_fp32_compile"], "#c0392b"),
            ("softfuse fp32", ours[f"{key}_fp32"], "#2e86c1"),
            ("softfuse tf32x3", ours[f"{key}_tf32x3"], "#1b4f72"),
            ("cuBLAS TF32 alone", ours["cublas_tf32"], "#cfcfcf"),
            ("torch eager TF32", theirs[f"{tkey}_tf32_eager"], "#f5cba7"),
            ("torch.compile TF32", theirs[f"{tkey}_tf32_compile"], "#e59866"),
            ("softfuse tf32", ours[f"{key}_tf32"], "#85c1e9"),
        ]))

    fig, ax = plt.subplots(figsize=(12, 6.2))
    width = 0.09
    labels_done = set()
    for gi, (title, bars) in enumerate(groups):
        for bi, (label, ms, colour) in enumerate(bars):
            x = gi + (bi - (len(bars) - 1) / 2) * width
            ax.bar(x, ms, width * 0.92, color=colour, label=None if label in labels_done else label)
            ax.text(x, ms + 0.03, f"{ms:.2f}", ha="center", va="bottom", fontsize=6.5, rotation=90)
            labels_done.add(label)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g[0] for g in groups], fontsize=9)
    ax.set_ylabel("time per call, ms (median)")
    ax.set_ylim(0, max(ms for _, bars in groups for _, ms, _ in bars) * 1.18)
    ax.set_title(f"Fused layers, batch 1024 × in 8192 × out 8192, {json.load(open(a.fused))['device']} "
                 f"(torch {th.get('torch', '?')}, same run on the same device)", fontsize=10)
    ax.legend(fontsize=8, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.07))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.output, dpi=130)


if __name__ == "__main__":
    main()
