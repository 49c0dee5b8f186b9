"""The `jaxcontact` command.

    jaxcontact demo [--batch 1024] [--steps 150] [--out results/demo.json] [--seed 0]

`demo` runs `jaxcontact.demo.run_demo`: a randomized batch of thrown boxes and spheres, and a
gradient-based fit of a bouncing throw; it prints a report and writes every number as JSON.
"""

from __future__ import annotations

import argparse
import os
import sys


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `jaxcontact` command."""
    parser = argparse.ArgumentParser(
        prog="jaxcontact",
        description="Differentiable rigid-body simulation with smoothed frictional contact.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo", help="randomized batch throughput + gradient-based throw fitting",
        description="Simulate a randomized batch of thrown boxes and spheres (float32), then "
                    "fit a bouncing throw with gradients through the simulator (float64). "
                    "Prints a report and writes all numbers to a JSON file.")
    demo.add_argument("--batch", type=_positive_int, default=1024,
                      help="number of randomized scenes (default 1024)")
    demo.add_argument("--steps", type=_positive_int, default=150,
                      help="time steps of 0.002 s per scene (default 150)")
    demo.add_argument("--iterations", type=_positive_int, default=30,
                      help="gradient steps of the throw fit (default 30)")
    demo.add_argument("--out", default="results/demo.json",
                      help="JSON output path (default results/demo.json)")
    demo.add_argument("--seed", type=int, default=0, help="randomization seed (default 0)")
    demo.add_argument("--devices", type=_positive_int, default=None,
                      help="CPU devices to spread the batch over (default: one per core)")
    return parser


def _configure_jax(devices):
    """Set JAX options before its backend starts: float64 on, one CPU device per core.

    float64 is needed by the throw fit (the batch builds its arrays in float32 explicitly).
    Several CPU devices let the independent scenes of the batch run on all cores.
    """
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_num_cpu_devices", devices or os.cpu_count() or 1)


def main(argv=None) -> int:
    """Entry point of the `jaxcontact` console script. Returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        _configure_jax(args.devices)
        from jaxcontact.demo import run_demo

        run_demo(batch=args.batch, out=args.out, seed=args.seed, steps=args.steps,
                 opt_iterations=args.iterations)
    return 0


if __name__ == "__main__":
    sys.exit(main())
