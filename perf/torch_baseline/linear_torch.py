#!/usr/bin/env python3
"""The reference framework on softfuse's fused workloads: Linear -> GELU -> softmax and
Linear -> BatchNorm1d (training) -> scale -> softmax, 1024 x 8192 -> 8192 fp32, eager and
torch.compile, with fp32 matmuls and with TF32 allowed, plus the matmul alone.

CUDA events around every call (5 warm-ups, median of --iters); x uniform in [0, 1), the layers
with the framework's default initialization. Writes JSON to --json.

--full-clocks times the fp32 side the way linear_kernels_bench --fp32-full-clocks times softfuse's:
torch.mm, F.linear and the three eager layers, each a block of --iters calls after --cool seconds
idle, in --rounds rounds; it also records the GEMM kernels each one launches (the profiler) and the
cuBLAS library the framework loads.

    python3 perf/torch_baseline/linear_torch.py --json torch_fused.json [--no-compile]
    python3 perf/torch_baseline/linear_torch.py --full-clocks --iters 10 --rounds 3 --cool 4 --json F
"""
import argparse
import datetime
import json
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from softmax_torch import timed  # noqa: E402


class LinearGeluSoftmax(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = torch.nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.softmax(torch.nn.functional.gelu(self.linear(x)), dim=1)


class LinearBatchNormSoftmax(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = torch.nn.Linear(n_in, n_out)
        self.bn = torch.nn.BatchNorm1d(n_out)
        self.scale = torch.nn.Parameter(torch.ones(1))

    def forward(self, x):
        return torch.softmax(self.scale * self.bn(self.linear(x)), dim=1)


def gemm_kernels(fn):
    """Names of the kernels one call of fn launches."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def cublas_library():
    """The libcublasLt the process has loaded (from /proc/self/maps)."""
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "libcublas" in line}
    return sorted(libs)


def full_clocks(args, x):
    torch.backends.cuda.matmul.allow_tf32 = False
    n_in = x.shape[1]
    lin = torch.nn.Linear(n_in, 8192).cuda()
    w, b = lin.weight, lin.bias
    cases = [("mm_fp32", lambda: torch.mm(x, w.t())), ("linear_fp32", lambda: torch.nn.functional.linear(x, w, b))]
    for name, cls, train in (("gelu", LinearGeluSoftmax, False), ("bn_train", LinearBatchNormSoftmax, True),
                             ("bn_infer", LinearBatchNormSoftmax, False)):
        model = cls(n_in, 8192).cuda().train(train)
        cases.append((f"{name}_fp32_eager", lambda m=model: m(x)))
    results, kernels = [], {}
    for name, fn in cases:
        fn()
        kernels[name] = gemm_kernels(fn)
        print(f"kernels {name}: {kernels[name]}", flush=True)
    for rnd in range(args.rounds):
        for name, fn in cases:
            torch.cuda.synchronize()
            time.sleep(args.cool)
            r = timed(fn, args.iters, warmup=3)
            results.append({"name": f"full_clocks_{name}", "round": rnd, "cool_s": args.cool, **r})
            print(f"torch {name:20s} round {rnd} {r['ms']:.4f} ms", flush=True)
    for name, _ in cases:
        ms = sorted(e["ms"] for e in results if e["name"] == f"full_clocks_{name}")
        print(f"summary torch {name:20s} median of round medians {ms[len(ms) // 2]:.4f} ms "
              f"(min {ms[0]:.4f}, max {ms[-1]:.4f})", flush=True)
    return results, {"kernels": kernels, "cublas": cublas_library(), "torch_cuda": torch.version.cuda}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--full-clocks", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cool", type=float, default=4)
    args = ap.parse_args()
    torch.manual_seed(0)
    batch, n_in, n_out = 1024, 8192, 8192
    x = torch.rand(batch, n_in, device="cuda")
    results, extra = [], {}
    if args.full_clocks:
        with torch.no_grad():
            results, extra = full_clocks(args, x)
    else:
        with torch.no_grad():
            for tf32 in (False, True):
                torch.backends.cuda.matmul.allow_tf32 = tf32
                prec = "tf32" if tf32 else "fp32"
                w = torch.nn.Linear(n_in, n_out).cuda().weight
                r = timed(lambda: torch.matmul(x, w.t()), args.iters)
                results.append({"name": f"matmul_{prec}", **r})
                for name, cls, train in (("gelu", LinearGeluSoftmax, False), ("bn_train", LinearBatchNormSoftmax, True),
                                         ("bn_infer", LinearBatchNormSoftmax, False)):
                    model = cls(n_in, n_out).cuda().train(train)
                    r = timed(lambda: model(x), args.iters)
                    results.append({"name": f"{name}_{prec}_eager", **r})
                    if not args.no_compile:
                        compiled = torch.compile(model)
                        r = timed(lambda: compiled(x), args.iters)
                        results.append({"name": f"{name}_{prec}_compile", **r})
                    for e in results[-2:] if not args.no_compile else results[-1:]:
                        print(f"torch {e['name']:24s} {e['ms']:.4f} ms", flush=True)
    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "device": torch.cuda.get_device_name(),
           "torch": torch.__version__, "batch": batch, "in": n_in, "out": n_out, "iters": args.iters,
           "results": results, **extra}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
