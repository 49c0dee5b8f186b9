"""Solvers of the implicit step, `Newton`, `Descent` (primal) and `Dual` (XPBD), each a
`base.Solver`, and how gradients flow through them (`Implicit`, `Unrolled`)."""

from jaxcontact.solvers.adjoint import Implicit, Unrolled
from jaxcontact.solvers.base import Solver
from jaxcontact.solvers.descent import Descent
from jaxcontact.solvers.dual import Dual
from jaxcontact.solvers.newton import Newton

SOLVERS = (Newton, Descent, Dual)

__all__ = ["Descent", "Dual", "Implicit", "Newton", "SOLVERS", "Solver", "Unrolled"]
