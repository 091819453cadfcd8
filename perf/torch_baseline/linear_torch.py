#!/usr/bin/env python3
"""The reference framework on softfuse's fused workloads: Linear -> GELU -> softmax and
Linear -> BatchNorm1d (training) -> scale -> softmax, 1024 x 8192 -> 8192 fp32, eager and
torch.compile, with fp32 matmuls and with TF32 allowed, plus the matmul alone.

CUDA events around every call (5 warm-ups, median of --iters); x uniform in [0, 1), the layers
with the framework's default initialization. Writes JSON to --json.

    python3 perf/torch_baseline/linear_torch.py --json torch_fused.json [--no-compile]
"""
import argparse
import datetime
import json
import sys

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    batch, n_in, n_out = 1024, 8192, 8192
    x = torch.rand(batch, n_in, device="cuda")
    results = []
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
           "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
