"""Ready-made scenes of the papers' experiments, as unbuilt `jc.Scene` builders.

Each function returns a `Scene` (not built), so a caller can still add bodies, pick the
solver, contact laws, dtype and broad phase in `scene.build(...)`. Every builder records the
indices it created in `scene.info` (a dict), for tests and experiments.

- `spring_chain`: ADD supplement S1 ("computation time per number of rigid bodies in a chain").
- `box_drop`, `sphere_on_plane`: the benchmarks' reference scenes, which `benchmarks/mjx.py`
  also runs in MuJoCo MJX (box_drop, boxes8; sphere_slide and grad_bounce).
- `box_stack`: n equal boxes stacked on the ground (resting-contact closed forms).
- `sphere_pile`: Qiao et al. 2020, Fig. 3 and Table 1 ("objects falling into a pile").
- `contact_point_cube`: ADD supplement S2 (restitution against contact points per edge).
- `legged_robot`, `trot_targets`: ADD Fig. 1's compliant quadruped and its open-loop trot.
- `marble_on_sheet`: Qiao et al. 2020, Sec. 7.4 (a marble pushed across a soft sheet).
- `random_structure`, `randomize_scene`: the fuzz benchmark's scenes.
"""

from __future__ import annotations

import itertools
import math

import jax.numpy as jnp
import numpy as np

from jaxcontact import meshes
from jaxcontact.scene import Scene

G = 9.81


def _exclude_all_pairs(scene: Scene, bodies) -> None:
    """Make every pair of `bodies` non-colliding."""
    for a, b in itertools.combinations(sorted(bodies), 2):
        scene.exclude_pair(a, b)


# --- ADD S1: spring chain ----------------------------------------------------------------------

