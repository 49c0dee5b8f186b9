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

# Newton's Krylov directions (conjugate gradients on the SPD Hessian) stop at this residual
# relative to |∇Φ| (inexact Newton): each iteration then still gains three digits.
FORCING = 1e-3

# Up to this many unknowns (16 bodies) a dense factorization of the Hessian is cheaper than a
# Krylov solve; above it the O(n³) elimination loses (v1 measurement, docs/log).
DENSE_MAX = 96

# Default caps of conjugate-gradient iterations per linear solve: rigid scenes, and scenes
# with solids or cloth, whose stiffness couples many particles (a ball on a 16 x 16 cloth
# needs about 200 with block-Jacobi).
KRYLOV_RIGID = 100
KRYLOV_MESHES = 400

# The implicit-gradient solves (`adjoint`) stop at this relative residual: gradients are
# compared with central differences to 1e-6 and better.
ADJOINT_RTOL = 1e-12
