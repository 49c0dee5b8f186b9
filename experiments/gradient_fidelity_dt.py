"""Gradient fidelity against the time step: the DiffMJX cube toss (our gradient vs finite
differences at dt = 1e-2, 3e-3, 1e-3, 3e-4).

DiffMJX's protocol: a cube thrown onto the ground; the loss is a coordinate of the cube after
1 s and the gradient is taken with respect to the initial velocity. Their published table
reports MJX's gradients 14x off or of the wrong sign at dt 1e-3 / 3e-4.

Setup (ours where the protocol is silent): a 0.1 m cube (half size 0.05 m), density
100 kg/m³ (0.1 kg), tilted 60° about the x axis (quaternion (cos 30°, sin 30°, 0, 0)), its
lowest corner 0.05 m above a ground plane, gravity (0, 0, -2) m/s². Initial velocity
v0 = (0, 1, -2) m/s: thrown down at 2 m/s plus 1 m/s along +y so that it slides and friction
matters. Library defaults for the surface (mu 0.5, k_n 1e5 N/m, damping 300 N s/m) and the
contact laws (`jc.Contact()`), `jc.Newton()` defaults, float64. Loss: the y coordinate of the
cube's centre after 1 s (round(1/dt) steps). Gradient d loss / d v0 (3 components):

- ours, reverse mode: `jax.grad` through `jc.rollout` (implicit `custom_vjp` of every solve,
  `Newton(ad="vjp")`, the default);
- ours, forward mode: `jax.jacfwd` through `jc.rollout` with `Newton(ad="jvp")` (implicit
  `custom_jvp`), to check that both modes agree;
- central finite differences of the forward rollout, step h_i = h max(|v0_i|, 1) m/s with
  h = 1e-6 (reference) and h = 1e-4 (to show the sensitivity of FD itself).

Recorded per dt: the loss, the three gradients, relative errors |g - g_fd| / |g_fd| (per
component |g_i - fd_i| / |g_fd|, since d y / d v0x is 0 by symmetry), the
fraction of steps whose Newton solve converged (`infos.converged`), the largest residual,
and wall times (compile included). A dt where not every step converged is flagged, not
dropped: Newton on light bodies at large dt is a known limitation (docs/guide/limitations.md).

Run from the repository root:
    python -m experiments.gradient_fidelity_dt [--quick] [--iterations N]
(--quick: dt = 1e-2 only; --iterations: Newton's cap, to see whether the errors follow the
unconverged steps; writes gradient_fidelity_dt_iterations<N>.json/.png)
"""

from __future__ import annotations

import time

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxcontact as jc  # noqa: E402
from experiments._common import log, parser, save  # noqa: E402

NAME = "gradient_fidelity_dt"
DTS = (1e-2, 3e-3, 1e-3, 3e-4)
T_END = 1.0                        # s
HALF, DENSITY = 0.05, 100.0        # m, kg/m³ (mass 0.1 kg)
TILT = np.pi / 3                   # 60° about x
CLEARANCE = 0.05                   # m, lowest corner above the ground at t = 0
GRAVITY = (0.0, 0.0, -2.0)         # m/s²
V0 = (0.0, 1.0, -2.0)              # m/s
FD_STEPS = (1e-6, 1e-4)            # relative: h_i = h * max(|v0_i|, 1)
MJX_PUBLISHED = ("MJX (DiffMJX's published table): gradients 14x off or of the wrong sign "
                 "at dt 1e-3 / 3e-4")


def start_height():
    """Centre height that puts the tilted cube's lowest corner CLEARANCE above the ground."""
    return CLEARANCE + HALF * (np.cos(TILT) + np.sin(TILT))


def cube_scene(dt, ad="vjp", iterations=None):
    """(model, state) of the toss at time step dt, float64, Newton with the given ad mode
    (and iteration cap; None: the default, 12)."""
    scene = jc.Scene(dt=dt, gravity=GRAVITY)
    scene.add_plane()
    quat = (np.cos(TILT / 2), np.sin(TILT / 2), 0.0, 0.0)
    scene.add_box(HALF, density=DENSITY, pos=(0.0, 0.0, start_height()), quat=quat, vel=V0)
    cap = {} if iterations is None else {"iterations": iterations}
    return scene.build(solver=jc.Newton(ad=ad, **cap), dtype=jnp.float64)


