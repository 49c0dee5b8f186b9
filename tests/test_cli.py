"""Tests of the `jaxcontact` command: run, view, bench, errors, `python -m jaxcontact`.

The commands are called in-process (`cli.main([...])`) so that they share one compiled
rollout of the sphere scene: every `run` below simulates one sphere, 20 steps, float64, and
differs only in leaf values (dt), which never recompiles. Two subprocess tests check the
`python -m jaxcontact` entry point.
"""

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import cli

G = 9.81
STEPS = 20
Z0 = 1.0

SCENE = """\
import jaxcontact as jc
scene = jc.Scene(dt=0.01)
scene.add_plane()
scene.add_sphere(radius=0.1, mass=1.0, pos=(0, 0, 1.0))
"""

# the build() form, with code that must not run when the CLI loads the file
BUILD = """\
import jaxcontact as jc

def build():
    scene = jc.Scene(dt=0.01)
    scene.add_plane()
    scene.add_sphere(radius=0.1, mass=1.0, pos=(0, 0, 1.0))
    return scene.build()

if __name__ == "__main__":
    raise SystemExit("the CLI must not run a scene file's main block")
"""

MJCF = """\
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 1">
      <freejoint/>
      <geom type="sphere" size="0.1" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""


def free_fall_z(dt, steps=STEPS, z0=Z0):
    """Height after each implicit Euler step from rest: v_k = -g k dt,
    z_k = z0 - g dt² k (k + 1) / 2."""
    k = np.arange(1, steps + 1)
    return z0 - G * dt * dt * k * (k + 1) / 2


def one_line_error(capsys):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    assert lines[0].startswith("jaxcontact: error: "), lines[0]
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """`jaxcontact run scene.py --steps 20 --out traj.npz` once, for several tests."""
    folder = tmp_path_factory.mktemp("run")
    scene = folder / "scene.py"
    scene.write_text(SCENE)
    out = folder / "out" / "traj.npz"  # a folder that does not exist yet
    assert cli.main(["run", str(scene), "--steps", str(STEPS), "--out", str(out)]) == 0
    with np.load(out) as data:
        arrays = {k: data[k] for k in data.files}
    return scene, out, arrays


def test_run_writes_the_rollout(ran):
    scene_path, _, arrays = ran
    scene = jc.Scene(dt=0.01)
    scene.add_plane()
    scene.add_sphere(radius=0.1, mass=1.0, pos=(0, 0, 1.0))
    model, state = scene.build(dtype="float64")
    final, traj, infos = cli.rollout_fn()(model, state, steps=STEPS, return_info=True)
    for name in cli.STATE_FIELDS:
        np.testing.assert_array_equal(arrays[name], np.asarray(getattr(traj, name)), name)
    for name in cli.INFO_FIELDS:
        np.testing.assert_array_equal(arrays[name], np.asarray(getattr(infos, name)), name)
    assert arrays["pos"].shape == (STEPS, 1, 3) and arrays["pos"].dtype == np.float64
    assert arrays["particle_pos"].shape == (STEPS, 0, 3)
    # free fall (the sphere's bottom stays above 0.69 m), against the closed form
    np.testing.assert_allclose(arrays["pos"][:, 0, 2], free_fall_z(0.01), rtol=0, atol=1e-9)
    np.testing.assert_allclose(arrays["time"], 0.01 * np.arange(1, STEPS + 1), atol=1e-12)
    assert arrays["converged"].all()
    assert str(arrays["source"]) == str(scene_path.resolve())
    assert (str(arrays["source_kind"]), str(arrays["dtype"]), float(arrays["dt"]),
            int(arrays["steps"])) == ("py", "float64", 0.01, STEPS)


def test_run_summary(tmp_path, capsys):
    scene = tmp_path / "ball.py"
    scene.write_text(SCENE)
    out = tmp_path / "ball.npz"
    assert cli.main(["run", str(scene), "--steps", str(STEPS), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"{STEPS} steps of 0.01 s (float64, Newton)" in text, text
    assert f"converged {STEPS}/{STEPS} steps (100.0 %)" in text, text
    assert f"body 0: (+0.0000, +0.0000, {free_fall_z(0.01)[-1]:+.4f}) m" in text, text
    assert f"wrote {out}" in text


def test_run_build_function_with_dt(tmp_path, monkeypatch):
    scene = tmp_path / "build_scene.py"
    scene.write_text(BUILD)
    monkeypatch.chdir(tmp_path)  # default output: the source's name, .npz, here
    assert cli.main(["run", str(scene), "--steps", str(STEPS), "--dt", "0.005"]) == 0
    with np.load(tmp_path / "build_scene.npz") as data:
        z, t, dt = data["pos"][:, 0, 2], data["time"], float(data["dt"])
    assert dt == 0.005
    np.testing.assert_allclose(t, 0.005 * np.arange(1, STEPS + 1), atol=1e-12)
    np.testing.assert_allclose(z, free_fall_z(0.005), rtol=0, atol=1e-9)


def _write(folder, name, text):
    path = folder / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("case, expected", [
    ("missing", "no such file"),
    ("extension", "expected a .py scene file or an .xml MJCF model"),
    ("nothing", "defines neither `scene`"),
    ("raises", "raises.py:2: AttributeError: module 'jaxcontact' has no attribute 'Scen'"),
    ("syntax", "syntax.py:1: syntax error"),
    ("wrong_type", "build() must be a jc.Scene or a (model, state) pair, got int"),
    ("out", "--out must name an .npz file"),
])
def test_run_errors_are_one_line(tmp_path, capsys, case, expected):
    argv = {
        "missing": [str(tmp_path / "absent.py")],
        "extension": [_write(tmp_path, "scene.txt", SCENE)],
        "nothing": [_write(tmp_path, "empty.py", "import jaxcontact as jc\nx = 1\n")],
        "raises": [_write(tmp_path, "raises.py", "import jaxcontact as jc\nscene = jc.Scen()\n")],
        "syntax": [_write(tmp_path, "syntax.py", "scene = (\n")],
        "wrong_type": [_write(tmp_path, "typed.py", "def build():\n    return 3\n")],
        "out": [_write(tmp_path, "scene.py", SCENE), "--out", str(tmp_path / "traj.txt")],
    }[case]
    assert cli.main(["run", *argv, "--steps", "2"]) == 2
    line = one_line_error(capsys)
    assert expected in line, line


@pytest.mark.parametrize("argv", [["run", "x.py", "--steps", "0"],
                                  ["run", "x.py", "--dt", "-0.1"],
                                  ["run", "x.py", "--dt", "fast"],
                                  ["run", "x.py", "--float32", "--float64"],
                                  ["bench", "--batch", "0"]])
def test_bad_numbers_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("jaxcontact ")
    assert "Traceback" not in err


def test_view_errors_are_one_line(ran, tmp_path, capsys):
    assert cli.main(["view", str(tmp_path / "absent.npz")]) == 2
    assert "no such file" in one_line_error(capsys)
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    assert cli.main(["view", str(tmp_path / "other.npz")]) == 2
    assert "was not written by `jaxcontact run`" in one_line_error(capsys)
    assert cli.main(["view", str(ran[1]), "-o", str(tmp_path / "t.png")]) == 2
    assert "-o must name an .html file" in one_line_error(capsys)
    moved = dict(ran[2], source=np.array(str(tmp_path / "gone.py")))
    np.savez(tmp_path / "moved.npz", **moved)
    assert cli.main(["view", str(tmp_path / "moved.npz")]) == 2
    assert "gone.py', no longer exists" in one_line_error(capsys)


def test_view_without_viz_says_so(ran, tmp_path, capsys, monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "jaxcontact.viz" else find_spec(name, *a))
    assert cli.main(["view", str(ran[1]), "-o", str(tmp_path / "t.html")]) == 2
    assert "needs jaxcontact.viz" in one_line_error(capsys)
    assert not (tmp_path / "t.html").exists()


def _has_save_html():
    if importlib.util.find_spec("jaxcontact.viz") is None:
        return False
    try:
        from jaxcontact import viz
    except ImportError:  # a module being written
        return False
    return callable(getattr(viz, "save_html", None))


@pytest.mark.skipif(not _has_save_html(),
                    reason="jaxcontact.viz.save_html is not in this checkout (or not importable)")
def test_view_writes_html(ran, tmp_path, capsys):
    out = tmp_path / "traj.html"
    assert cli.main(["view", str(ran[1]), "-o", str(out)]) == 0
    assert out.stat().st_size > 1000
    assert f"wrote {out} ({STEPS} frames of 1 body, 0 particles)" in capsys.readouterr().out
    assert cli.main(["view", str(ran[1])]) == 0  # default: next to the trajectory
    assert ran[1].with_suffix(".html").stat().st_size == out.stat().st_size


def test_mjcf_without_io_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "jaxcontact.io", None)  # import raises ModuleNotFoundError
    monkeypatch.delattr(jc, "io", raising=False)
    model = _write(tmp_path, "ball.xml", MJCF)
    assert cli.main(["run", model, "--steps", "2"]) == 2
    assert "needs jaxcontact.io" in one_line_error(capsys)


@pytest.mark.skipif(importlib.util.find_spec("jaxcontact.io") is None
                    or importlib.util.find_spec("mujoco") is None,
                    reason="MJCF needs jaxcontact.io (not in this checkout yet) and mujoco")
def test_run_mjcf(tmp_path):
    model = _write(tmp_path, "ball.xml", MJCF)
    out = tmp_path / "ball.npz"
    assert cli.main(["run", model, "--steps", str(STEPS), "--out", str(out)]) == 0
    with np.load(out) as data:
        assert str(data["source_kind"]) == "mjcf" and data["pos"].shape == (STEPS, 1, 3)
        np.testing.assert_allclose(data["pos"][:, 0, 2], free_fall_z(float(data["dt"])),
                                   rtol=0, atol=1e-6)


def test_bench_prints_and_writes_rows(tmp_path, capsys, monkeypatch):
    """The table and the JSON of `bench` (its measurement stubbed: see the next test)."""
    calls = []

    def fake(batches, steps, repeats, seed):
        calls.append((tuple(batches), steps, repeats, seed))
        (b,) = batches
        return [{"batch": b, "compile_s": 1.5, "first_call_s": 0.2, "run_s": 0.1 * b,
                 "steps_per_s": 1234.5 * b, "converged_fraction": 0.995, "mean_final_z": 0.05}]
    monkeypatch.setattr(cli, "bench", fake)
    out = tmp_path / "sub" / "bench.json"
    assert cli.main(["bench", "--batch", "1", "4", "--steps", "7", "--repeats", "2",
                     "--seed", "3", "--out", str(out)]) == 0
    assert calls == [((1,), 7, 2, 3), ((4,), 7, 2, 3)]
    doc = json.loads(out.read_text())
    assert [r["batch"] for r in doc["rows"]] == [1, 4] and doc["steps"] == 7
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["batch", "compile_s", "run_s", "scene-steps/s", "converged"]
    assert lines[3].split() == ["4", "1.50", "0.4000", "4,938", "99.5%"]
    assert cli.main(["bench", "--out", str(tmp_path / "bench.txt")]) == 2


@pytest.mark.slow  # compiles the batched box scene (~10-25 s on 2 cores)
def test_bench_table_and_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert cli.main(["bench", "--batch", "2", "--steps", "3", "--repeats", "1",
                     "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    (row,) = doc["rows"]
    assert (doc["scene"], doc["dtype"], doc["steps"], row["batch"]) == (
        "box_drop", "float32", 3, 2)
    assert row["compile_s"] > 0 and row["run_s"] > 0
    assert row["steps_per_s"] == pytest.approx(2 * 3 / row["run_s"])
    # 3 steps of 2 ms from z = 0.3 m: the boxes are still in the air
    assert 0.25 < row["mean_final_z"] < 0.31
    text = capsys.readouterr().out
    assert "scene-steps/s" in text and f"{row['steps_per_s']:,.0f}" in text


def _python_m(*args, cwd):
    return subprocess.run([sys.executable, "-m", "jaxcontact", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_python_m_help(tmp_path):
    done = _python_m("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for command in ("run", "view", "bench", "demo"):
        assert f"    {command} " in done.stdout
    assert "jaxcontact run scene.py" in done.stdout


def test_python_m_error_exit_2(tmp_path):
    done = _python_m("run", "absent.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["jaxcontact: error: no such file: 'absent.py'"]
    assert done.stdout == ""


def test_cache_folder_follows_option_then_environment(tmp_path, monkeypatch):
    import jax

    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.delenv("JAXCONTACT_CACHE", raising=False)
    parser = cli.build_parser()
    for command in ("run", "demo"):
        argv = [command, "scene.py"] if command == "run" else [command]
        assert parser.parse_args(argv + ["--no-cache"]).cache == ""
        assert parser.parse_args(argv + ["--cache", str(tmp_path)]).cache == str(tmp_path)
        with pytest.raises(SystemExit):  # one or the other
            parser.parse_args(argv + ["--no-cache", "--cache", str(tmp_path)])
    before = jax.config.jax_compilation_cache_dir
    try:
        # this process's own cache (the tests') is kept whatever the option says
        jax.config.update("jax_compilation_cache_dir", str(tmp_path / "mine"))
        assert cli.cache_dir(str(tmp_path)) is None
        jax.config.update("jax_compilation_cache_dir", None)
        assert cli.cache_dir("") is None
        assert cli.cache_dir(str(tmp_path / "a")) == tmp_path / "a"
        assert cli.cache_dir(None).parts[-3:] == (".cache", "jaxcontact", "xla")
        monkeypatch.setenv("JAXCONTACT_CACHE", str(tmp_path / "b"))
        assert cli.cache_dir(None) == tmp_path / "b"
        assert cli.cache_dir(str(tmp_path / "a")) == tmp_path / "a"
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "c"))
        assert cli.cache_dir(str(tmp_path / "a")) is None
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
