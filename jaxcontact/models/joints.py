"""Springs between bodies, as potentials of the attachment points (thesis Eq. 111).

Each spring joins a point fixed in body a to a point fixed in body b, or to a fixed world
point when b = -1. Functions here take the poses of each spring's two sides, gathered per
spring, so one forward-mode pass gives every row's derivatives (see `dynamics.rows`).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxcontact.math import quat_rotate, safe_norm
from jaxcontact.types import Array, Spring


def attachment_points(spring: Spring, pos_a, quat_a, pos_b, quat_b) -> tuple[Array, Array]:
    """World attachment points (S, 3) of both sides. A world side (b = -1) is given the
    origin and the identity rotation by the caller, so its anchor is a world point."""
    return (pos_a + quat_rotate(quat_a, spring.anchor_a),
            pos_b + quat_rotate(quat_b, spring.anchor_b))


def stretch(spring: Spring, pos_a, quat_a, pos_b, quat_b) -> Array:
    """C = |p_a - p_b| - L per spring, (S,) (0 gradient where the points coincide)."""
    p_a, p_b = attachment_points(spring, pos_a, quat_a, pos_b, quat_b)
    return safe_norm(p_a - p_b) - spring.rest_length


def energy(spring: Spring, pos_a, quat_a, pos_b, quat_b) -> Array:
    """U = k/2 (|Δ| - L)², Δ = p_a - p_b, per spring (S,).

    Written as k/2 |Δ|² - k L |Δ| + k L²/2: for a zero rest length (a soft ball joint) the
    energy is then k/2 |Δ|², smooth with Hessian k I where the points coincide.
    """
    p_a, p_b = attachment_points(spring, pos_a, quat_a, pos_b, quat_b)
    delta = p_a - p_b
    k, rest = spring.stiffness, spring.rest_length
    return 0.5 * k * jnp.sum(delta * delta, axis=-1) - k * rest * safe_norm(delta) \
        + 0.5 * k * rest * rest
