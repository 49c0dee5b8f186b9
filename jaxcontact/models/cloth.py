"""Cloth: triangle membranes with dihedral bending over particles: a kind of physics
(`jaxcontact.models.kinds`): `Cloth`, `add_cloth`, `MembraneTerm` and `BendingTerm`.

**Membrane.** A triangle with rest corners X₀, X₁, X₂ is given a 2-D rest frame once (edge
matrix D_m, 2x2, in an orthonormal basis of its plane); its current corners x₀, x₁, x₂ give
the 3x2 deformation gradient F = [x₁ − x₀, x₂ − x₀] D_m⁻¹ and the Green strain
E = ½ (FᵀF − I₂). Its energy is the St. Venant-Kirchhoff membrane
  U = A (μ |E|² + λ/2 (tr E)²),    μ = k / (2 (1 + ν)),  λ = k ν / (1 − ν²),
with k the stretch stiffness (N/m: Young's modulus times thickness, the 2-D modulus) and ν
the in-plane Poisson ratio (plane stress). Under uniaxial stretch with ν = 0 the membrane
force per width is k (1 + ε) (ε + ε²/2) ≈ k ε. Damping is the rotation-invariant dissipation
A c |Ė|² of the Green strain rate Ė = ½ (ḞᵀF + FᵀḞ) (ADD Sec. 5.2's viscosity on a
surface), so a rigidly moving sheet is not slowed.

**Bending.** Each triangle carries the Kirchhoff plate energy of its own shape operator S
(2x2, in its plane):
  U = D/2 · A · ((1 − ν) |S|² + ν (tr S)²)
    = D/2 · A · ((1 + ν) a² + (1 − ν) (b² + c²)),   (a, b, c) = ((S₁₁ + S₂₂), (S₁₁ − S₂₂), 2 S₁₂)/√2,
with D the flexural rigidity (N m) and ν the plate's Poisson ratio (the membrane's). S is
read from the signed dihedral angles θ of the triangle's three edges (the hinges with the
neighbouring triangles, Grinspun et al. 2003's bending variable): (a, b, c) = M (θ − θ̄),
where the 3x3 map M is built once from the rest mesh so that S is exact for every quadratic
surface z = ½ xᵀ S x over the triangle and its three neighbours (unfolded into its plane).
This is the idea of Grinspun et al. 2006's discrete shape operator, with the edge angles as
the only unknowns: no extra per-edge variables. On a boundary edge the angle is free and is
eliminated by minimizing U (the moment-free edge of a plate, m_tt = 0), so a free edge does
not stiffen the sheet.
Measured (design note 29): a clamped plate's tip deflection under its weight is 1.13 and
1.06 times Euler-Bernoulli's qL⁴/(8D) at 16 and 32 cells along it, so the error halves with
the cell size; sheets bent into cylinders store D/2 · A/R² in every direction. A mesh with
vertices of valence 4 (the criss-cross grid) has a soft mode (the two sub-lattices move
apart) and bends about 2.9 times too easily: `jc.meshes.grid` is triangulated with every
diagonal the same way.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxcontact import meshes, terms
from jaxcontact import validate as check
from jaxcontact.models import kinds
from jaxcontact.types import Array, static


@struct.dataclass
class Cloth(kinds.Params):
    """Cloth triangles (`add_cloth`): one entry per triangle, its
    corners particles; each triangle carries membrane and plate bending energy.

    Attributes:
      density:           (T,) area density ρ_A, kg/m² (lumped: ρ_A A/3 to each corner).
      stretch_stiffness: (T,) k, the membrane's 2-D Young's modulus, N/m.
      bend_stiffness:    (T,) D, flexural rigidity, N m.
      poisson_ratio:     (T,) ν of the membrane and of the plate's bending.
      damping:           (T,) c of the strain-rate dissipation c |Ė|² per area, N s/m.
      rest_inverse:      (T, 2, 2) D_m⁻¹ of the rest triangle in its plane, 1/m.
      area:              (T,) rest area, m².
      curvature_map:     (T, 3, 3) M, the shape operator's components from the triangle's
                         three edge angles (rest geometry, `curvature_map`), 1/m.
      rest_angle:        (T, 3) rest dihedral angle θ̄ of each edge, rad (0 on boundaries).
      tris:     static tuple (T,) of 3 particle indices.
      stencils: static tuple (T,) of 6 particle indices: the corners, then the far corner
                across each edge (−1 on a boundary edge; `bending_stencils`).
    """

    density: Array
    stretch_stiffness: Array
    bend_stiffness: Array
    poisson_ratio: Array
    damping: Array
    rest_inverse: Array
    area: Array
    curvature_map: Array
    rest_angle: Array
    tris: tuple = static(default=())
    stencils: tuple = static(default=())

    def lumped_mass(self):
        """(corners (T, 3), share (T,)): a third of each triangle's ρ_A A to each corner."""
        return self.tris, self.density * self.area / 3.0


