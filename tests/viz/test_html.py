"""The trajectory viewer (`jc.viz.save_html`, jaxcontact/viz/html.py).

One rollout is shared by the module (`tests._helpers.falling_and_resting`, also read by
test_plots.py and tests/test_observe.py): sphere A falls from 1 m (it does not reach the
ground in the 0.3 s simulated) while sphere B rests on the ground plane. The browser tests
render the viewer in a headless Chromium (skipped where there is none; `make test` installs
it) and compare where the ball's pixels are with the projection of its trajectory.
"""

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import types

import jax
import numpy as np
import pytest

import jaxcontact as jc
from jaxcontact import observe
from jaxcontact.viz import html
from tests._helpers import VIEW, falling_and_resting

DT, STEPS, MASS, RADIUS, G = VIEW.dt, VIEW.steps, VIEW.mass, VIEW.radius, VIEW.g


@pytest.fixture(scope="module")
def run():
    return falling_and_resting()


def embedded(path):
    text = open(path, encoding="utf-8").read()
    found = re.search(r'<script type="application/json" id="jc-data">(.*?)</script>', text,
                      re.S)
    assert found, "no embedded data"
    return text, json.loads(found.group(1))


# --- the file ---------------------------------------------------------------------------------

def test_html_is_self_contained_and_holds_the_frames(run, tmp_path):
    path = tmp_path / "run.html"
    out = jc.viz.save_html(run.model, run.traj, str(path), title="two </script> balls")
    assert out == path and path.is_file()
    text, data = embedded(path)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text, re.I)
    assert not re.search(r"<script[^>]*\bsrc\s*=", text, re.I)
    assert "http://" not in text and "https://" not in text
    assert "window.jcViewer" in text and "<title>two &lt;/script&gt; balls</title>" in text
    assert data["title"] == "two </script> balls"
    np.testing.assert_allclose(data["time"], np.asarray(run.traj.time), atol=1e-6)
    np.testing.assert_allclose(data["pos"], np.asarray(run.traj.pos), atol=6e-6)
    np.testing.assert_allclose(data["quat"], np.asarray(run.traj.quat), atol=6e-6)
    assert np.shape(data["pos"]) == (STEPS, 2, 3)
    assert [(g["shape"], g["body"]) for g in data["geoms"]] == [("sphere", 0), ("sphere", 1)]
    assert data["geoms"][0]["size"][0] == RADIUS
    assert data["geoms"][0]["color"] != data["geoms"][1]["color"]
    (plane,) = data["planes"]
    assert plane["normal"] == [0.0, 0.0, 1.0] and plane["offset"] == 0.0
    assert "contacts" not in data


def test_fps_keeps_about_fps_frames_per_second(run, tmp_path):
    _, data = embedded(jc.viz.save_html(run.model, run.traj, tmp_path / "a.html", fps=20))
    time = np.asarray(run.traj.time)
    kept = np.asarray(data["time"])
    # every 1/20 s from the first frame, and the last
    np.testing.assert_allclose(kept, np.r_[time[0]:time[-1] + 1e-9:0.05, time[-1]][:len(kept)],
                               atol=1e-6)
    assert kept[-1] == pytest.approx(time[-1]) and len(kept) == 7
    index = np.round((kept - time[0]) / DT).astype(int)
    np.testing.assert_allclose(data["pos"], np.asarray(run.traj.pos)[index], atol=6e-6)


def test_one_state_and_a_batch(run, tmp_path):
    _, one = embedded(jc.viz.save_html(run.model, run.final, tmp_path / "one.html"))
    assert len(one["time"]) == 1
    np.testing.assert_allclose(one["pos"][0], np.asarray(run.final.pos), atol=6e-6)
    moved = run.traj.replace(pos=np.asarray(run.traj.pos) + np.array([0.0, 2.0, 0.0]))
    batch = jax.tree.map(lambda a, b: np.stack([a, b], axis=1), run.traj, moved)
    _, second = embedded(jc.viz.save_html(run.model, batch, tmp_path / "b.html", scene=1))
    np.testing.assert_allclose(second["pos"], np.asarray(moved.pos), atol=6e-6)
    np.testing.assert_allclose(second["time"], np.asarray(run.traj.time), atol=1e-6)
    with pytest.raises(ValueError, match=r"scene must be an index in \[0, 2\), got 2"):
        jc.viz.save_html(run.model, batch, tmp_path / "c.html", scene=2)


