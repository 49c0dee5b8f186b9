"""The benchmark scripts: each writes results/<name>.json (`_common.write_results`).

Run one from the repository root as a module, e.g. `python -m benchmarks.step_cost --cases
pile_100 pile_400`. `python -m benchmarks` (`make bench`; `__main__.py`) runs the suite, each
benchmark in its own process, into results/benchmarks/ with one summary (summary.json,
summary.md). The comparisons with MuJoCo MJX and MuJoCo C come from `benchmarks.mjx`, run in
the same run by the benchmarks that compare.
"""
