"""The benchmark scripts: each writes results/<name>.json (`_common.write_results`).

Run one from the repository root as a module, e.g. `python -m benchmarks.step_cost --cases
pile_100 pile_400`; `make bench` runs the throughput and gradient benchmarks against MJX.
"""
