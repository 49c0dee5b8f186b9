"""Solvers of the implicit step: `Newton`, `Descent` (primal) and `Dual` (XPBD), and how
gradients flow through them (`Implicit`, `Unrolled`).

Every solver is a `base.Solver`: static settings, `solve(problem, u0, args) -> (u, stats)`
over a `jaxcontact.problem.Problem`, driven by one loop; its `gradients` (an adjoint object)
say how `step` differentiates the solve.
"""

from jaxcontact.solvers.adjoint import Implicit, Unrolled
from jaxcontact.solvers.base import Solver
from jaxcontact.solvers.descent import Descent
from jaxcontact.solvers.dual import Dual
from jaxcontact.solvers.newton import Newton

SOLVERS = (Newton, Descent, Dual)

__all__ = ["Descent", "Dual", "Implicit", "Newton", "SOLVERS", "Solver", "Unrolled"]