def make_loss(model, state, steps):
    """loss(v0): y of the cube's centre after `steps` steps, thrown at v0."""
    def loss(v0):
        final, _ = jc.rollout(model, state.replace(vel=state.vel.at[0].set(v0)), steps=steps)
        return final.pos[0, 1]
    return loss


def make_forward(model, state, steps):
    """Jitted forward rollout: (loss, per-step converged, residual, active contacts)."""
    @jc.jit
    def forward(v0):
        final, _, infos = jc.rollout(model, state.replace(vel=state.vel.at[0].set(v0)),
                                     steps=steps, return_info=True)
        return final.pos[0, 1], infos.converged, infos.residual, infos.active_contacts
    return forward


def central_fd(f, x, h):
    """Central FD gradient of scalar f at x, step h * max(|x_i|, 1) per component."""
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for i in range(len(x)):
        e = np.zeros_like(x)
        e[i] = h * max(abs(x[i]), 1.0)
        g[i] = (f(x + e) - f(x - e)) / (2 * e[i])
    return g


def rel(g, ref):
    return float(np.linalg.norm(np.asarray(g) - ref) / np.linalg.norm(ref))


def timed(fn, *args):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - t0


def run_dt(dt, iterations=None):
    steps = int(round(T_END / dt))
    log(f"dt = {dt:g} ({steps} steps):")
    v0 = jnp.asarray(V0, jnp.float64)
    model, state = cube_scene(dt, iterations=iterations)
    forward = make_forward(model, state, steps)
    (loss, converged, residual, active), forward_s = timed(forward, v0)
    converged = np.asarray(converged)
    log(f"  loss {float(loss):+.6f} m, converged {converged.mean():.4f}, "
        f"forward {forward_s:.1f} s (compile included)")

    grad_fn = jc.jit(jax.grad(make_loss(model, state, steps)))
    g_rev, reverse_s = timed(grad_fn, v0)
    g_rev = np.asarray(g_rev)
    log(f"  reverse {g_rev} ({reverse_s:.1f} s)")

    model_f, state_f = cube_scene(dt, ad="jvp", iterations=iterations)
    jac_fn = jc.jit(jax.jacfwd(make_loss(model_f, state_f, steps)))
    g_fwd, forward_mode_s = timed(jac_fn, v0)
    g_fwd = np.asarray(g_fwd)
    log(f"  forward mode {g_fwd} ({forward_mode_s:.1f} s)")

    def f(x):
        return float(forward(jnp.asarray(x))[0])

    fd, fd_s = {}, {}
    for h in FD_STEPS:
        t0 = time.perf_counter()
        fd[h] = central_fd(f, V0, h)
        fd_s[h] = time.perf_counter() - t0
        log(f"  FD h={h:g}: {fd[h]} ({fd_s[h]:.1f} s)")
    ref = fd[FD_STEPS[0]]
    row = {
        "dt": dt, "steps": steps, "loss_y_m": float(loss),
        "converged_fraction": float(converged.mean()),
        "all_converged": bool(converged.all()),
        "unconverged_steps": int((~converged).sum()),
        "max_residual": float(np.max(np.asarray(residual))),
        "contact_steps": int(np.sum(np.asarray(active) > 0)),
        "grad_reverse": g_rev.tolist(), "grad_forward_mode": g_fwd.tolist(),
        "grad_fd": {f"{h:g}": fd[h].tolist() for h in FD_STEPS},
        "rel_error_reverse_vs_fd": {f"{h:g}": rel(g_rev, fd[h]) for h in FD_STEPS},
        # per component |g_i - fd_i| / |g_fd|: d y / d v0x is 0 by symmetry (FD gives
        # rounding noise), so dividing by |fd_i| would be meaningless there
        "component_error_over_fd_norm_1e-6":
            (np.abs(g_rev - ref) / np.linalg.norm(ref)).tolist(),
        "rel_error_forward_vs_reverse": rel(g_fwd, g_rev),
        "rel_error_fd_1e-4_vs_fd_1e-6": rel(fd[FD_STEPS[1]], ref),
        "wall_s": {"forward_rollout_with_compile": forward_s,
                   "reverse_grad_with_compile": reverse_s,
                   "forward_mode_jacfwd_with_compile": forward_mode_s,
                   **{f"fd_h{h:g}_6_rollouts": fd_s[h] for h in FD_STEPS}},
    }
    log(f"  rel. error vs FD(1e-6) {row['rel_error_reverse_vs_fd']['1e-06']:.2e}, "
        f"fwd vs rev {row['rel_error_forward_vs_reverse']:.2e}")
    return row


