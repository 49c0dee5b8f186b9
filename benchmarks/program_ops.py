"""Which library functions a compiled batched rollout is made of (what compile time pays for).

XLA's compile time follows the number of operations in the program (design note 17). This
lowers the jitted batched `box_drop` (or `boxes8`) rollout to StableHLO with its source
locations and counts the operations by where they come from:

  function  the innermost frame in `jaxcontact/` (e.g. math.py:quat_mul), "?" where no
            frame is the library's (JAX's own batching and loop code)
  solver    the innermost frame in the solver's files (newton.py, base.py): which part of a
            step (the direction, the search, the floor, ...) put the operation there

It also times tracing, lowering and XLA's compile of the same program.

Usage:
    python -m benchmarks.program_ops [--scene box_drop|boxes8] [--batch 1024] [--steps 500]
Writes results/<name>.json (default name: program_ops_<scene>).
"""

from __future__ import annotations

import argparse
import ast
import collections
import functools
import pathlib
import re
import time

from benchmarks._common import jax_provenance, log, write_results  # noqa: E402
from benchmarks.throughput import batched_rollout, box_drop_scene, initial_states, n_boxes_of  # noqa: E402

_SOLVER_FILES = ("newton.py", "base.py", "descent.py", "dual.py")


class Locations:
    """The `#loc` table of an MLIR module printed with debug info: each location resolved to
    its (file, line) frames, innermost first."""

    def __init__(self, lines):
        self.table = dict(line.split(" = ", 1) for line in lines if line.startswith("#loc"))
        self.frames = functools.lru_cache(maxsize=None)(self._frames)

    def _frames(self, name):
        text = self.table.get(name, "")
        file_line = re.match(r'loc\("([^"]+\.py)":(\d+)', text)
        if file_line:
            return ((file_line.group(1), int(file_line.group(2))),)
        call = re.match(r"loc\(callsite\((#loc\d*) at (#loc\d*)\)\)", text)
        if call:
            return self.frames(call.group(1)) + self.frames(call.group(2))
        named = re.match(r'loc\("[^"]*"\((#loc\d*)\)\)', text)
        if named:
            return self.frames(named.group(1))
        fused = re.match(r"loc\(fused\[(.*)\]\)", text)
        if fused:
            return sum((self.frames(n) for n in re.findall(r"#loc\d*", fused.group(1))), ())
        return ()


@functools.lru_cache(maxsize=None)
def _functions(path):
    """(first line, last line, name) of every function defined in the file at `path`."""
    try:
        tree = ast.parse(pathlib.Path(path).read_text())
    except (OSError, SyntaxError):
        return ()
    return tuple((n.lineno, n.end_lineno, n.name) for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def function_at(path, line):
    """The innermost function of the file `path` that holds `line`."""
    inside = [(a, name) for a, b, name in _functions(path) if a <= line <= b]
    return max(inside)[1] if inside else "<module>"


def count_ops(mlir_lines):
    """(operations, Counter by library function, Counter by solver part)."""
    locations = Locations(mlir_lines)
    op = re.compile(r"= (?:\"?stablehlo\.\w+\"?|call|func\.call)\b.*loc\((#loc\d*)\)\s*$")
    by_function, by_solver, total = collections.Counter(), collections.Counter(), 0
    for line in mlir_lines:
        match = op.search(line)
        if not match:
            continue
        total += 1
        ours = [(p, n) for p, n in locations.frames(match.group(1))
                if "/jaxcontact/" in p and "site-packages" not in p]
        if not ours:
            by_function["?"] += 1
            by_solver["?"] += 1
            continue
        path, line_no = ours[0]
        by_function[f"{path.split('/jaxcontact/')[-1]}:{function_at(path, line_no)}"] += 1
        solver = [f"{pathlib.Path(p).name}:{function_at(p, n)}" for p, n in ours
                  if pathlib.Path(p).name in _SOLVER_FILES]
        by_solver[solver[0] if solver else "outside the solver"] += 1
    return total, by_function, by_solver


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scene", choices=("box_drop", "boxes8"), default="box_drop")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--float64", action="store_true")
    p.add_argument("--top", type=int, default=25, help="rows of each table (default 25)")
    p.add_argument("--name", default=None)
    args = p.parse_args()

    import jax
    import jax.numpy as jnp

    if args.float64:
        jax.config.update("jax_enable_x64", True)
    import jaxcontact as jc

    dtype = jnp.float64 if args.float64 else jnp.float32
    model, state = box_drop_scene(dtype, jc.Newton(), n_boxes_of(args.scene))
    states = initial_states(state, args.batch)
    rollout = batched_rollout(model, args.steps)
    t0 = time.perf_counter()
    traced = rollout.trace(states)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    lowered.compile()
    t3 = time.perf_counter()
    total, by_function, by_solver = count_ops(lowered.as_text(debug_info=True).splitlines())

    def table(counter):
        return [{"where": k, "ops": v, "share": v / total} for k, v in counter.most_common(args.top)]

    doc = {"scene": args.scene, "batch": args.batch, "steps": args.steps,
           "dtype": "float64" if args.float64 else "float32", "trace_s": t1 - t0,
           "lower_s": t2 - t1, "compile_s": t3 - t2, "stablehlo_ops": total,
           "by_function": table(by_function), "by_solver_part": table(by_solver),
           **jax_provenance()}
    log(f"{args.scene} B={args.batch}: trace {t1 - t0:.1f} s, lower {t2 - t1:.1f} s, "
        f"XLA compile {t3 - t2:.1f} s; {total} StableHLO operations")
    for title, rows in (("library function", doc["by_function"]),
                        ("solver part", doc["by_solver_part"])):
        log(f"--- by {title}")
        for row in rows:
            log(f"{row['ops']:7d} {100 * row['share']:5.1f} %  {row['where']}")
    write_results(doc, args.name or f"program_ops_{args.scene}")


if __name__ == "__main__":
    main()
