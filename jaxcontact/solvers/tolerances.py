"""Every numerical constant of the solvers, each with the reason for its value."""

# Residual tolerances (m/s) where a solver gives none: float64 for gradient checks against
# central differences (~1e-9 relative); float32 moves a body < 1 µm per 2 ms step.
TOL_FLOAT64 = 1e-10
TOL_FLOAT32 = 3e-4

# Converged within this many multiples of the rounding of M (u - ũ) (rounding alone: ~1-10).
ROUNDING_ULPS = 64.0

# A solve rounding stops: within this many resolutions eps|q|/Δt (a joint sums ~8 roundings).
RESOLUTION_ULPS = 8.0

# Line search: |φ'(α)| <= LINE_TOL |φ'(0)| (strong Wolfe; 1e-3: 4.2 φ' per humanoid search, 2.4).
LINE_TOL = 0.1
# ... but the whole Newton step (α = 1, tried first) on this looser test (Wolfe's c₂ for Newton
# is ~0.9): the humanoid's searches 2.1 -> 1.4 φ' and 2.62 -> 2.52 iterations (note 63); a
# search that does not stop at 1 still ends at LINE_TOL (0.5 throughout slowed the piles).
FULL_STEP_TOL = 0.5
# φ' this many times steeper at the bracket's top than its bottom: next point a tenth in (note 59).
LINE_STEEP = 100.0
# ... or once its bracket is this narrow relative to its upper end (φ ~1 % off its min; note 58).
LINE_WIDTH = 0.1

# Relative residual of Newton's conjugate-gradient directions: each still gains three digits.
FORCING = 1e-3

# Dense Hessians up to this many unknowns (64 bodies): faster, bounded by memory (design note 58).
DENSE_MAX = 384
# ... and up to this many where every unknown belongs to a rigid body (128 bodies; 4.7 MB a
# scene in float64). Block-Jacobi conjugate gradients cannot carry a robot's stiff joints:
# dm_control's dog (450 unknowns) took 31 Newton iterations and 1.8 s a step, dense 6 and
# 0.37 s (note 67). Particles (cloth, solids) keep their multilevel-preconditioned CG above.
DENSE_MAX_RIGID = 768

# Conjugate-gradient caps: rigid scenes; solids or cloth (a ball on a 16 x 16 cloth needs ~200).
KRYLOV_RIGID = 100
KRYLOV_MESHES = 400

# Implicit-gradient solves stop at this relative residual: gradients are checked to 1e-6.
ADJOINT_RTOL = 1e-12