@dataclasses.dataclass
class ClothRecord:
    """One `add_cloth` call: T triangles."""
    corners: np.ndarray       # (T, 3) particle indices
    rest_inverse: np.ndarray  # (T, 2, 2)
    area: np.ndarray          # (T,)
    stencils: np.ndarray      # (T, 6) particle indices, -1 across a boundary edge
    curvature_map: np.ndarray  # (T, 3, 3)
    rest_angle: np.ndarray    # (T, 3)
    density: float
    stretch_stiffness: float
    bend_stiffness: float
    poisson_ratio: float
    damping: float


def membrane_lame(stiffness, poisson_ratio):
    """(μ, λ) of a membrane (N/m) from its 2-D Young's modulus k (N/m) and Poisson ratio ν
    (plane stress)."""
    return (stiffness / (2.0 * (1.0 + poisson_ratio)),
            stiffness * poisson_ratio / (1.0 - poisson_ratio * poisson_ratio))


def rest_frame(corners):
    """D_m (2, 2): a rest triangle's edges x₁ − x₀, x₂ − x₀ (NumPy, (3, 3) corners) as
    columns in an orthonormal basis of its plane, first axis along x₁ − x₀."""
    e1, e2 = corners[1] - corners[0], corners[2] - corners[0]
    t1 = e1 / np.linalg.norm(e1)
    t2 = e2 - (e2 @ t1) * t1
    t2 = t2 / np.linalg.norm(t2)
    return np.array([[e1 @ t1, e2 @ t1], [0.0, e2 @ t2]])


def deformation_gradient(corners, rest_inverse):
    """F = [x₁ − x₀, x₂ − x₀] D_m⁻¹ (3, 2) of a triangle's corners (3, 3)."""
    return (corners[1:] - corners[:1]).T @ rest_inverse


def green_strain(F):
    """E = ½ (FᵀF − I) (2, 2) of a membrane's F (3, 2)."""
    return 0.5 * (F.T @ F - jnp.eye(2, dtype=F.dtype))


def stvk_membrane(F, mu, lam):
    """St. Venant-Kirchhoff energy per rest area, μ |E|² + λ/2 (tr E)² (J/m²)."""
    strain = green_strain(F)
    return mu * jnp.sum(strain * strain) + 0.5 * lam * jnp.trace(strain) ** 2


def dihedral_angle(corners):
    """Signed angle θ (rad) between the normals of triangles (x₀, x₁, x₂) and (x₁, x₀, x₃)
    of a hinge's corners (4, 3): 0 for a flat hinge, positive when x₂ and x₃ fold towards
    the first normal. Invariant to the triangles' sizes (atan2 of the scaled sine and
    cosine), smooth while neither triangle is degenerate."""
    x0, x1, x2, x3 = corners
    edge = x1 - x0
    n1 = jnp.cross(edge, x2 - x0)
    n2 = jnp.cross(-edge, x3 - x1)
    sine = jnp.cross(n1, n2) @ edge / jnp.sqrt(edge @ edge)
    return jnp.arctan2(sine, n1 @ n2)


