"""The benchmark suite's runner (`python -m benchmarks`, benchmarks/__main__.py).

It runs on stand-in benchmarks, small modules written to a temporary folder that import no
jax: one writes a throughput document (its comparison made by `throughput.compare` from rows
shaped as `benchmarks.mjx` prints them), one exits with an error, one writes nothing, one
outlives its time limit. The suite must record the last three as failed, go on after each,
exit 1, and give ours / MJX from the rows in the JSON and the table.
"""

import json

import pytest

from benchmarks import __main__ as suite

WRITES_RESULTS = """\
import json, os, pathlib, sys
from benchmarks.throughput import compare
ours = {"rows": [{"batch": 64, "steps_per_s": 3000.0, "compile_s": 2.0}]}
mjx = {"rows": [{"batch": 64, "steps_per_s": 1200.0, "compile_s": 9.0, "first_call_s": 9.5,
                 "z_mean": 0.05}]}
doc = {"scene": "box_drop", "config": {"steps": 100}, "jaxcontact": {"float32": ours},
       "mjx_tuned": mjx, "comparison": compare(ours, mjx, "tuned")}
name = sys.argv[sys.argv.index("--name") + 1]
out = pathlib.Path(os.environ["JAXCONTACT_BENCH_RESULTS"]) / f"{name}.json"
out.write_text(json.dumps(doc))
"""

STANDINS = {
    "good": WRITES_RESULTS,
    "bad": 'raise SystemExit("stand-in failure")\n',
    "silent": "",
    "slow": "import time\ntime.sleep(60)\n",
}


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite")
    package = root / "standins"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in STANDINS.items():
        (package / f"{name}.py").write_text(text)
    benches = [suite.Bench(name, f"standins.{name}", suite.throughput_rows) for name in STANDINS]
    out = root / "out"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", str(root))
        code = suite.run_suite(benches, out_dir=out, timeout=5)
    return code, json.loads((out / "summary.json").read_text()), (out / "summary.md").read_text()


def test_failures_are_recorded_and_the_suite_goes_on(summary):
    code, doc, table = summary
    assert code == 1
    records = {r["benchmark"]: r for r in doc["benchmarks"]}
    assert list(records) == list(STANDINS)
    assert {name: r["status"] for name, r in records.items()} == {
        "good": "ok", "bad": "failed", "silent": "failed", "slow": "failed"}
    assert doc["failed"] == ["bad", "silent", "slow"]
    assert records["bad"]["exit"] == 1 and records["bad"]["error"] == "exit status 1"
    assert "stand-in failure" in open(records["bad"]["log"]).read()
    assert records["silent"]["exit"] == 0 and "no results" in records["silent"]["error"]
    assert records["slow"]["exit"] is None and "timed out" in records["slow"]["error"]
    assert "FAILED: exit status 1" in table and "FAILED: timed out" in table


def test_ratio_is_ours_over_mjx_of_the_rows(summary):
    _, doc, table = summary
    (row,) = doc["rows"]
    assert row["benchmark"] == "good"
    assert (row["ours"], row["mjx"]) == (3000.0, 1200.0)
    assert row["ratio"] == pytest.approx(row["ours"] / row["mjx"])
    assert (row["compile_s"], row["mjx_compile_s"]) == (2.0, 9.0)
    line = next(line for line in table.splitlines() if line.startswith("| good |"))
    assert "| 3,000 | 1,200 | 2.5x | 2 / 9 |" in line