def plot(rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments._common import finish_figure

    dts = np.array([r["dt"] for r in rows])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4))
    floor = 1e-16
    for i, name in enumerate("xyz"):
        err = [max(r["component_error_over_fd_norm_1e-6"][i], floor) for r in rows]
        ax.loglog(dts, err, "o-", color=f"C{i}",
                  label=f"d y / d v0{name}: |ours - FD| / |g_fd|")
    ax.loglog(dts, [max(r["rel_error_reverse_vs_fd"]["1e-06"], floor) for r in rows], "k^-",
              label="|g - g_fd| / |g_fd| (norm)")
    ax.loglog(dts, [max(r["rel_error_fd_1e-4_vs_fd_1e-6"], floor) for r in rows], "k:",
              marker="s", mfc="none", label="FD(h=1e-4) vs FD(h=1e-6)")
    ax.loglog(dts, [max(r["rel_error_forward_vs_reverse"], floor) for r in rows], "--",
              color="C4", marker="x", label="forward mode vs reverse mode")
    for r in rows:
        if not r["all_converged"]:
            ax.annotate(f"{r['unconverged_steps']} of {r['steps']}\nsteps not\nconverged",
                        (r["dt"], 3.0), fontsize=6, ha="center", va="bottom", color="r")
    ax.axhline(1.0, color="r", lw=0.8, ls="--", label="100 % error")
    ax.set(xlabel="dt (s)", ylabel="relative error", title="gradient error vs dt (FD h = 1e-6)",
           ylim=(1e-16, 1e4))
    ax.legend(fontsize=7)
    for i, name in enumerate("xyz"):
        ours = [r["grad_reverse"][i] for r in rows]
        fd = [r["grad_fd"]["1e-06"][i] for r in rows]
        bx.semilogx(dts, ours, "o-", color=f"C{i}", label=f"ours d y/d v0{name}")
        bx.semilogx(dts, fd, "x", color=f"C{i}", ms=10, mew=2, label=f"FD h=1e-6 d y/d v0{name}")
        fd4 = [r["grad_fd"]["0.0001"][i] for r in rows]
        bx.semilogx(dts, fd4, "s", color=f"C{i}", ms=7, mfc="none",
                    label=f"FD h=1e-4 d y/d v0{name}")
    bx.axhline(0.0, color="k", lw=0.6)
    bx.set(xlabel="dt (s)", ylabel="d y(1 s) / d v0 (s)", title="gradient: ours vs FD")
    bx.legend(fontsize=7, ncol=2)
    finish_figure(fig, (ax, bx), "DiffMJX cube toss: d y(1 s) / d v0 against dt")
    fig.tight_layout()
    return fig


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=None,
                   help="Newton's iteration cap (default: the library's, 12); when given, "
                        "the output is named gradient_fidelity_dt_iterations<N>")
    args = p.parse_args()
    dts = DTS[:1] if args.quick else DTS
    name = NAME if args.iterations is None else f"{NAME}_iterations{args.iterations}"
    t_start = time.perf_counter()
    rows = [run_dt(dt, args.iterations) for dt in dts]
    result = {
        "reproduces": "DiffMJX cube-toss gradient check: d (final y) / d v0 against central "
                      "finite differences, across the time step",
        "quick": args.quick,
        "published_comparison": MJX_PUBLISHED,
        "setup": {"half_size": HALF, "density": DENSITY, "mass": DENSITY * (2 * HALF) ** 3,
                  "tilt_deg_about_x": float(np.degrees(TILT)), "clearance": CLEARANCE,
                  "start_height": start_height(), "gravity": list(GRAVITY), "v0": list(V0),
                  "t_end": T_END, "dts": list(dts),
                  "surface": "Scene defaults: friction 0.5, stiffness 1e5, damping 300",
                  "contact": "jc.Contact() defaults", "dtype": "float64",
                  "solver": "jc.Newton() defaults; ad='vjp' for reverse, ad='jvp' for jacfwd",
                  "newton_iterations": args.iterations or jc.Newton().iterations,
                  "loss": "y of the cube's centre after t_end (m)",
                  "fd": "central, h_i = h * max(|v0_i|, 1), h in " + str(list(FD_STEPS))},
        "rows": rows,
        "all_dts_converged": all(r["all_converged"] for r in rows),
        "total_s": time.perf_counter() - t_start,
    }
    save(name, result, plot(rows), args.out_dir)


if __name__ == "__main__":
    main()
