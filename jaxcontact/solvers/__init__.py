"""Solvers of the implicit step: `Newton`, `Descent` (primal) and `Dual` (XPBD).

All have the interface `solve(problem, u0, args) -> (u, stats)` over a
`jaxcontact.problem.Problem`, static settings, and an `ad` field for the gradient mode.
"""

from jaxcontact.solvers.descent import Descent
from jaxcontact.solvers.dual import Dual
from jaxcontact.solvers.newton import Newton

SOLVERS = (Newton, Descent, Dual)


def check_solver(solver, normal_law, friction_law):
    """ValueError if `solver` cannot run the given laws (Dual needs quadratic rows)."""
    if getattr(solver, "quadratic_rows", False):
        if normal_law != "linear":
            raise ValueError(f"solver {type(solver).__name__} needs the 'linear' normal law "
                             f"(its rows are compliant constraints), got normal={normal_law!r}")
        if friction_law not in ("huber", "linear"):
            raise ValueError(f"solver {type(solver).__name__} needs 'huber' or 'linear' "
                             f"friction (a disc projection), got friction={friction_law!r}")


__all__ = ["Descent", "Dual", "Newton", "SOLVERS", "check_solver"]