def spring_chain(n, *, link_half=(0.05, 0.02, 0.02), mass=0.1, stiffness=1e4, gap=0.01,
                 anchor_height=None, dt=1.0 / 500.0, gravity=(0.0, 0.0, -G),
                 ground_stiffness=1e3, ground_damping=1e-3, friction=0.5,
                 self_collision=False) -> Scene:
    """A chain of `n` boxes joined by pairs of springs, hanging from the world (ADD S1).

    ADD supplement, "Performance": "a chain of N rigid bodies ... The first rigid body is
    connected to two springs anchored in world space. Similarly, each following rigid body is
    connected to the previous one by two springs. For all rigid bodies, collision (k_n = 10³,
    k_d = 10⁻³) and friction (μ = 0.5) with the ground plane is enabled. The total simulated
    time is t = 2 s with a time step of Δt = 1/500 s."

    Layout (ours; the paper shows only a screenshot): the links lie end to end along +x at
    height `anchor_height`, with `gap` between consecutive links. Each junction has two springs
    at the link ends, offset sideways by ±link_half[1] (y), with rest length `gap` (the
    initial distance), so the pair resists twist about the chain axis and sideways bending
    but lets the chain swing in the x-z plane. The first link's two springs go to world
    points `gap` before its near end. Released from rest, the chain swings down about the
    world anchors; `anchor_height` defaults to 0.6 of the chain length L = n (2 hx + gap), so
    the free end reaches the ground (after about sqrt(2 · 0.6 L / g) s: 0.73 s for n = 40) and
    the lower part of the chain lies and slides on the ground before t = 2 s, for every n.

    Args:
      n: number of links (>= 1).
      link_half: box half sizes (hx, hy, hz), m; x along the chain.
      mass: mass of each link, kg.
      stiffness: stiffness of each spring, N/m. Not given in the paper; the default 1e4 N/m
        (two per junction) stretches the top junction of a hanging 40-link chain of 0.1 kg
        links by 40 · 0.1 · 9.81 / 2e4 = 2 mm.
      gap: distance between consecutive links and spring rest length, m.
      anchor_height: z of the chain at release, m; default 0.6 L.
      dt, gravity: as for `Scene`; Δt = 1/500 s is the paper's.
      ground_stiffness, ground_damping, friction: k_n, k_d and μ of the ground and the links
        (the paper's 1e3 N/m, 1e-3 N s/m, 0.5). Both sides get the same values, so the pair
        values (harmonic k_n, mean k_d and μ) are exactly these.
      self_collision: the paper enables only ground contact; False (default) excludes every
        link pair from collision (no pair candidates at all).

    `scene.info`: {"links": body indices, "springs": spring indices, "ground": plane index,
    "length": L}.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    hx, hy, _ = (float(v) for v in link_half)
    pitch = 2 * hx + gap
    length = n * pitch
    height = 0.6 * length if anchor_height is None else float(anchor_height)
    scene = Scene(dt=dt, gravity=gravity, friction=friction, stiffness=ground_stiffness,
                  damping=ground_damping)
    ground = scene.add_plane()
    links, springs = [], []
    for i in range(n):
        x = gap + hx + i * pitch
        links.append(scene.add_box(link_half, mass, pos=(x, 0.0, height)))
    for side in (-hy, hy):
        springs.append(scene.add_spring(links[0], -1, stiffness=stiffness,
                                        anchor_a=(-hx, side, 0.0),
                                        anchor_b=(0.0, side, height)))
    for prev, link in zip(links, links[1:]):
        for side in (-hy, hy):
            springs.append(scene.add_spring(link, prev, stiffness=stiffness,
                                            anchor_a=(-hx, side, 0.0), anchor_b=(hx, side, 0.0)))
    if not self_collision:
        _exclude_all_pairs(scene, links)
    scene.info = {"links": links, "springs": springs, "ground": ground, "length": length}
    return scene


# --- box stack ---------------------------------------------------------------------------------

def box_drop(n_boxes=1, *, dt=0.002) -> Scene:
    """The benchmarks' reference scenes (`benchmarks/mjx.py` runs them in MJX): `n_boxes` = 1
    (box_drop) or 8 (boxes8) boxes of half edge 5 cm and 1 kg, friction 0.5 on a ground plane
    of friction 0.5, at z = 0.3 m; the eight in a 4 x 2 grid with 1 cm between faces, in the
    harness's body order. `scene.info`: {"boxes"}."""
    if n_boxes not in (1, 8):
        raise ValueError(f"n_boxes must be 1 (box_drop) or 8 (boxes8), got {n_boxes!r}")
    half = 0.05
    pitch = 2 * half + 0.01
    positions = ([(0.0, 0.0, 0.3)] if n_boxes == 1 else
                 [((i - 1.5) * pitch, (j - 0.5) * pitch, 0.3) for i in range(4) for j in range(2)])
    scene = Scene(dt=dt)
    scene.add_plane(friction=0.5)
    scene.info = {"boxes": [scene.add_box(half, 1.0, pos, friction=0.5) for pos in positions]}
    return scene


def sphere_on_plane(pos=(0.0, 0.0, 0.05), *, radius=0.05, mass=1.0, friction=0.5,
                    dt=0.002) -> Scene:
    """The gradient benchmarks' scene: one solid sphere (default r = 5 cm, 1 kg) at `pos` above
    a ground plane, both of friction `friction`; resting on the plane at the default `pos`
    (sphere_slide), thrown from (0, 0, 0.5) m in grad_bounce. `scene.info`: {"sphere"}."""
    scene = Scene(dt=dt)
    scene.add_plane(friction=friction)
    scene.info = {"sphere": scene.add_sphere(radius, mass, pos, friction=friction)}
    return scene