def bending_stencils(tris):
    """(T, 6) particle indices per triangle (NumPy): its corners v₀, v₁, v₂, then for each
    edge i = (v_{i+1}, v_{i+2}) the far corner of the neighbouring triangle across it, or −1
    on a boundary edge. An edge with more than two triangles raises ValueError."""
    tris = np.asarray(tris, np.int64)
    owners: dict = {}
    for t, tri in enumerate(tris.tolist()):
        for i in range(3):
            a, b = tri[(i + 1) % 3], tri[(i + 2) % 3]
            owners.setdefault((min(a, b), max(a, b)), []).append((t, i))
    stencils = np.concatenate([tris, -np.ones_like(tris)], 1)
    for edge, sides in owners.items():
        if len(sides) > 2:
            raise ValueError(f"tris: edge {edge} belongs to {len(sides)} triangles (a cloth "
                             "must be a surface: at most two per edge)")
        if len(sides) == 2:
            (t1, i1), (t2, i2) = sides
            stencils[t1, 3 + i1], stencils[t2, 3 + i2] = tris[t2, i2], tris[t1, i1]
    return stencils


def edge_angles(corners, interior):
    """(3,) the signed dihedral angles (rad) of a triangle's edges: `corners` (6, 3) as in
    `bending_stencils`, `interior` (3,) bool. A boundary edge's angle is 0 (its far corner
    is replaced by the point reflection of the triangle's own, a flat hinge, so the masked
    branch has finite derivatives)."""
    out = []
    for i in range(3):
        a, b, c, far = corners[(i + 1) % 3], corners[(i + 2) % 3], corners[i], corners[3 + i]
        far = jnp.where(interior[i], far, a + b - c)
        out.append(jnp.where(interior[i], dihedral_angle(jnp.stack([a, b, c, far])), 0.0))
    return jnp.stack(out)


def curvature_map(points, stencils):
    """(T, 3, 3) M per triangle (NumPy): the components (a, b, c) of its shape operator
    from its three edge angles, (a, b, c) = M θ, exact to first order for every quadratic
    surface z = ½ xᵀ S x over the triangle and its neighbours laid flat in its plane. The
    linearized angle of a hinge is (z_c − z_e(c))/h_c + (z_d − z_e(d))/h_d, with z_e the
    edge's linear interpolation at the foot of each far corner and h its distance to the
    edge; a boundary edge uses the point reflection of the triangle's own corner."""
    points = np.asarray(points, float)
    stencils = np.asarray(stencils, np.int64)
    x = points[stencils[:, :3]]                                        # (T, 3, 3)
    normal = np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])
    normal /= np.linalg.norm(normal, axis=-1, keepdims=True)
    axis1 = x[:, 1] - x[:, 0]
    axis1 /= np.linalg.norm(axis1, axis=-1, keepdims=True)
    frame = np.stack([axis1, np.cross(normal, axis1)], 1)              # (T, 2, 3)
    flat = np.einsum("tvk,tjk->tvj", x - x[:, :1], frame)              # (T, 3, 2)
    nxt, far_side = np.array([1, 2, 0]), np.array([2, 0, 1])
    a, b, c = flat[:, nxt], flat[:, far_side], flat                    # (T, 3, 2) per edge
    length = np.linalg.norm(b - a, axis=-1, keepdims=True)
    along = (b - a) / length
    outward = np.stack([along[..., 1], -along[..., 0]], -1)             # away from c
    # the neighbour's far corner unfolded into the plane (a boundary: c reflected)
    far = points[np.where(stencils[:, 3:] >= 0, stencils[:, 3:], 0)] - x[:, nxt]
    along3 = np.einsum("tij,tjk->tik", along, frame)
    t_along = np.sum(far * along3, -1, keepdims=True)
    lateral = np.linalg.norm(far - t_along * along3, axis=-1, keepdims=True)
    d = np.where((stencils[:, 3:] >= 0)[..., None], a + t_along * along + lateral * outward,
                 a + b - c)
    basis = np.sqrt(0.5) * np.array([[[1, 0], [0, 1]], [[1, 0], [0, -1]], [[0, 1], [1, 0]]])

    def height(p):                                   # (T, 3, 3 basis) of ½ pᵀ S p
        return 0.5 * np.einsum("tei,kij,tej->tek", p, basis, p)

    def lift(p):
        s = np.sum((p - a) * along, -1, keepdims=True) / length
        foot = height(a) + s * (height(b) - height(a))
        return (height(p) - foot) / np.abs(np.sum((p - a) * outward, -1, keepdims=True))

    return np.linalg.inv(lift(c) + lift(d))


