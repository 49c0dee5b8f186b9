"""Every numerical constant of the solvers, in one place, each with the reason for its value.

The step is one fixed convex function (DESIGN.md section 1, v2), so the solvers need no
phases, shifts or schedules; what is left is when to stop and how accurately to solve the
linear systems inside.
"""

# Residual tolerance max |M⁻¹ ∇Φ| (m/s) by precision, where a solver gives none: 1e-10 in
# float64 (gradient checks against central differences need the solution to ~1e-9 relative);
# 3e-4 in float32 (moves a body by less than 1 µm per step at Δt = 2 ms).
TOL_FLOAT64 = 1e-10
TOL_FLOAT32 = 3e-4

# The residual of a step cannot be resolved below the rounding of the inertia term
# M (u - ũ) it contains: per DOF, eps (|u| + |ũ|) in velocity units. A residual within this
# many multiples of that is converged (rounding alone puts ~1-10 there). This floor scales
# with the step's own velocities, never with stiffnesses: a stiff term whose rounding is
# larger leaves its step unconverged, and says so (`StepInfo.converged`).
ROUNDING_ULPS = 64.0

# Newton's exact line search stops once |φ'(α)| <= LINE_TOL |φ'(0)| (φ(α) = Φ(u + α d)): a
# minimizer of the convex φ to three digits, beyond which the next Newton step corrects
# more cheaply than more line-search iterations would.
LINE_TOL = 1e-3

# ... or once the bracket of the minimizer is narrower than this fraction of its upper end:
# the point then taken is within it of the minimizer, and φ falls short of its minimum along d
# by about its square (1 %) of the decrease, which Newton's next step makes up. Where φ' is
# rounding noise (stiff joints in float32: the humanoid's slopes 1e-7 either way of any point)
# the slope test cannot be met and this one ends the search.
LINE_WIDTH = 0.1

# Newton's Krylov directions (conjugate gradients on the SPD Hessian) stop at this residual
# relative to |∇Φ| (inexact Newton): each iteration then still gains three digits.
FORCING = 1e-3

# Up to this many unknowns (64 bodies) Newton's directions and the implicit gradients factor
# the dense Hessian (LAPACK's Cholesky); above it they use conjugate gradients. Measured on the
# 2-core CPU (design note 58, ms per step, conjugate gradients against dense): a chain of 24 /
# 40 / 64 boxes on stiff ball joints 9.6 / 25.7 / 38.7 against 10.0 / 20.0 / 33.0 (2 against
# 3.8 iterations), piles of 16 / 32 / 64 / 100 spheres 3.0 / 4.6 / 19.4 / 40.3 against 1.0 /
# 2.6 / 10.4 / 28.6, the humanoid (108 unknowns, 16 scenes) 170 against 457 scene-steps/s.
# Dense wins to 600 unknowns and beyond; the bound is held at 64 bodies for memory: n² per
# scene (1.2 MB in float64 at 384), times the batch.
DENSE_MAX = 384

# Default caps of conjugate-gradient iterations per linear solve: rigid scenes, and scenes
# with solids or cloth, whose stiffness couples many particles (a ball on a 16 x 16 cloth
# needs about 200 with block-Jacobi).
KRYLOV_RIGID = 100
KRYLOV_MESHES = 400

# The implicit-gradient solves (`adjoint`) stop at this relative residual: gradients are
# compared with central differences to 1e-6 and better.
ADJOINT_RTOL = 1e-12
