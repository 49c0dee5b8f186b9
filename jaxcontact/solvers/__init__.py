"""The step's solvers (`Newton`, `Descent`, `Dual`) and their gradients (`Implicit`, `Unrolled`)."""

from jaxcontact.solvers.adjoint import Implicit, Unrolled
from jaxcontact.solvers.base import Solver
from jaxcontact.solvers.descent import Descent
from jaxcontact.solvers.dual import Dual
from jaxcontact.solvers.newton import Newton

SOLVERS = (Newton, Descent, Dual)

__all__ = ["Descent", "Dual", "Implicit", "Newton", "SOLVERS", "Solver", "Unrolled"]
