"""Shared plumbing of the benchmark scripts: logging, provenance, subprocesses, timing, output.

The scripts run from the repository root as `python -m benchmarks.<name>` (the package's
docstring), and import this module as `benchmarks._common`. Nothing here imports jax at module level: the throughput
driver must not (its workers choose float32 or float64 before importing it), and the timing
helpers import it when called.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pathlib
import platform
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
# where write_results puts results/<name>.json; the suite (`python -m benchmarks`) points its
# benchmarks at its own folder through this variable
RESULTS_ENV = "JAXCONTACT_BENCH_RESULTS"
RESULTS = pathlib.Path(os.environ.get(RESULTS_ENV) or REPO / "results")


def log(msg=""):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# provenance


def git(*args):
    """stdout of `git args...` in the repository, None if git fails."""
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30)
        return out.stdout if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(**extra):
    """Where the numbers come from: commit, local changes to the library, machine, load.

    `extra` entries (e.g. jax's version and backend, from scripts that have imported it) are
    added to the dict.
    """
    head = git("rev-parse", "HEAD")
    diff = git("diff", "HEAD", "--", "jaxcontact")
    return {
        "git_head": head.strip() if head else None,
        "jaxcontact_dirty": bool(diff) if diff is not None else None,
        "jaxcontact_diff_sha1": hashlib.sha1(diff.encode()).hexdigest()[:12] if diff else None,
        **extra,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "xla_flags_env": os.environ.get("XLA_FLAGS"),
        "loadavg_start": list(os.getloadavg()),
        "time_start": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def jax_provenance():
    """provenance() with jax's version and backend (imports jax)."""
    import jax

    return provenance(jax=jax.__version__, backend=jax.default_backend(),
                      compiler_options=compiler_options())


def compiler_options():
    """The XLA options `jc.jit` compiles jaxcontact's programs with here (None where the
    library predates `jc.jit`: a worktree of an older commit)."""
    import jaxcontact

    compiling = getattr(jaxcontact, "compiling", None)
    return compiling.compiler_options() if compiling else None


def jit(fun, **kwargs):
    """`jc.jit` (the library's XLA settings), or `jax.jit` for commits that predate it."""
    import jax
    import jaxcontact

    return getattr(jaxcontact, "jit", jax.jit)(fun, **kwargs)


# --------------------------------------------------------------------------------------------
# subprocesses


def cpu_ticks(pid):
    """CPU time (user + system, clock ticks) of process `pid` so far, None if unreadable."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def last_json(stdout):
    """The last line of `stdout` that parses as a JSON object, or None."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def run_subprocess(cmd, what, timeout=None, hang_s=None, stream_stderr=True, env=None):
    """Run `cmd`, parse the last stdout line that is a JSON object; errors become a dict.

    Watchdog: XLA's CPU runtime has been seen to wedge on this machine (every thread parked on
    a futex inside block_until_ready, no CPU used, forever: observed twice in the MJX harness
    at large batches). A child whose CPU time has not advanced for `hang_s` seconds is killed
    and reported as hung; `timeout` bounds the total wall time. With `stream_stderr=False`
    the child's stderr is captured and its tail returned on failure.
    """
    cmd = [str(c) for c in cmd]
    log(f"[{what}] {' '.join(cmd)}")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=None if stream_stderr else subprocess.PIPE, text=True,
                            env=env, cwd=REPO)
    prev_ticks, last_progress = None, time.perf_counter()
    while True:
        try:
            stdout, stderr = proc.communicate(timeout=10)
            break
        except subprocess.TimeoutExpired:
            now = time.perf_counter()
            ticks = cpu_ticks(proc.pid)
            # progress: at least 0.1 s of CPU over the last ~10 s poll (a wedged runtime still
            # ticks now and then, a working one uses about 10 s per poll per busy core)
            if ticks is None or prev_ticks is None or ticks - prev_ticks >= 10:
                last_progress = now
            prev_ticks = ticks
            reason = None
            if timeout is not None and now - t0 > timeout:
                reason = f"timed out after {timeout:.0f} s"
            elif hang_s is not None and now - last_progress > hang_s:
                reason = f"hung: no CPU time used for {now - last_progress:.0f} s"
            if reason:
                proc.kill()
                proc.communicate()
                log(f"[{what}] killed: {reason}")
                return {"error": reason, "timed_out": True, "wall_s": now - t0}
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (stderr or "")[-2000:] if not stream_stderr else "(see stderr above)"
        return {"error": f"exit status {proc.returncode}", "stderr_tail": tail,
                "wall_s": wall}
    out = last_json(stdout)
    if out is None:
        return {"error": "no JSON on stdout", "stdout_tail": stdout[-2000:], "wall_s": wall}
    out["wall_s"] = wall
    return out


# --------------------------------------------------------------------------------------------
# timing (jax imported when called)


def timed_compile(fn, *args):
    """AOT-compile a jitted function; returns (compiled, seconds)."""
    t0 = time.perf_counter()
    compiled = fn.lower(*args).compile()
    return compiled, time.perf_counter() - t0


def timed_runs(fn, *args, repeats=3, min_time_s=0.0, max_runs=50, max_repeat_s=math.inf):
    """Wall times of calls `fn(*args)` (each to block_until_ready), the first one included.

    At least `repeats` calls, more (up to `max_runs`) while their total is under `min_time_s`;
    fewer once one call took longer than `max_repeat_s` (long runs vary little). The previous
    call's outputs are dropped before the next one starts. Returns (seconds per call, the last
    call's outputs).
    """
    import jax

    runs, out = [], None
    for i in range(max_runs):
        out = None
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        runs.append(time.perf_counter() - t0)
        if i + 1 >= repeats and sum(runs) >= min_time_s:
            break
        if i + 1 < repeats and runs[-1] > max_repeat_s:
            log(f"  a run took {runs[-1]:.0f} s > {max_repeat_s:.0f} s: no further repeats")
            break
    return runs, out


def best_of_interleaved(fns, *args, repeats=3, min_time_s=2.0, max_rounds=100):
    """Best wall time of each function, timed in interleaved rounds after one warm-up call each.

    At least `repeats` rounds, and more (up to `max_rounds`) until `min_time_s` has passed:
    runs of ~0.1 s on a shared 2-core machine need more than 3 samples for a stable minimum,
    and interleaving keeps load changes from biasing one function against another.
    Returns ({name: best seconds}, rounds).
    """
    import jax

    for fn in fns.values():
        jax.block_until_ready(fn(*args))
    best = {name: math.inf for name in fns}
    start, rounds = time.perf_counter(), 0
    while rounds < repeats or (time.perf_counter() - start < min_time_s and rounds < max_rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            best[name] = min(best[name], time.perf_counter() - t0)
        rounds += 1
    return best, rounds


# --------------------------------------------------------------------------------------------
# output


def write_results(doc, name):
    """Write `doc` as results/<name>.json (recording the path in doc["output"]) and print it
    to stdout. Returns the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    doc["output"] = str(path)
    text = json.dumps(doc, indent=2)
    path.write_text(text + "\n")
    print(text)
    return path
