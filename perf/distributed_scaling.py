#!/usr/bin/env python3
"""Weak scaling of softfuse::distributed from `softfuse --distributed ... --json` files.

  distributed_scaling.py --command CMD --commit SHA run1.json run2.json ...  > distributed_scaling.json
  distributed_scaling.py --table distributed_scaling.json                    (a text table)

Each input is one run (one engine, one rank count) of one or more workloads with the same per-rank sizes.
The output lists, per engine and workload, the median time per step on N ranks and the efficiency
t(1 rank) / t(N ranks): the same local size on every rank, so 1.0 is perfect weak scaling.
"""
import argparse
import datetime
import json
import sys


def combine(paths, command, commit):
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    rows = {}
    for run in runs:
        for w in run["workloads"]:
            key = (run["engine"], w["workload"], tuple(w["shape_per_rank"]))
            rows.setdefault(key, {})[run["ranks"]] = {
                "median_ms": w["median_ms"], "times_ms": w["times_ms"], "shape": w["shape"], "pass": w["pass"],
                "devices": run["devices"], "run_command": run["command"], "run_date": run["date"]}
    results = []
    for (engine, workload, shape), by_ranks in sorted(rows.items()):
        base = by_ranks.get(1)
        for ranks in sorted(by_ranks):
            r = by_ranks[ranks]
            results.append({"engine": engine, "workload": workload, "shape_per_rank": list(shape), "ranks": ranks,
                            "shape": r["shape"], "median_ms": r["median_ms"], "times_ms": r["times_ms"],
                            "efficiency": base["median_ms"] / r["median_ms"] if base else None,
                            "check_pass": r["pass"], "devices": r["devices"], "run_command": r["run_command"]})
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": command, "commit": commit,
            "devices": sorted({d for run in runs for d in run["devices"]}),
            "metric": "median time per step over the slowest rank; efficiency = t(1 rank) / t(N ranks), same size per rank",
            "results": results}


def table(path):
    with open(path) as f:
        data = json.load(f)
    print(f"weak scaling, commit {data['commit']}, {data['date']}")
    print(f"{'engine':6} {'workload':26} {'ranks':>5} {'ms/step':>10} {'efficiency':>10}  check")
    for r in data["results"]:
        eff = f"{r['efficiency']:.3f}" if r["efficiency"] is not None else "-"
        print(f"{r['engine']:6} {r['workload']:26} {r['ranks']:5d} {r['median_ms']:10.3f} {eff:>10}  "
              f"{'PASS' if r['check_pass'] else 'FAIL'}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="*")
    p.add_argument("--command", default="")
    p.add_argument("--commit", default="")
    p.add_argument("--table")
    a = p.parse_args()
    if a.table:
        table(a.table)
    else:
        json.dump(combine(a.runs, a.command, a.commit), sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
