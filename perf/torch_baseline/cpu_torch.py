#!/usr/bin/env python3
"""The reference framework on the CPU, on softfuse's host workloads: torch.softmax (fp32) on
4096x65536, 65536x1024 and 64x1048576 with a parallel copy of the same tensors as the bandwidth
baseline, and the fused layers in eager mode (Linear -> GELU -> softmax, Linear -> BatchNorm1d
(training and inference) -> scale -> softmax) on 1024x8192x8192 and 256x4096x4096 with the matmul
alone, all with --threads threads (default 16); --fused-shapes picks some of those layer shapes.

Wall time around each call (3 warm-ups, median of --iters), x uniform in [0, 1). GB/s counts bytes
read + written (2 * rows * cols * 4). Writes JSON to --json. Compare with

    OMP_NUM_THREADS=16 OMP_PROC_BIND=spread OMP_PLACES=threads build/perf/softfuse_bench_softmax
    OMP_NUM_THREADS=16 OMP_PROC_BIND=spread OMP_PLACES=threads build/perf/softfuse_bench_linear

built with the OpenMP backend, on the same machine in the same run.

    python3 perf/torch_baseline/cpu_torch.py --json torch_cpu.json [--threads 16] [--commit abc123]
"""
import argparse
import datetime
import json
import platform
import statistics
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from linear_torch import LinearBatchNormSoftmax, LinearGeluSoftmax  # noqa: E402

SOFTMAX_SHAPES = [(4096, 65536), (65536, 1024), (64, 1048576)]
FUSED_SHAPES = [(1024, 8192, 8192), (256, 4096, 4096)]


def timed(fn, iters, warmup=3):
    for _ in range(warmup):
        fn()
    t = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        t.append((time.perf_counter() - start) * 1e3)
    t.sort()
    return {"ms": statistics.median(t), "ms_min": t[0], "ms_max": t[-1]}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--fused-shapes", default=",".join("x".join(map(str, s)) for s in FUSED_SHAPES),
                    help="batch x in x out of the layers, comma-separated")
    ap.add_argument("--commit", default="", help="the softfuse commit of the run the results belong to")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    softmax = []
    for r, c in SOFTMAX_SHAPES:
        x = torch.rand(r, c)
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        entry = {"rows": r, "cols": c, "copy": timed(lambda: y.copy_(x), args.iters),
                 "softmax": timed(lambda: torch.softmax(x, dim=-1), args.iters)}
        for k in ("copy", "softmax"):
            entry[k]["gbps"] = nbytes / (entry[k]["ms"] * 1e6)
        entry["softmax_of_copy"] = entry["copy"]["ms"] / entry["softmax"]["ms"]
        print(f"torch cpu {r:6d} x {c:<8d} softmax {entry['softmax']['ms']:.2f} ms {entry['softmax']['gbps']:6.1f} GB/s"
              f" | copy {entry['copy']['ms']:.2f} ms {entry['copy']['gbps']:6.1f} GB/s", flush=True)
        softmax.append(entry)
        del x, y
    fused = []
    with torch.no_grad():
        for batch, n_in, n_out in (tuple(map(int, s.split("x"))) for s in args.fused_shapes.split(",")):
            x = torch.rand(batch, n_in)
            w = torch.nn.Linear(n_in, n_out).weight
            entry = {"batch": batch, "in": n_in, "out": n_out, "matmul": timed(lambda: torch.matmul(x, w.t()), args.iters)}
            for name, cls, train in (("gelu", LinearGeluSoftmax, False), ("bn_train", LinearBatchNormSoftmax, True),
                                     ("bn_infer", LinearBatchNormSoftmax, False)):
                m = cls(n_in, n_out)
                m.train(train)
                entry[name] = timed(lambda: m(x), args.iters)
                entry[name]["of_matmul"] = entry["matmul"]["ms"] / entry[name]["ms"]
            print(f"torch cpu {batch}x{n_in}x{n_out} matmul {entry['matmul']['ms']:.1f} ms | gelu {entry['gelu']['ms']:.1f}"
                  f" | bn_train {entry['bn_train']['ms']:.1f} | bn_infer {entry['bn_infer']['ms']:.1f} ms", flush=True)
            fused.append(entry)
    out = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": cpu_model(),
        "machine": platform.node(),
        "command": " ".join(sys.argv),
        "commit": args.commit,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "timing": "wall time around each call, 3 warm-ups, median of the timed repetitions; GB/s = bytes read + written",
        "softmax": softmax,
        "fused": fused,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
