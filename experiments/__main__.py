"""Run the experiments and write an index of their results (`make experiments`).

    python -m experiments [--full] [--only NAME ...] [--out-dir DIR] [--timeout S]

Each experiment runs in its own process as `python -m experiments.<name> --quick --out-dir DIR`
(without `--quick` with `--full`), one after another, its log in DIR/logs/<name>.log. The index,
DIR/index.json and DIR/index.md, gives per experiment its exit code, wall time and the claims
its JSON marks (every `agrees`, `agrees_with_thesis` or `agrees_with_paper` flag in it: how
many hold, which do not). A failing or timed-out experiment is recorded and the next one runs; the exit code is
1 if any failed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
FLAGS = ("agrees", "agrees_with_thesis", "agrees_with_paper")


def names():
    return sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))


def claims(doc, where=""):
    """(path, flag) of every claim flag in a JSON document."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key in FLAGS and isinstance(value, bool):
                yield where or key, value
            else:
                yield from claims(value, f"{where}.{key}" if where else key)
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from claims(value, f"{where}[{i}]")


def run(name, args):
    log = args.out_dir / "logs" / f"{name}.log"
    cmd = [sys.executable, "-m", f"experiments.{name}", "--out-dir", str(args.out_dir)]
    cmd += [] if args.full else ["--quick"]
    start = time.perf_counter()
    with log.open("w") as out:
        try:
            code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=HERE.parent,
                                  timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    row = {"experiment": name, "exit": code, "wall_s": round(time.perf_counter() - start, 1),
           "log": str(log)}
    result = args.out_dir / f"{name}.json"
    if code == 0 and result.exists():
        found = list(claims(json.loads(result.read_text())))
        row["claims"] = len(found)
        row["claims_hold"] = sum(flag for _, flag in found)
        row["claims_not_holding"] = [path for path, flag in found if not flag]
    return row


def table(rows):
    lines = ["| experiment | exit | wall s | claims holding |", "| --- | --- | --- | --- |"]
    for r in rows:
        held = f"{r['claims_hold']} / {r['claims']}" if "claims" in r else ""
        lines.append(f"| {r['experiment']} | {r['exit']} | {r['wall_s']} | {held} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true", help="the full runs (hours), not --quick")
    p.add_argument("--only", nargs="+", choices=names(), metavar="NAME")
    p.add_argument("--out-dir", type=pathlib.Path, default=HERE.parent / "results" / "experiments")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per experiment")
    args = p.parse_args(argv)
    (args.out_dir / "logs").mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.only or names():
        print(f"[experiments] {name} ...", file=sys.stderr, flush=True)
        rows.append(run(name, args))
        r = rows[-1]
        print(f"[experiments] {name}: exit {r['exit']}, {r['wall_s']} s", file=sys.stderr,
              flush=True)
        (args.out_dir / "index.json").write_text(json.dumps(rows, indent=2) + "\n")
        (args.out_dir / "index.md").write_text(table(rows))
    print(table(rows))
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
