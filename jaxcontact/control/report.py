"""What a training run shows and leaves behind: a progress bar, a JSON log, a learning curve."""

from __future__ import annotations

import json
import math
import pathlib
import sys
import time
import warnings


class Progress:
    """A one-line progress bar on standard error: updates done, reward, gradient norm, rate.

    On a terminal it redraws in place; otherwise (a log file, CI) it prints a line at every
    tenth of the run. `enabled=False` prints nothing."""

    def __init__(self, total: int, enabled: bool = True, stream=None, width: int = 24):
        self.total, self.enabled, self.width = total, enabled, width
        self.stream = sys.stderr if stream is None else stream
        self.live = enabled and getattr(self.stream, "isatty", lambda: False)()
        self.start = time.perf_counter()
        self.next_line = 0

    def update(self, done: int, row: dict):
        if not self.enabled:
            return
        rate = done / max(time.perf_counter() - self.start, 1e-9)
        filled = int(self.width * done / self.total)
        text = (f"update {done}/{self.total} [{'#' * filled}{'.' * (self.width - filled)}] "
                f"reward {row['reward']:.4g}  grad {row['grad_norm']:.3g}  "
                f"converged {100 * row['converged']:.1f} %  {rate:.2f} updates/s")
        if self.live:
            self.stream.write("\r" + text)
            self.stream.flush()
        elif done >= self.next_line or done == self.total:
            self.stream.write(text + "\n")
            self.next_line = done + max(1, self.total // 10)

    def close(self):
        if self.live:
            self.stream.write("\n")
            self.stream.flush()


def _clean(value):
    # JSON has no NaN: write null
    return None if isinstance(value, float) and not math.isfinite(value) else value


def write_log(path, settings: dict, history: list, first_update_seconds: float):
    """The run as JSON: settings, the first update's time (compilation), one record per
    update."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"settings": settings, "first_update_seconds": _clean(first_update_seconds),
            "history": [{k: _clean(v) for k, v in row.items()} for row in history]}
    path.write_text(json.dumps(data, indent=1))


def plot_curve(path, history: list, title: str = "analytic policy gradients"):
    """The learning curve (mean reward per step against update) as a PNG; warns and writes
    nothing if matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        warnings.warn("plot skipped: matplotlib is not installed (pip install matplotlib)",
                      stacklevel=2)
        return
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(history) + 1), [row["reward"] for row in history], label="window")
    returns = [(k + 1, row["episode_return"]) for k, row in enumerate(history)
               if row.get("episode_return") is not None
               and math.isfinite(row["episode_return"])]
    ax.set_xlabel("update")
    ax.set_ylabel("mean reward per step")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if returns:
        twin = ax.twinx()
        twin.plot(*zip(*returns), "o", ms=3, color="tab:orange", label="episode return")
        twin.set_ylabel("episode return")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
