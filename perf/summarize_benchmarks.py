#!/usr/bin/env python3
"""Condense Google Benchmark JSON from the softfuse benchmarks into the results file committed under
perf/results/: date, device, machine (host name, CPUs, the Kokkos concurrency), command, commit, and per benchmark the median time and the counters
(GB/s or TFLOP/s, and the same-run baseline's).

    python3 perf/summarize_benchmarks.py --command "…" --commit abc123 bench_softmax.json [...] > out.json
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--command", required=True)
    ap.add_argument("--commit", default="")
    args = ap.parse_args()
    out = {"command": args.command, "commit": args.commit, "benchmarks": []}
    for path in args.inputs:
        with open(path) as f:
            data = json.load(f)
        ctx = data.get("context", {})
        out.setdefault("date", ctx.get("date"))
        out.setdefault("device", ctx.get("device"))
        out.setdefault("machine", ctx.get("host_name"))
        out.setdefault("num_cpus", ctx.get("num_cpus"))
        out.setdefault("concurrency", ctx.get("concurrency"))
        out.setdefault("execution_space", ctx.get("execution_space"))
        out.setdefault("kokkos_version", ctx.get("kokkos_version"))
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate":
                continue
            row = {"name": b["name"].replace("/real_time", ""), "iterations": b.get("iterations")}
            for key, value in b.items():
                if key in ("median_ms", "GB/s", "copy_GB/s", "of_copy", "of_gemm") or key.endswith(("TFLOP/s", "_ms", "ratio", "_of_copy")):
                    row[key] = round(value, 6)
            out["benchmarks"].append(row)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