def box_stack(n, *, half=0.1, mass=1.0, gap=0.0, dt=0.002, gravity=(0.0, 0.0, -G),
              stiffness=1e5, damping=300.0, friction=0.5, rounding=None) -> Scene:
    """`n` equal cubes stacked on the ground plane, exactly aligned.

    Box i (from the bottom) starts at z = half + i (2 half + gap): with gap = 0 every face
    just touches the next. At rest (all surfaces with the same k):
    - the ground contact is the bottom cube's 4 lower corner points, sharing n m g:
      penetration n m g / (4 k);
    - the contact between cubes j-1 and j (j = 1..n-1) has 8 points, the 4 corners of each
      cube against the other cube's core (`geometry`), sharing (n - j) m g: penetration
      (n - j) m g / (8 k).
    `stack_rest_penetrations` gives these.

    Args:
      n: number of cubes (>= 1).
      half: half edge of each cube, m.
      mass: mass of each cube, kg.
      gap: vertical gap between the ground and cube 0 and between cubes, m.
      dt, gravity, stiffness, damping, friction: as for `Scene` (every surface, ground too).
      rounding: corner rounding (default: `add_box`'s, 2 % of half).

    `scene.info`: {"boxes": body indices, "ground": plane index}.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    scene = Scene(dt=dt, gravity=gravity, friction=friction, stiffness=stiffness,
                  damping=damping)
    ground = scene.add_plane()
    boxes = [scene.add_box(half, mass, pos=(0.0, 0.0, gap + half + i * (2 * half + gap)),
                           rounding=rounding)
             for i in range(n)]
    scene.info = {"boxes": boxes, "ground": ground}
    return scene


def stack_rest_penetrations(n, mass, stiffness, g=G):
    """Closed-form resting penetrations of `box_stack`: [ground, 0-1, 1-2, ...], m."""
    ground = n * mass * g / (4.0 * stiffness)
    between = [(n - j) * mass * g / (8.0 * stiffness) for j in range(1, n)]
    return np.asarray([ground, *between])


# --- Qiao et al. Fig. 3: objects falling into a pile -------------------------------------------

def pile_layout(n, per_layer_side=None):
    """(side, layers) of the lattice of `sphere_pile`: side² objects per layer."""
    side = per_layer_side or max(1, math.ceil(math.sqrt(n / 4.0)))
    return side, math.ceil(n / side ** 2)


def sphere_pile(n, *, radius=0.05, bin_half=None, seed=0, shape="sphere", mass=0.1,
                spacing=None, base_height=None, jitter=None, per_layer_side=None,
                drop_speed=0.0, dt=0.002, gravity=(0.0, 0.0, -G), stiffness=1e5,
                damping=300.0, friction=0.5) -> Scene:
    """`n` spheres (or cubes) dropped from a jittered lattice into a bin (Qiao et al. Fig. 3).

    Qiao et al. 2020 ("Scalable differentiable physics for learning and control"), Fig. 3:
    runtime and memory against the number of objects (20 to 1000) falling into a pile;
    Table 1: backward time per step for 100, 200, 300 falling cubes.

    The bin is the ground plane z >= 0 and 4 wall planes |x|, |y| <= bin_half. Objects start
    on a lattice of `side` x `side` per layer (side = ceil(sqrt(n / 4)) by default, so about 4
    layers whatever n: the pile's depth, and so the contacts per object, do not grow with n)
    with centre spacing `spacing`, filled layer by layer from the bottom (the top layer may
    be partial), each position jittered uniformly by ±`jitter` in x and y (seeded), so the
    objects do not fall as a perfect lattice.

    Args:
      n: number of objects.
      radius: sphere radius, or cube half edge with shape="box", m.
      bin_half: half width of the bin, m. Default: the lattice's half width + radius.
      seed: seed of the jitter (NumPy `default_rng`).
      shape: "sphere" or "box".
      mass: mass of each object, kg.
      spacing: lattice centre spacing, m (default 2.2 radius; boxes start axis-aligned, so
        2.2 half edges leave them 0.2 half edge apart too).
      base_height: z of the lowest layer's centres, m (default 1.5 radius: objects start
        half a radius above the ground, "placed near the ground").
      jitter: horizontal jitter amplitude, m (default 0.05 radius).
      per_layer_side: objects per lattice row (default as above).
      drop_speed: initial downward speed of every object, m/s.
      dt, gravity, stiffness, damping, friction: as for `Scene` (every surface).

    `scene.info`: {"objects", "planes", "bin_half", "side", "layers", "spacing"}.
    """
    if shape not in ("sphere", "box"):
        raise ValueError(f"shape must be 'sphere' or 'box', got {shape!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    spacing = 2.2 * radius if spacing is None else float(spacing)
    base = 1.5 * radius if base_height is None else float(base_height)
    jitter = 0.05 * radius if jitter is None else float(jitter)
    side, layers = pile_layout(n, per_layer_side)
    half_lattice = 0.5 * (side - 1) * spacing
    bin_half = half_lattice + radius + max(jitter, 0.1 * radius) if bin_half is None \
        else float(bin_half)
    if bin_half < half_lattice + radius + jitter:
        raise ValueError(f"bin_half {bin_half!r} is too small for a {side} x {side} lattice "
                         f"of spacing {spacing:g} (needs > {half_lattice + radius + jitter:g})")
    scene = Scene(dt=dt, gravity=gravity, friction=friction, stiffness=stiffness,
                  damping=damping)
    planes = [scene.add_plane((0.0, 0.0, 1.0), 0.0)]
    for normal in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0)):
        planes.append(scene.add_plane(normal, -bin_half))
    rng = np.random.default_rng(seed)
    objects = []
    for k in range(n):
        layer, rest = divmod(k, side * side)
        row, col = divmod(rest, side)
        dx, dy = rng.uniform(-jitter, jitter, size=2)
        pos = (col * spacing - half_lattice + dx, row * spacing - half_lattice + dy,
               base + layer * spacing)
        vel = (0.0, 0.0, -float(drop_speed))
        if shape == "sphere":
            objects.append(scene.add_sphere(radius, mass, pos=pos, vel=vel))
        else:
            objects.append(scene.add_box(radius, mass, pos=pos, vel=vel))
    scene.info = {"objects": objects, "planes": planes, "bin_half": bin_half, "side": side,
                  "layers": layers, "spacing": spacing}
    return scene


# --- ADD S2: contact points per edge -----------------------------------------------------------

def cube_surface_grid(n_per_edge, half):
    """All points of an n x n x n lattice of the cube [-half, half]³ that lie on its surface:
    n³ - (n - 2)³ points (8 for n = 2, 56 for n = 4, 488 for n = 10); each face holds n²."""
    if n_per_edge < 2:
        raise ValueError(f"n_per_edge must be >= 2, got {n_per_edge!r}")
    g = np.linspace(-half, half, n_per_edge)
    pts = np.array(list(itertools.product(g, g, g)))
    on_surface = np.isclose(np.abs(pts).max(axis=1), half)
    return pts[on_surface]


def contact_point_cube(n_per_edge, *, half=0.1, mass=1.0, stiffness0=1e4, damping0=None,
                       scale=True, height=None, vel=(0.0, 0.0, -1.0), dt=1e-4,
                       gravity=(0.0, 0.0, -G), friction=0.5) -> Scene:
    """A cube whose contact points are an n x n grid on every face, over the ground (ADD S2).

    ADD supplement, "Number of contact points": with fixed penalties more contact points
    make the response stiffer; scaling k_n,N = k_n,0 / N², k_d,N = k_d,0 / N² (N points per
    edge) by the area each point represents keeps the total force, and the restitution,
    constant (their Fig. 4, for N = 2, 4, 10).

    The cube is a convex mesh body: the hull of its 8 corners, with the whole surface grid
    as its contact points (`add_mesh(..., contact_points=grid)`).

    Per-point parameters: k = stiffness0 / n², k_d = damping0 / n² with `scale`, else
    stiffness0 and damping0 per point. The ground plane gets the same k and k_d as the cube:
    pair stiffness is the harmonic combination 2 a b / (a + b) (`contacts.combine`),
    which is a for a = b but tends to 2 a against a much stiffer plane; damping is the mean.
    With equal values the per-point pair values are exactly k and k_d (the scene holds only
    this cube, so matching the ground to it is exact). Resting flat, n² points carry m g:
    penetration m g / (n² k), = m g / stiffness0 for every n when scaled.

    Args:
      n_per_edge: grid points per cube edge (>= 2).
      half: half edge, m.
      mass: kg.
      stiffness0, damping0: nominal k_n,0 (N/m) and k_d,0 (N s/m). damping0 defaults to the
        value giving restitution 0.5 for the total (scaled) contact, stiffness0 and `mass`
        (`jc.restitution_to_damping`).
      scale: divide both by n² (the paper's scaling).
      height: initial gap between the lowest face and the ground, m (default 1 mm); the
        cube starts flat (axis-aligned).
      vel: initial velocity, m/s.
      dt, gravity, friction: as for `Scene`. The small default Δt = 1e-4 s lets the contact
        (lasting π sqrt(m / k_total) = 31 ms at the defaults) span hundreds of steps.

    `scene.info`: {"cube", "ground", "points" (contact points), "stiffness", "damping"
    (per point)}.
    """
    from jaxcontact.models.contact import restitution_to_damping

    n = int(n_per_edge)
    grid = cube_surface_grid(n, half)
    if damping0 is None:
        damping0 = float(restitution_to_damping(0.5, stiffness0, mass))
    factor = 1.0 / n ** 2 if scale else 1.0
    k, kd = stiffness0 * factor, damping0 * factor
    gap = 1e-3 if height is None else float(height)
    scene = Scene(dt=dt, gravity=gravity, friction=friction, stiffness=k, damping=kd)
    ground = scene.add_plane()
    corners = np.array(list(itertools.product((-half, half), repeat=3)))
    cube = scene.add_mesh(corners, mass, pos=(0.0, 0.0, half + gap), vel=vel,
                          contact_points=grid)
    scene.info = {"cube": cube, "ground": ground, "points": len(grid), "stiffness": k,
                  "damping": kd}
    return scene


# --- legged robot ------------------------------------------------------------------------------

LEGS = ("front_left", "front_right", "rear_left", "rear_right")


def legged_robot(*, torso_half=(0.2, 0.1, 0.04), torso_mass=2.0, leg_radius=0.02,
                 segment_half=0.06, leg_mass=0.2, joint_stiffness=1e5, angular_stiffness=1e3,
                 kp=30.0, kd=0.3, dt=0.01, gravity=(0.0, 0.0, -G), ground_stiffness=2e4,
                 ground_damping=100.0, friction=0.8, self_collision=False) -> Scene:
    """A quadruped with compliant hinge motors (ADD Fig. 1, Table 2 "compliant robot").

    A box torso and four legs of two capsules (thigh, shank), each joined by a soft hinge
    about the body y axis (hip at a torso corner, knee between the capsules), with a position
    motor on every hinge: ADD's "PD controllers with relatively low gains implemented as
    soft, damped angular constraints" (Eq. 25-26). Standing straight, the shank tips touch
    the ground. Motor m = 2 leg + (0 hip, 1 knee), legs in `LEGS` order; a positive hinge
    angle swings the leg's lower end backwards (-x), the walking direction is +x.

    Args:
      torso_half, torso_mass: torso box half sizes (m) and mass (kg).
      leg_radius, segment_half, leg_mass: each capsule's radius, half axis length (m), mass.
      joint_stiffness, angular_stiffness: the hinges' point (N/m) and axis-alignment (N m)
        stiffnesses. kp, kd: motor stiffness (N m per unit of the Eq. 25 error, ≈ N m/rad)
        and damping (N m s/rad). ADD uses soft motors next to stiffer joints, as here.
      dt, gravity: as for `Scene` (ADD runs the robot at Δt = 1/60 s).
      ground_stiffness, ground_damping, friction: the ground's and feet's surface (ADD's
        c_f = 0.8).
      self_collision: let legs collide with each other and the torso (off: jointed robots
        usually leave self-contact out).

    `scene.info`: {"torso", "thighs", "shanks", "hips", "knees", "motors", "ground"}.
    """
    hx, hy, hz = torso_half
    seg = 2.0 * (segment_half + leg_radius)     # length of one capsule, end to end
    hip_z = 2.0 * seg                            # shank tips on the ground
    scene = Scene(dt=dt, gravity=gravity, friction=friction, stiffness=ground_stiffness,
                  damping=ground_damping)
    ground = scene.add_plane()
    torso = scene.add_box(torso_half, torso_mass, (0.0, 0.0, hip_z + hz))
    thighs, shanks, hips, knees, motors = [], [], [], [], []
    y_axis = (0.0, 1.0, 0.0)
    for leg in LEGS:
        x = (hx - leg_radius) * (1.0 if leg.startswith("front") else -1.0)
        y = (hy + leg_radius) * (1.0 if leg.endswith("left") else -1.0)
        thigh = scene.add_capsule(leg_radius, segment_half, leg_mass, (x, y, hip_z - 0.5 * seg))
        shank = scene.add_capsule(leg_radius, segment_half, leg_mass, (x, y, hip_z - 1.5 * seg))
        hip = scene.add_joint("hinge", thigh, torso, anchor=(x, y, hip_z), axis=y_axis,
                              stiffness=joint_stiffness, angular_stiffness=angular_stiffness)
        knee = scene.add_joint("hinge", shank, thigh, anchor=(x, y, hip_z - seg), axis=y_axis,
                               stiffness=joint_stiffness, angular_stiffness=angular_stiffness)
        motors += [scene.add_motor(hip, kp, kd), scene.add_motor(knee, kp, kd)]
        thighs.append(thigh), shanks.append(shank), hips.append(hip), knees.append(knee)
    if not self_collision:
        _exclude_all_pairs(scene, [torso] + thighs + shanks)
    scene.info = {"torso": torso, "thighs": thighs, "shanks": shanks, "hips": hips,
                  "knees": knees, "motors": motors, "ground": ground}
    return scene


def trot_targets(t, *, frequency=2.0, hip_amplitude=0.15, knee_amplitude=0.3):
    """Hand-written periodic motor targets of a trot, (..., 8) for times t (...), s (JAX:
    a traced time works, e.g. a policy's base gait inside a jitted rollout).

    Diagonal legs move together (front-left with rear-right, half a period ahead of the
    other pair). In a leg's phase s = 2π f t + φ the hip angle is A cos s: while sin s > 0
    the leg swings forward (the angle decreases) with the knee bent by B sin s, lifting the
    foot; while sin s < 0 it pushes backwards with the knee straight (stance).
    """
    t = jnp.asarray(t)
    phase_of = {"front_left": 0.0, "rear_right": 0.0, "front_right": math.pi,
                "rear_left": math.pi}
    columns = []
    for leg in LEGS:
        s = 2.0 * math.pi * frequency * t + phase_of[leg]
        columns += [hip_amplitude * jnp.cos(s), knee_amplitude * jnp.maximum(jnp.sin(s), 0.0)]
    return jnp.stack(columns, axis=-1)


def marble_on_sheet(*, size=1.0, divisions=10, density=0.2, stretch=200.0, bend=1e-3,
                    sheet_damping=0.5, pin=1e5, node_radius=0.03, contact_stiffness=1e4,
                    friction=0.5, radius=0.2, mass=0.1, dt=0.04) -> Scene:
    """Qiao et al. 2020, Sec. 7.4: a rigid marble resting on a soft square sheet pinned at its
    four corners (the sizes and stiffnesses are ours; the paper gives none).

    The sheet: `meshes.grid` of `divisions` x `divisions` cells over `size` (m), area density
    `density` (kg/m²), stretch stiffness `stretch` (N/m), bending `bend` (N m), membrane
    damping `sheet_damping` (N s/m), its corners held by world springs of `pin` (N/m); its
    nodes collide as balls of `node_radius` (m) with `contact_stiffness` (N/m) and
    `friction`. The marble: a sphere of `radius` (m) and `mass` (kg) on the sheet's centre.
    With the defaults, k_n Δt² / m is about 9,700 for a node (1.7 g) at Δt = 40 ms.

    `scene.info`: {"marble", "sheet" (particle indices), "corners" (their indices)}.
    """
    verts, tris = meshes.grid((size, size), (divisions, divisions))
    scene = Scene(dt=dt, gravity=(0.0, 0.0, -G), friction=friction)
    sheet = scene.add_cloth(verts, tris, density=density, stretch_stiffness=stretch,
                            bend_stiffness=bend, damping=sheet_damping, radius=node_radius,
                            stiffness=contact_stiffness, friction=friction)
    corner = (np.isclose(np.abs(verts[:, 0]), size / 2)
              & np.isclose(np.abs(verts[:, 1]), size / 2))
    for p in sheet[corner]:
        scene.attach(int(p), -1, stiffness=pin)
    marble = scene.add_sphere(radius, mass=mass, pos=(0.0, 0.0, radius + node_radius))
    scene.info = {"marble": marble, "sheet": sheet, "corners": sheet[corner]}
    return scene


# --- fuzzing: random structures, randomized values ------------------------------------------

FUZZ_SHAPES = ("sphere", "box", "capsule", "mesh")


def random_structure(seed, *, max_bodies=8, max_particles=3) -> Scene:
    """A random scene structure for fuzzing the step (issue 63's robustness benchmark): a
    ground plane and 1 to `max_bodies` bodies of random shapes (sphere, rounded box,
    capsule, convex mesh) and sizes (1.5 to 8 cm), plus 0 to `max_particles` particles,
    placed on a ring close enough that thrown neighbours collide. Masses, surfaces, the time
    step and the motion are drawn per scene by `randomize_scene`; the structure (which shapes,
    how many) is what one compiled program holds. `scene.info["reach"]` (one per body and
    particle) is the radius of a ball around each centre that holds its shape."""
    rng = np.random.default_rng(seed)
    scene = Scene(dt=0.002)
    scene.add_plane()
    n_body = int(rng.integers(1, max_bodies + 1))
    n_particle = int(rng.integers(0, max_particles + 1))
    shapes = [FUZZ_SHAPES[i] for i in rng.integers(0, len(FUZZ_SHAPES), n_body)]
    reach = []
    for shape in shapes:
        size = rng.uniform(0.015, 0.08)
        if shape == "sphere":
            scene.add_sphere(size, 1.0)
            reach.append(size)
        elif shape == "box":
            half = size * rng.uniform(0.3, 1.0, 3)
            scene.add_box(half, 1.0)
            reach.append(float(np.linalg.norm(half)))
        elif shape == "capsule":
            radius = size * rng.uniform(0.2, 0.6)
            scene.add_capsule(radius, size - radius, 1.0)
            reach.append(size)
        else:
            points = rng.normal(size=(int(rng.integers(6, 13)), 3))
            points *= size / np.linalg.norm(points, axis=1, keepdims=True)
            body = scene.add_mesh(points, 1.0)
            com = scene.records("body")[body].pos
            reach.append(float(np.max(np.linalg.norm(points - com, axis=1))))
    radii = rng.uniform(0.0, 0.02, n_particle) * (rng.uniform(size=n_particle) < 0.7)
    for r in radii:
        scene.add_particle(1.0, (0.0, 0.0, 0.0), radius=float(r))
    reach += [float(r) for r in radii]
    # a ring whose neighbours stand 15 % further apart than the largest reach
    count = len(reach)
    ring = 1.15 * max(reach) / np.sin(np.pi / count) if count > 1 else 0.0
    angle = 2 * np.pi * np.arange(count) / count
    scene.info = {"shapes": shapes, "n_particle": n_particle, "reach": np.asarray(reach),
                  "ring": np.stack([ring * np.cos(angle), ring * np.sin(angle)], axis=1)
                  if count > 1 else np.zeros((1, 2))}
    return scene


def randomize_scene(model, state, info, key):
    """A random scene of a `random_structure` (jittable; vmap over keys for a batch).

    Per scene: a mass scale m̄ log-uniform in [1e-3, 1e3] kg, each body and particle
    within a factor 3 of it (inertia scaled with its mass); contact stiffness k_n
    log-uniform in [1e2, 1e7] N/m and damping a uniform fraction of critical for m̄,
    k_d = 2 ζ sqrt(k_n m̄), ζ in [0, 1]; friction μ uniform in [0, 2] per geom and particle;
    Δt log-uniform in [1e-4, 2e-2] s. Each body starts 0-2 cm above the ground at a random
    orientation, thrown down and sideways (|v| <= 3 m/s) with a random spin (|ω| <= 10
    rad/s); particles likewise, without spin."""
    import jax

    dtype = state.pos.dtype
    n_body, n_particle = model.n_body, state.particle_pos.shape[0]
    keys = iter(jax.random.split(key, 16))

    # drawn in float32 whatever the dtype: one key gives the same scene in both precisions
    def uniform(shape, low, high):
        return jax.random.uniform(next(keys), shape, jnp.float32, low, high).astype(dtype)

    def normal(shape):
        return jax.random.normal(next(keys), shape, jnp.float32).astype(dtype)

    scale = 10.0 ** uniform((), -3.0, 3.0)
    body_mass = scale * 3.0 ** uniform((n_body,), -1.0, 1.0)
    particle_mass = scale * 3.0 ** uniform((n_particle,), -1.0, 1.0)
    k = 10.0 ** uniform((), 2.0, 7.0)
    damping = 2.0 * uniform((), 0.0, 1.0) * jnp.sqrt(k * scale)
    dt = 10.0 ** uniform((), -4.0, np.log10(2e-2))
    n_geom, n_plane = model.geom.friction.shape[0], model.plane.friction.shape[0]
    geom = model.geom.replace(friction=uniform((n_geom,), 0.0, 2.0),
                              stiffness=jnp.full((n_geom,), k), damping=jnp.full((n_geom,),
                                                                                  damping))
    plane = model.plane.replace(friction=uniform((n_plane,), 0.0, 2.0),
                                stiffness=jnp.full((n_plane,), k),
                                damping=jnp.full((n_plane,), damping))
    particle = model.particle.replace(
        mass=particle_mass, friction=uniform((n_particle,), 0.0, 2.0),
        stiffness=jnp.full((n_particle,), k), damping=jnp.full((n_particle,), damping))
    body = model.body.replace(mass=body_mass,
                              inertia=model.body.inertia * (body_mass / model.body.mass)[:, None])
    model = model.replace(body=body, geom=geom, plane=plane, particle=particle, dt=dt)

    reach = jnp.asarray(info["reach"], dtype)
    ring = jnp.asarray(info["ring"], dtype)
    count = reach.shape[0]
    height = reach + uniform((count,), 0.0, 0.02)
    pos = jnp.concatenate([ring, height[:, None]], axis=1)

    def thrown(limit):
        v = normal((count, 3))
        v = v.at[:, 2].set(-jnp.abs(v[:, 2]))
        norm = jnp.linalg.norm(v, axis=1, keepdims=True)
        return v / jnp.maximum(norm, 1e-6) * uniform((count, 1), 0.0, limit)

    vel, spin = thrown(3.0), thrown(10.0)
    quat = normal((n_body, 4))
    quat = quat / jnp.linalg.norm(quat, axis=1, keepdims=True)
    state = state.replace(pos=pos[:n_body], quat=quat, vel=vel[:n_body],
                          ang_vel=spin[:n_body], particle_pos=pos[n_body:],
                          particle_vel=vel[n_body:])
    return model, state
