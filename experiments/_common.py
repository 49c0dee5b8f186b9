"""Shared plumbing of the experiment scripts: arguments, provenance, JSON and PNG output, and
the few measurements several of them take (bounce counting).

Every experiment writes `<name>.json` (parameters, measured numbers, provenance) and
`<name>.png` into `--out-dir` (default `docs/experiments/`, where the docs link them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys

import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "docs" / "experiments"


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every experiment shares."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out-dir", type=pathlib.Path, default=DEFAULT_OUT,
                   help="where <name>.json and <name>.png are written (default docs/experiments)")
    p.add_argument("--quick", action="store_true",
                   help="a reduced run (fewer steps/points) for smoke checks")
    return p


def use_compile_cache() -> None:
    """Keep compiled programs in `.jax_cache/` (or `$JAXCONTACT_CACHE`) across runs: re-runs
    of the same settings load them instead of compiling (programs over 1 s to compile)."""
    import jax

    jax.config.update("jax_compilation_cache_dir",
                      os.environ.get("JAXCONTACT_CACHE", str(REPO / ".jax_cache")))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def log(msg: str = "") -> None:
    print(msg, file=sys.stderr, flush=True)


def provenance() -> dict:
    """Commit, versions and machine of this run."""
    import jax

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=REPO,
                                    capture_output=True, text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", False
    return {"commit": commit, "dirty": dirty, "jax": jax.__version__,
            "python": platform.python_version(), "machine": platform.platform(),
            "backend": jax.default_backend(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def finish_figure(fig, axes, title: str, legend: float | None = None):
    """Grid every panel and title the figure; returns it. With `legend` (a font size), every
    panel also gets its legend."""
    for ax in axes:
        if legend is not None:
            ax.legend(fontsize=legend)
        ax.grid(True, which="major", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    return fig


def count_bounces(heights, below: float) -> int:
    """Impacts along a path of heights (a body's c.o.m. z per step): the steps at which the
    path drops below `below` after being at or above it."""
    low = np.asarray(heights) < below
    return int(np.sum(low[1:] & ~low[:-1]))


def save(name: str, result: dict, figure, out_dir: pathlib.Path) -> None:
    """Write result (+ provenance) as <name>.json and the matplotlib figure as <name>.png."""
    out_dir.mkdir(parents=True, exist_ok=True)
    result = {"experiment": name, **result, "provenance": provenance()}
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=float) + "\n")
    if figure is not None:
        figure.savefig(out_dir / f"{name}.png", dpi=110, bbox_inches="tight")
    log(f"wrote {path} and {name}.png")
    print(json.dumps(result, indent=2, default=float))
