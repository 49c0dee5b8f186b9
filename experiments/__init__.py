"""The papers' experiments, one module each (docs/experiments.md).

Run one from the repository root as a module, e.g. `python -m experiments.fig28_conditioning
[--quick] [--out-dir DIR]`: each writes `<name>.json` and `<name>.png` into `docs/experiments/`.
Tests import the scenes and helpers they check from here (`from experiments import ...`).
"""