def bending_weights(poisson_ratio):
    """(..., 3) the plate's weights (1 + ν, 1 − ν, 1 − ν) of (a², b², c²)."""
    nu = jnp.asarray(poisson_ratio)[..., None]
    return jnp.concatenate([1.0 + nu, 1.0 - nu, 1.0 - nu], -1)


def bending_map(curvature, interior, poisson_ratio):
    """(T, 3, 3) R = M G: (a, b, c) = R (θ − θ̄) with every boundary edge's angle chosen to
    minimize the triangle's energy, θ_free = −(K_ff)⁻¹ K_fi θ_i with K = Mᵀ diag(w) M (the
    moment-free edge). `interior` (T, 3) bool (NumPy)."""
    free = jnp.asarray((~np.asarray(interior, bool)).astype(float), curvature.dtype)
    K = jnp.einsum("tki,tk,tkj->tij", curvature, bending_weights(poisson_ratio), curvature)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=curvature.dtype), K.shape)
    F = free[:, :, None] * eye
    # the interior rows of F K are zero, so the (I − F) block only keeps the system regular:
    # scaled like K, so float32 solves it as well as float64
    scale = (jnp.trace(K, axis1=1, axis2=2) / 3.0)[:, None, None]
    G = eye - jnp.linalg.solve(F @ K @ F + scale * (eye - F), F @ K)
    return curvature @ G


def shape_operator(corners, interior, rows_map, rest_angle):
    """(a, b, c) (3,) of a triangle's shape operator from its stencil's corners (6, 3)."""
    return rows_map @ (edge_angles(corners, interior) - rest_angle)


def membrane_rows(F, rate, mu, lam, damping, area, dt):
    """The membrane as constraint rows (`terms.RowGroup`, so Dual solves cloth too): with
    σ = E₁₁ + E₂₂ and δ = E₁₁ − E₂₂,
      A (μ |E|² + λ/2 (tr E)²) = A/2 ((μ + λ) σ² + μ δ² + 4μ E₁₂²),
    three equality rows of stiffness A (μ + λ, μ, 4μ); and the damping Δt A c |Ė|², three
    rows (Ė₁₁, Ė₂₂, Ė₁₂) of stiffness Δt A (2c, 2c, 4c)."""
    strain = green_strain(F)
    strain_rate = 0.5 * (rate.T @ F + F.T @ rate)
    elastic = jnp.stack([strain[0, 0] + strain[1, 1], strain[0, 0] - strain[1, 1],
                         strain[0, 1]])
    viscous = jnp.stack([strain_rate[0, 0], strain_rate[1, 1], strain_rate[0, 1]])
    weights = jnp.array([2.0, 2.0, 4.0], F.dtype)
    return (terms.bilateral(elastic, area * jnp.stack([mu + lam, mu, 4.0 * mu])),
            terms.bilateral(viscous, dt * area * damping * weights))


def stencil_table(cloth):
    """`gather_table` of `cloth.stencils`."""
    return gather_table(cloth.stencils)


def gather_table(stencils):
    """(stencils (T, 6) with boundary entries pointing at the triangle's own corner, interior
    (T, 3) bool), NumPy, from a `bending_stencils` table (−1 across boundary edges)."""
    stencils = np.asarray(stencils, np.int64).reshape(-1, 6)
    interior = stencils[:, 3:] >= 0
    safe = np.where(interior, stencils[:, 3:], stencils[:, :3])
    return np.concatenate([stencils[:, :3], safe], 1), interior


