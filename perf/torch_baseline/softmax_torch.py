#!/usr/bin/env python3
"""torch.softmax, torch.compile(softmax) and a device-to-device copy on softfuse's softmax shapes.

Times each with CUDA events around every call (5 warm-ups, median of --iters), fp32, x uniform
in [0, 1). GB/s counts bytes read + written (2 * rows * cols * 4). Writes JSON to --json.

    python3 perf/torch_baseline/softmax_torch.py --json torch_softmax.json [--no-compile]
"""
import argparse
import datetime
import json
import statistics
import sys

import torch
import torch._dynamo

# The 14 shapes of softfuse_bench_softmax on GPUs (every row-length regime).
SHAPES = [(4096, 393216), (65536, 1024), (32768, 8192), (8192, 32768), (1024, 8192), (128, 1048576), (16384, 4096),
          (2048, 131072), (512, 524288), (256, 2097152), (32, 8388608), (1, 33554432), (4194304, 32), (100000, 1000)]


def timed(fn, iters, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in ev)
    return {"ms": statistics.median(t), "ms_min": t[0], "ms_max": t[-1]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--shapes", default=None, help="e.g. 4096x393216,1024x8192")
    args = ap.parse_args()
    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.cuda.get_device_name()
    sm = lambda t: torch.softmax(t, dim=-1)
    compiled = None if args.no_compile else torch.compile(sm, dynamic=False)
    if compiled is not None:
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    rows_out = []
    for r, c in shapes:
        g = torch.Generator(device="cuda").manual_seed(r * 7 + c)
        x = torch.rand(r, c, device="cuda", generator=g)
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        entry = {"rows": r, "cols": c}
        entry["copy"] = timed(lambda: y.copy_(x), args.iters)
        entry["softmax"] = timed(lambda: sm(x), args.iters)
        if compiled is not None:
            ref = sm(x)
            got = compiled(x)
            entry["compile_max_abs_diff"] = float((ref - got).abs().max())
            del ref, got
            entry["compiled"] = timed(lambda: compiled(x), args.iters)
        for k in ("copy", "softmax", "compiled"):
            if k in entry:
                entry[k]["gbps"] = nbytes / (entry[k]["ms"] * 1e6)
        line = f"torch {r:6d} x {c:<8d} softmax {entry['softmax']['ms']:.4f} ms {entry['softmax']['gbps']:7.1f} GB/s"
        if "compiled" in entry:
            line += f" | compiled {entry['compiled']['ms']:.4f} ms {entry['compiled']['gbps']:7.1f} GB/s"
        line += f" | copy {entry['copy']['ms']:.4f} ms {entry['copy']['gbps']:7.1f} GB/s"
        print(line, flush=True)
        rows_out.append(entry)
        del x, y
        torch.cuda.empty_cache()
    out = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": dev,
        "command": " ".join(sys.argv),
        "torch": torch.__version__,
        "timing": "CUDA events around each call, 5 warm-ups, median of the timed repetitions; GB/s = bytes read + written",
        "shapes": rows_out,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