def test_bad_arguments_are_named(run, tmp_path):
    missing = str(tmp_path / "no" / "such" / "dir" / "x.html")
    with pytest.raises(ValueError, match=r"path must be in an existing directory.*no"):
        jc.viz.save_html(run.model, run.traj, missing)
    with pytest.raises(ValueError, match="path must be a file path.*123"):
        jc.viz.save_html(run.model, run.traj, 123)
    with pytest.raises(ValueError, match="path must be a file path, got the directory"):
        jc.viz.save_html(run.model, run.traj, tmp_path)
    target = tmp_path / "x.html"
    with pytest.raises(ValueError, match=r"traj.quat must have shape \(T, 2, 4\)"):
        jc.viz.save_html(run.model, run.traj.replace(quat=run.traj.quat[:, :1]), target)
    with pytest.raises(ValueError, match=r"traj.pos must have shape .* got \(2, 3, 2, 3, 1\)"):
        jc.viz.save_html(run.model, run.traj.replace(pos=np.zeros((2, 3, 2, 3, 1))), target)
    with pytest.raises(ValueError, match="scene must be 0 for a trajectory of one scene, got 1"):
        jc.viz.save_html(run.model, run.traj, target, scene=1)
    with pytest.raises(ValueError, match="fps must be positive, got -1"):
        jc.viz.save_html(run.model, run.traj, target, fps=-1)
    with pytest.raises(ValueError, match="camera must have keys position and target"):
        jc.viz.save_html(run.model, run.traj, target, camera={"position": (1, 2, 3)})
    with pytest.raises(ValueError, match="traj.pos is not finite from frame 4"):
        jc.viz.save_html(run.model, run.traj.replace(pos=run.traj.pos.at[4:, 0, 2].set(np.nan)),
                         target)
    with pytest.raises(ValueError, match="traj must be a jc.State"):
        jc.viz.save_html(run.model, run.traj.pos, target)
    assert not target.exists()


def test_geom_placements_read_the_model_or_default_to_identity(run):
    body, pos, quat = html.geom_placements(run.model)
    np.testing.assert_array_equal(body, [0, 1])
    np.testing.assert_array_equal(pos, np.zeros((2, 3)))
    np.testing.assert_array_equal(quat, [[1, 0, 0, 0]] * 2)
    # a geom table without placements (one geom per body, at the body's frame)
    legacy = types.SimpleNamespace(geom=types.SimpleNamespace(shape=(0, 1, 2)))
    body, pos, quat = html.geom_placements(legacy)
    np.testing.assert_array_equal(body, [0, 1, 2])
    np.testing.assert_array_equal(quat, [[1, 0, 0, 0]] * 3)
    # placed geoms: the player composes body pose ∘ geom pose
    placed = types.SimpleNamespace(geom=types.SimpleNamespace(
        shape=(0, 0), body=(0, 0), pos=np.array([[0.0, 0, 0.1], [0, 0, -0.1]]),
        quat=np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0]])))
    body, pos, quat = html.geom_placements(placed)
    np.testing.assert_array_equal(body, [0, 0])
    np.testing.assert_array_equal(pos[1], [0, 0, -0.1])
    np.testing.assert_array_equal(quat[1], [0, 1, 0, 0])