def bending_params(cloth):
    """Each triangle's bending parameters: its rows map, rest angles, interior mask and the
    rows' stiffness D A (1 + ν, 1 − ν, 1 − ν)."""
    _, interior = stencil_table(cloth)
    return {"map": bending_map(cloth.curvature_map, interior, cloth.poisson_ratio),
            "rest_angle": cloth.rest_angle,
            "interior": jnp.asarray(interior),
            "stiffness": (cloth.bend_stiffness * cloth.area)[:, None]
            * bending_weights(cloth.poisson_ratio)}


def strain_energy(model, particle_pos):
    """The cloth's elastic energy (J) at particle positions (P, 3): every triangle's membrane
    and bending energy."""
    cloth = model.cloth
    if not cloth.size:
        return jnp.zeros((), particle_pos.dtype)
    F = jax.vmap(deformation_gradient)(particle_pos[np.asarray(cloth.tris)], cloth.rest_inverse)
    mu, lam = membrane_lame(cloth.stretch_stiffness, cloth.poisson_ratio)
    membrane = jnp.sum(cloth.area * jax.vmap(stvk_membrane)(F, mu, lam))
    stencils, _ = stencil_table(cloth)
    p = bending_params(cloth)
    shape = jax.vmap(shape_operator)(particle_pos[stencils], p["interior"], p["map"],
                                     p["rest_angle"])
    return membrane + 0.5 * jnp.sum(p["stiffness"] * shape * shape)


@dataclasses.dataclass(frozen=True)
class MembraneTerm(terms.RowTerm):
    """The stretch energy and strain-rate damping of every cloth triangle."""

    count: int
    n_particles = 3

    @property
    def name(self):
        return f"cloth membrane ({self.count} triangles)"

    def elements(self, model, state, control, stages):
        cloth = model.cloth
        params = {name: getattr(cloth, name) for name in
                  ("stretch_stiffness", "poisson_ratio", "damping", "rest_inverse", "area")}
        return terms.particle_elements(state, cloth.tris, params)

    def rows(self, x, p, shared, dt):
        F = deformation_gradient(x.particle_pos, p["rest_inverse"])
        rate = deformation_gradient(x.particle_vel, p["rest_inverse"])
        mu, lam = membrane_lame(p["stretch_stiffness"], p["poisson_ratio"])
        return membrane_rows(F, rate, mu, lam, p["damping"], p["area"], dt)


@dataclasses.dataclass(frozen=True)
class BendingTerm(terms.RowTerm):
    """The plate bending energy of every cloth triangle: three equality rows (a, b, c) of
    its shape operator with stiffness D A (1 + ν, 1 − ν, 1 − ν) (module docstring)."""

    count: int
    n_particles = 6

    @property
    def name(self):
        return f"cloth bending ({self.count} triangles)"

    def elements(self, model, state, control, stages):
        stencils, _ = stencil_table(model.cloth)
        return terms.particle_elements(state, stencils, bending_params(model.cloth))

    def rows(self, x, p, shared, dt):
        shape = shape_operator(x.particle_pos, p["interior"], p["map"], p["rest_angle"])
        return (terms.bilateral(shape, p["stiffness"]),)


