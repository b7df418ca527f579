"""Rotations (layer 1): unit quaternions, rotation matrices, skew matrices.

Conventions:

* quaternions are scalar first, ``p = (w, x, y, z)``, shape ``(..., 4)``; ``p`` and ``−p`` are the
  same rotation. A rotation matrix ``R`` (shape ``(..., 3, 3)``) maps body-frame components to
  world components, ``x_world = R x_body``; composition is ``R(p ⊗ q) = R(p) R(q)``;
* :func:`quat_to_matrix` is *homogeneous*: it gives the rotation of ``p / |p|`` for any non-zero
  ``p`` without normalising first, so a quaternion state whose norm has drifted still gives an
  exactly orthogonal matrix, and constraints written with it do not depend on the norm;
* kinematics with the body-frame angular velocity ω̄: ``ṗ = ½ p ⊗ (0, ω̄)``, which preserves
  ``|p|`` exactly (:func:`quat_derivative`);
* every function broadcasts over leading axes and has finite derivatives everywhere (norms and
  ``sinc``-type factors are guarded at zero, also in untaken ``where`` branches).

Angles are in radians.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

__all__ = [
    "frame_from_axes",
    "matrix_to_quat",
    "quat_conjugate",
    "quat_derivative",
    "quat_from_axis_angle",
    "quat_from_rotation_vector",
    "quat_multiply",
    "quat_normalize",
    "quat_rotate",
    "rotation_vector_to_matrix",
    "quat_to_matrix",
    "quat_to_rotation_vector",
    "safe_norm",
    "skew",
    "unskew",
]

_IDENTITY_QUAT = (1.0, 0.0, 0.0, 0.0)


def _f(x: ArrayLike) -> Array:
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(float)


def safe_norm(x: ArrayLike, axis: int = -1) -> Array:
    """Euclidean norm along ``axis`` with a zero (not NaN) derivative at ``x = 0``."""
    x = _f(x)
    sq = jnp.sum(x * x, axis=axis)
    nonzero = sq > 0
    return jnp.where(nonzero, jnp.sqrt(jnp.where(nonzero, sq, 1.0)), 0.0)


def skew(w: ArrayLike) -> Array:
    """The cross-product matrix ``[w]×`` with ``[w]× x = w × x``; ``(..., 3) → (..., 3, 3)``."""
    w = _f(w)
    x, y, z = w[..., 0], w[..., 1], w[..., 2]
    zero = jnp.zeros_like(x)
    rows = [
        jnp.stack([zero, -z, y], axis=-1),
        jnp.stack([z, zero, -x], axis=-1),
        jnp.stack([-y, x, zero], axis=-1),
    ]
    return jnp.stack(rows, axis=-2)


def unskew(m: ArrayLike) -> Array:
    """The vector of the skew part of ``m``, ``vee(½(m − mᵀ))``; ``(..., 3, 3) → (..., 3)``.

    For ``m = [w]×`` it returns ``w``; for a rotation matrix it returns ``sin θ · axis``.
    """
    m = _f(m)
    return 0.5 * jnp.stack(
        [m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]],
        axis=-1,
    )


def quat_multiply(p: ArrayLike, q: ArrayLike) -> Array:
    """Hamilton product ``p ⊗ q`` (the rotation ``q`` followed by ``p``); ``(..., 4)``."""
    p, q = _f(p), _f(q)
    pw, pv = p[..., :1], p[..., 1:]
    qw, qv = q[..., :1], q[..., 1:]
    w = pw * qw - jnp.sum(pv * qv, axis=-1, keepdims=True)
    v = pw * qv + qw * pv + jnp.cross(pv, qv)
    return jnp.concatenate([w, v], axis=-1)


def quat_conjugate(p: ArrayLike) -> Array:
    """``(w, −x, −y, −z)``: the inverse rotation of a unit quaternion."""
    p = _f(p)
    return p * jnp.array([1.0, -1.0, -1.0, -1.0], dtype=p.dtype)


def quat_normalize(p: ArrayLike) -> Array:
    """``p / |p|``; the zero quaternion (invalid) maps to the identity, with finite derivatives."""
    p = _f(p)
    n = safe_norm(p)[..., None]
    ok = n > 0
    return jnp.where(ok, p / jnp.where(ok, n, 1.0), jnp.asarray(_IDENTITY_QUAT, dtype=p.dtype))


def quat_to_matrix(p: ArrayLike) -> Array:
    """Rotation matrix of ``p / |p|`` (homogeneous in ``p``, no normalisation needed).

    ``(..., 4) → (..., 3, 3)``. The zero quaternion is invalid; it gives the identity (guarded,
    finite derivatives) rather than NaN.
    """
    p = _f(p)
    n2 = jnp.sum(p * p, axis=-1)
    ok = n2 > 0
    s = jnp.where(ok, 2.0 / jnp.where(ok, n2, 1.0), 0.0)
    # R = I + s Σ_ab C[:, :, a, b] p_a p_b: a few array operations rather than ~45 scalar ones,
    # which matters because the constraint terms differentiate this twice (compile time).
    products = p[..., None, None, :, None] * p[..., None, None, None, :]
    return jnp.eye(3) + s[..., None, None] * jnp.sum(_QUAT_TO_MATRIX * products, axis=(-2, -1))


def _quat_to_matrix_coefficients() -> np.ndarray:
    """``C`` (3, 3, 4, 4) with ``R − I = (2/|p|²) Σ_ab C[i, j, a, b] p_a p_b``."""
    c = np.zeros((3, 3, 4, 4))
    w, x, y, z = range(4)
    for i, j, terms in [
        (0, 0, [(-1, y, y), (-1, z, z)]), (0, 1, [(1, x, y), (-1, w, z)]),
        (0, 2, [(1, x, z), (1, w, y)]), (1, 0, [(1, x, y), (1, w, z)]),
        (1, 1, [(-1, x, x), (-1, z, z)]), (1, 2, [(1, y, z), (-1, w, x)]),
        (2, 0, [(1, x, z), (-1, w, y)]), (2, 1, [(1, y, z), (1, w, x)]),
        (2, 2, [(-1, x, x), (-1, y, y)]),
    ]:  # fmt: skip
        for sign, a, b in terms:
            c[i, j, a, b] += sign
    return c


_QUAT_TO_MATRIX = _quat_to_matrix_coefficients()


def matrix_to_quat(r: ArrayLike) -> Array:
    """Unit quaternion with ``w ≥ 0`` of a rotation matrix (Shepperd's method); ``(..., 4)``.

    Uses the largest of ``1 + tr R``, ``1 + 2 R_kk − tr R`` as the pivot, so it is accurate for
    every rotation (including 180°).
    """
    r = _f(r)
    tr = r[..., 0, 0] + r[..., 1, 1] + r[..., 2, 2]
    d = jnp.stack([tr, r[..., 0, 0], r[..., 1, 1], r[..., 2, 2]], axis=-1)
    k = jnp.argmax(d, axis=-1)
    # Candidate 4·(pivot component)·q for each pivot choice; the pivot entry is 1 + 2 d_k − tr.
    c0 = jnp.stack(
        [
            1 + tr,
            r[..., 2, 1] - r[..., 1, 2],
            r[..., 0, 2] - r[..., 2, 0],
            r[..., 1, 0] - r[..., 0, 1],
        ],
        axis=-1,
    )
    c1 = jnp.stack(
        [
            r[..., 2, 1] - r[..., 1, 2],
            1 + 2 * r[..., 0, 0] - tr,
            r[..., 0, 1] + r[..., 1, 0],
            r[..., 0, 2] + r[..., 2, 0],
        ],
        axis=-1,
    )
    c2 = jnp.stack(
        [
            r[..., 0, 2] - r[..., 2, 0],
            r[..., 0, 1] + r[..., 1, 0],
            1 + 2 * r[..., 1, 1] - tr,
            r[..., 1, 2] + r[..., 2, 1],
        ],
        axis=-1,
    )
    c3 = jnp.stack(
        [
            r[..., 1, 0] - r[..., 0, 1],
            r[..., 0, 2] + r[..., 2, 0],
            r[..., 1, 2] + r[..., 2, 1],
            1 + 2 * r[..., 2, 2] - tr,
        ],
        axis=-1,
    )
    cand = jnp.stack([c0, c1, c2, c3], axis=-2)  # (..., 4 pivots, 4)
    q = jnp.take_along_axis(cand, k[..., None, None], axis=-2)[..., 0, :]
    q = quat_normalize(q)
    return jnp.where(q[..., :1] < 0, -q, q)


def quat_from_axis_angle(axis: ArrayLike, angle: ArrayLike) -> Array:
    """Rotation by ``angle`` (rad) about ``axis`` (normalised here; a zero axis gives identity)."""
    axis = _f(axis)
    angle = _f(angle)
    n = safe_norm(axis)[..., None]
    unit = jnp.where(n > 0, axis / jnp.where(n > 0, n, 1.0), 0.0)
    half = 0.5 * angle[..., None]
    return jnp.concatenate([jnp.cos(half), jnp.sin(half) * unit], axis=-1)


def quat_from_rotation_vector(phi: ArrayLike) -> Array:
    """Exponential map: the rotation by ``|φ|`` about ``φ/|φ|``; ``(..., 3) → (..., 4)``.

    Smooth at ``φ = 0`` (``sin(θ/2)/θ`` through ``jnp.sinc``), with derivative ``(0, ½ I)`` there.
    """
    phi = _f(phi)
    theta = safe_norm(phi)[..., None]
    return jnp.concatenate(
        [jnp.cos(0.5 * theta), 0.5 * jnp.sinc(theta / (2 * jnp.pi)) * phi], axis=-1
    )


def quat_to_rotation_vector(p: ArrayLike) -> Array:
    """Logarithm map: rotation vector ``θ · axis``, ``θ ∈ [0, π]``; ``(..., 4) → (..., 3)``."""
    p = quat_normalize(p)
    p = jnp.where(p[..., :1] < 0, -p, p)
    w, v = p[..., 0], p[..., 1:]
    s = safe_norm(v)
    small = s < 1e-6
    s_big = jnp.where(small, 1.0, s)
    w_small = jnp.where(small, w, 1.0)
    factor = jnp.where(
        small,
        2.0 / w_small * (1.0 - s * s / (3.0 * w_small * w_small)),
        2.0 * jnp.arctan2(s_big, w) / s_big,
    )
    return factor[..., None] * v


def rotation_vector_to_matrix(theta: ArrayLike) -> Array:
    """``exp([θ]×)`` (Rodrigues) for one rotation vector ``θ`` (3,) → (3, 3), with a series near
    0 so that values and derivatives are finite."""
    theta = _f(theta)
    t2 = jnp.dot(theta, theta)
    small = t2 < 1e-12
    safe = jnp.where(small, 1.0, t2)
    t = jnp.sqrt(safe)
    a = jnp.where(small, 1 - t2 / 6, jnp.sin(t) / t)
    b = jnp.where(small, 0.5 - t2 / 24, (1 - jnp.cos(t)) / safe)
    k = skew(theta)
    return jnp.eye(3, dtype=theta.dtype) + a * k + b * (k @ k)


def quat_rotate(p: ArrayLike, x: ArrayLike) -> Array:
    """``R(p) x``: vector ``x`` (body components) in world components; broadcasts."""
    return jnp.einsum("...ij,...j->...i", quat_to_matrix(p), _f(x))


def quat_derivative(p: ArrayLike, omega_body: ArrayLike) -> Array:
    """Quaternion kinematics ``ṗ = ½ p ⊗ (0, ω̄)`` with ω̄ the body-frame angular velocity (rad/s).

    Linear in ω̄; ``p · ṗ = 0`` (the norm is preserved exactly by the continuous motion).
    """
    omega_body = _f(omega_body)
    pure = jnp.concatenate([jnp.zeros_like(omega_body[..., :1]), omega_body], axis=-1)
    return 0.5 * quat_multiply(p, pure)


def frame_from_axes(z_axis: ArrayLike, x_hint: ArrayLike | None = None) -> Array:
    """Rotation matrix whose third column is ``z_axis/|z_axis|`` and whose first column is the part
    of ``x_hint`` orthogonal to it (default: the coordinate axis least aligned with ``z``).

    Plain NumPy-level helper for building joint frames (concrete inputs; raises on zero or
    parallel vectors).
    """
    z = np.asarray(z_axis, dtype=float)
    if z.shape != (3,) or not np.linalg.norm(z) > 0:
        raise ValueError(f"z_axis must be a non-zero 3-vector, got {z_axis!r}")
    z = z / np.linalg.norm(z)
    if x_hint is None:
        x_hint = np.eye(3)[int(np.argmin(np.abs(z)))]
    x = np.asarray(x_hint, dtype=float)
    x = x - (x @ z) * z
    if not np.linalg.norm(x) > 1e-12:
        raise ValueError(f"x_hint {x_hint!r} is parallel to z_axis {z_axis!r}")
    x = x / np.linalg.norm(x)
    return jnp.asarray(np.stack([x, np.cross(z, x), z], axis=1))