def sphere_level_set(radius, centre=np.array([0.1, -0.2, 0.3]), spacing=0.05):
    grid = jc.sdf.from_function(lambda p: np.linalg.norm(p - centre, axis=1) - radius,
                                centre - 0.5, centre + 0.5, spacing)
    vertices, normals, faces = html.level_set(grid.values, grid.origin, grid.spacing)
    offset = vertices - centre
    distance = np.linalg.norm(offset, axis=1)
    assert np.max(np.abs(distance - radius)) < 0.1 * spacing
    assert np.min(np.einsum("ij,ij->i", normals, offset / distance[:, None])) > 0.99
    a, b, c = (vertices[faces[:, i]] for i in range(3))
    outward = np.einsum("ij,ij->i", np.cross(b - a, c - a), (a + b + c) / 3 - centre)
    return faces, outward


def test_level_set_of_a_sphere_is_closed_and_on_the_sphere():
    faces, outward = sphere_level_set(0.337)
    assert len(faces) > 500 and np.all(outward > 0)
    # closed: every edge is shared by exactly two triangles, once in each direction
    directed = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    assert len({tuple(e) for e in directed}) == len(directed)
    undirected, counts = np.unique(np.sort(directed, axis=1), axis=0, return_counts=True)
    assert np.all(counts == 2)
    # grid nodes exactly on the surface (radius 7 spacings): one vertex each, no collapsed
    # triangles, none facing inward
    faces, outward = sphere_level_set(0.35)
    assert np.all((faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2])
                  & (faces[:, 2] != faces[:, 0]))
    assert np.all(outward >= 0) and np.mean(outward > 0) > 0.99


def test_hull_triangles_wind_outward():
    cube = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    inside = np.array([[0.2, 0.1, 0.0]])
    vertices, faces = html.hull_triangles(np.concatenate([cube, inside]))
    assert len(vertices) == 8 and faces.shape == (12, 3)
    a, b, c = (vertices[faces[:, i]] for i in range(3))
    assert np.all(np.einsum("ij,ij->i", np.cross(b - a, c - a), a + b + c) > 0)


# --- in the browser -------------------------------------------------------------------------

CHROMIUM = (os.environ.get("JAXCONTACT_CHROMIUM") or shutil.which("chromium")
            or shutil.which("chromium-browser"))
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="needs a headless Chromium (apt-get install chromium; `make test` "
    "installs it) or JAXCONTACT_CHROMIUM=path")
WIDTH, HEIGHT = 640, 480
CAMERA = {"position": (0.25, -3.0, 0.9), "target": (0.25, 0.0, 0.5), "fov": 40.0}
SHOTS = {"early": (0.05, False), "late": (0.3, False), "overlay": (0.3, True)}


def project(camera, point):
    """Pixel (x right, y down) of a world point: a pinhole looking from position to target,
    world z up, vertical field of view fov (what the viewer's camera does)."""
    eye, target = np.asarray(camera["position"], float), np.asarray(camera["target"], float)
    forward = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    d = np.asarray(point, float) - eye
    focal = HEIGHT / 2 / math.tan(math.radians(camera["fov"]) / 2)
    return np.array([WIDTH / 2 + focal * (d @ right) / (d @ forward),
                     HEIGHT / 2 - focal * (d @ up) / (d @ forward)])


def start_chromium(url, png, profile):
    return subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader",
         "--use-angle=swiftshader", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--force-device-scale-factor=1", f"--user-data-dir={profile}",
         f"--window-size={WIDTH},{HEIGHT}", "--enable-logging=stderr", "--v=0",
         f"--screenshot={png}", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def shots(run, tmp_path_factory):
    """Screenshots {name: (image (H, W, 3) in [0, 1], console lines)} of `SHOTS`, the
    Chromium runs in parallel."""
    from matplotlib.image import imread

    folder = tmp_path_factory.mktemp("viewer")
    pages = {overlay: jc.viz.save_html(run.model, run.traj, folder / f"o{int(overlay)}.html",
                                       camera=CAMERA, contacts=overlay)
             for overlay in (False, True)}
    urls = {name: pages[overlay].as_uri() + f"#t={time}&paused=1"
            for name, (time, overlay) in SHOTS.items()}
    compound = compound_body()
    if compound is not None:
        model, state = compound
        urls["compound"] = jc.viz.save_html(model, state, folder / "compound.html",
                                            camera=CAMERA).as_uri() + "#paused=1"
    running = {name: start_chromium(url, folder / f"{name}.png", tempfile.mkdtemp(dir=folder))
               for name, url in urls.items()}
    out = {"pages": pages}
    for name, process in running.items():
        try:
            _, stderr = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for other in running.values():
                other.kill()
            raise
        png = folder / f"{name}.png"
        assert png.is_file(), f"no screenshot from Chromium:\n{stderr[-2000:]}"
        console = [line for line in stderr.splitlines() if "CONSOLE" in line]
        out[name] = (imread(png)[..., :3], console)
    return out