def add_cloth(scene, verts, tris, *, density, stretch_stiffness, bend_stiffness,
              damping=0.0, poisson_ratio=0.0, pos=(0.0, 0.0, 0.0), vel=(0.0, 0.0, 0.0),
              radius=0.0, friction=None, stiffness=None, contact_damping=None):
    """Add a cloth of triangles (`jc.meshes.grid`). Returns its particle indices.

    Every vertex becomes a particle (collides as a ball of `radius` with planes,
    obstacles and rigid bodies); every triangle a St. Venant-Kirchhoff membrane element
    and a Kirchhoff plate bending element, its curvature read from the dihedral angles
    of its edges (`models/cloth.py`), with
    differentiable per-triangle parameters in `model.cloth`. Vertex masses are lumped
    from the area density (a third of each triangle's ρ_A A). Pin nodes with
    `scene.attach(p, -1, stiffness=...)`, or tie them to a body with `scene.attach(p, b)`.

    Args:
      verts: (V, 3) rest positions (m), in a frame placed at `pos`. Any rest shape: a
        curved rest shape bends back to itself.
      tris: (T, 3) vertex indices (`jc.meshes.check_tris` rejects degenerate ones).
      density: area density ρ_A, kg/m² (> 0).
      stretch_stiffness: k, N/m (> 0): Young's modulus times thickness.
      bend_stiffness: D, N m (>= 0): flexural rigidity, E t³ / (12 (1 − ν²)). The
        bending converges to the plate's on meshes whose vertices have 5-7 neighbours
        (`jc.meshes.grid`, unstructured meshes); a mesh with valence-4 vertices (a
        criss-cross grid) bends about 2.9 times too easily (design note 29).
      damping: c, N s/m (>= 0) of the membrane's strain-rate dissipation.
      poisson_ratio: ν in [0, 0.5) of the membrane and the bending, default 0.
      pos, vel: translation of the rest shape, and the initial velocity of every vertex.
      radius, friction, stiffness, contact_damping: the vertices' contact (`stiffness`
        and `contact_damping` are the contact's k_n and k_d, as `add_particle`'s
        `stiffness` and `damping`). The scene's default k_d (300 N s/m) suits bodies
        of about a kilogram. A cloth vertex weighs grams, so the default is many times
        its critical damping 2√(k_n m) (37 times for 1.65 g at k_n = 1e4 N/m). That
        brakes whatever rolls or slides on the cloth, and its lagged terms can keep
        Newton from converging (design note 33). Give a k_d near critical, or 0.
    """
    points = check.points("verts", verts)
    areas = meshes.check_tris(points, tris)
    tris = np.asarray(tris, np.int64)
    rho = check.number("density", density, positive=True)
    k = check.number("stretch_stiffness", stretch_stiffness, positive=True)
    bend = check.number("bend_stiffness", bend_stiffness, low=0)
    c = check.number("damping", damping, low=0)
    nu = check.number("poisson_ratio", poisson_ratio, low=0)
    if nu >= 0.5:
        raise ValueError(f"poisson_ratio must be in [0, 0.5), got {poisson_ratio!r}")
    check.every_vertex_used("verts", len(points), tris, "triangle")
    stencils = bending_stencils(tris)
    safe, interior = gather_table(stencils)
    rest_angle = np.asarray(jax.vmap(edge_angles)(jnp.asarray(points[safe]),
                                                            jnp.asarray(interior)))
    rest = np.stack([np.linalg.inv(rest_frame(points[t])) for t in tris])
    first = scene.mesh_particles(points, pos, vel, radius, friction, stiffness,
                                 contact_damping)
    scene.records("cloth").append(ClothRecord(
        first + tris, rest, areas, np.where(stencils >= 0, first + stencils, -1),
        curvature_map(points, stencils), rest_angle, rho, k, bend, nu, c))
    return np.arange(first, first + len(points))


def _pack(records, columns) -> Cloth:
    def count(r):
        return len(r.corners)

    return Cloth(**{f: columns.per_element(records, f, count) for f in (
        "density", "stretch_stiffness", "bend_stiffness", "poisson_ratio", "damping")},
        area=columns.stacked(records, "area"),
        rest_inverse=columns.stacked(records, "rest_inverse", 2, 2),
        curvature_map=columns.stacked(records, "curvature_map", 3, 3),
        rest_angle=columns.stacked(records, "rest_angle", 3),
        tris=columns.table(records, "corners", 3),
        stencils=columns.table(records, "stencils", 6))


def _terms(records) -> list:
    """The membrane of every triangle; their bending where any edge is interior."""
    triangles = sum(len(r.corners) for r in records)
    out = [MembraneTerm(triangles)] if triangles else []
    if any(np.any(r.stencils[:, 3:] >= 0) for r in records):
        out.append(BendingTerm(triangles))
    return out


KIND = kinds.register(kinds.Kind("cloth", _pack, _terms, (add_cloth,)))