def compound_body():
    """(model, state) of one body with two geoms placed off its frame, the body then turned
    90 degrees about z; None where the scene has no compound bodies."""
    if not hasattr(jc.Scene, "add_geom"):
        return None
    scene = jc.Scene(dt=DT)
    scene.add_plane()
    body = scene.add_body(1.0, (0.01, 0.01, 0.01), pos=(0.25, 0.0, 0.5))
    # the sphere 0.3 m along the body's y; the capsule's axis along the body's x
    scene.add_geom(body, "sphere", radius=RADIUS, pos=(0.25, 0.3, 0.5))
    half = math.sqrt(0.5)
    scene.add_geom(body, "capsule", radius=0.03, half_length=0.15, pos=(0.25, 0.0, 0.5),
                   quat=(half, 0.0, half, 0.0))
    model, state = scene.build()
    return model, state.replace(quat=np.array([[half, 0.0, 0.0, half]]))


def ball_pixels(image):
    """(x, y) pixel centres of the first palette colour (sphere A), whatever its shading."""
    r, g, b = image[..., 0], image[..., 1], image[..., 2]
    y, x = np.nonzero((r - b > 0.2) & (r > 1.6 * g))
    return np.stack([x, y], axis=1) + 0.5


def magenta_pixels(image):
    r, g, b = image[..., 0], image[..., 1], image[..., 2]
    y, x = np.nonzero((r > 0.6) & (b > 0.6) & (g < 0.45))
    return np.stack([x, y], axis=1) + 0.5


@needs_chromium
def test_viewer_runs_without_console_errors(shots):
    for name, (_, console) in ((k, v) for k, v in shots.items() if k != "pages"):
        frames, time = (STEPS, SHOTS[name][0]) if name in SHOTS else (1, 0.0)
        assert any(f"jcViewer ready: {frames} frames, t = {time:.4f}" in line
                   for line in console), (name, console)
        # uncaught exceptions, the viewer's own errors, WebGL errors; SwiftShader's
        # performance notes ("GPU stall due to ReadPixels") are not errors
        bad = [line for line in console
               if re.search(r"error|uncaught|invalid|fail|warn", line, re.I)]
        assert not bad, bad


@needs_chromium
def test_viewer_draws_the_ball_where_the_trajectory_puts_it(run, shots):
    assert html.PALETTE[0] == (0.90, 0.33, 0.16)    # the colour `ball_pixels` looks for
    centres = {}
    for name in ("early", "late"):
        time, _ = SHOTS[name]
        frame = int(round(time / DT)) - 1
        assert float(run.traj.time[frame]) == pytest.approx(time)
        pixels = ball_pixels(shots[name][0])
        expected = project(CAMERA, run.traj.pos[frame, 0])
        # the ball's disc: about pi (focal r / depth)^2 pixels
        focal = HEIGHT / 2 / math.tan(math.radians(CAMERA["fov"]) / 2)
        disc = math.pi * (focal * RADIUS / 3.0) ** 2
        assert 0.6 * disc < len(pixels) < 1.3 * disc, (name, len(pixels), disc)
        centres[name] = pixels.mean(axis=0)
        np.testing.assert_allclose(centres[name], expected, atol=2.0, err_msg=name)
    # it fell 0.43 m between the two: about 90 pixels down, none sideways
    drop = centres["late"] - centres["early"]
    assert drop[1] > 60 and abs(drop[0]) < 2.0
    # the ground and the background are drawn too
    image = shots["late"][0]
    assert np.allclose(image[40, 320], html.BACKGROUND, atol=0.03)
    ground = image[int(project(CAMERA, (0.25, -1.0, 0.0))[1]), 320]
    assert abs(ground[0] - ground[1]) < 0.03 and ground[0] > 0.3


@needs_chromium
def test_viewer_places_geoms_by_body_pose_and_geom_pose(shots):
    if "compound" not in shots:
        pytest.skip("this version of the scene has no compound bodies (Scene.add_geom)")
    model, state = compound_body()
    assert model.geom.body == (0, 0)
    np.testing.assert_allclose(model.geom.pos, [[0.0, 0.3, 0.0], [0.0, 0.0, 0.0]], atol=1e-12)
    pixels = ball_pixels(shots["compound"][0])      # both geoms have the body's colour
    centre = project(CAMERA, (0.25, 0.0, 0.5))
    # turned 90 degrees about z: the sphere moves from the body's +y to the world's -x
    sphere = pixels[pixels[:, 0] < centre[0] - 15]
    np.testing.assert_allclose(sphere.mean(axis=0), project(CAMERA, (-0.05, 0.0, 0.5)),
                               atol=2.0)
    # and the capsule's axis (body x) points along world y, away from the camera: a short
    # upright blob, not a 0.36 m (80 pixel) wide bar
    capsule = pixels[pixels[:, 0] >= centre[0] - 15]
    assert len(capsule) > 100
    assert np.ptp(capsule[:, 0]) < 25
    np.testing.assert_allclose(capsule.mean(axis=0), centre, atol=4.0)


@needs_chromium
def test_contact_overlay_draws_the_force_on_the_resting_ball(run, shots):
    assert len(magenta_pixels(shots["late"][0])) == 0
    pixels = magenta_pixels(shots["overlay"][0])
    point = observe.contact_points(run.model, run.final)
    assert point.point.shape == (1, 3)      # B's contact with the ground; A is in the air
    base = project(CAMERA, point.point[0])
    near = pixels[np.linalg.norm(pixels - base, axis=1) < 4.0]
    assert len(near) >= 3, (base, pixels[:10])
    # the force line rises along the normal, force x forceScale long (m)
    _, data = embedded(shots["pages"][True])
    (row,) = np.reshape(data["contacts"]["rows"][-1], (-1, 7))
    top = project(CAMERA, row[:3] + row[3:6] * row[6] * data["contacts"]["forceScale"])
    column = pixels[np.abs(pixels[:, 0] - base[0]) < 2.0]
    assert top[1] < base[1] - 20
    assert abs(column[:, 1].min() - top[1]) < 2.5, (column[:, 1].min(), top)


# --- the contact overlay's data --------------------------------------------------------------

def test_overlay_data_holds_the_contact_rows(run, tmp_path):
    _, data = embedded(jc.viz.save_html(run.model, run.traj, tmp_path / "c.html",
                                        contacts=True, fps=50))
    rows = [np.reshape(r, (-1, 7)) for r in data["contacts"]["rows"]]
    assert len(rows) == len(data["time"]) == 16
    for frame in rows:     # only B touches: one row, at B, pushing up with its weight
        np.testing.assert_allclose(frame[:, :6], [[0.5, 0.0, -4.9e-5, 0.0, 0.0, 1.0]],
                                   atol=2e-5)
        np.testing.assert_allclose(frame[:, 6], [MASS * G], rtol=1e-3)
    assert data["contacts"]["forceScale"] == pytest.approx(
        0.3 * data["sceneRadius"] / (MASS * G), rel=1e-3)
