"""Rigid bodies, frames on them, and their kinematics.

State of one body (7 coordinates, 6 velocities)::

    q_body = (r_G (3), p (4))        r_G: centre of mass, world (m); p: unit quaternion (w, x, y, z)
    v_body = (ṙ_G (3), ω̄ (3))        ṙ_G: COM velocity, world (m/s); ω̄: angular velocity, body axes

With the reference point at the centre of mass and ω̄ in body axes, the mass matrix is the
constant ``diag(m I₃, J̄_G)``. The user's *body frame* (the frame the COM, the inertia axes and all
attachment points are given in — e.g. the mesh's frame) has its origin wherever the user put it:
a point ``s̄`` given in the body frame is at ``r_G + R (s̄ − c̄)`` in the world, ``c̄`` the COM in
the body frame. The ground is the world frame (name :data:`GROUND`).
"""

from __future__ import annotations

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from diffmbs._linalg import matvec
from diffmbs.contact import as_float_leaf
from diffmbs.rotations import frame_from_axes, quat_derivative, quat_to_matrix

__all__ = ["GROUND", "BodyKinematics", "BodyStack", "Frame", "RigidBody"]

GROUND = "ground"
"""The reserved name of the fixed world frame."""

POINT_MASS_RADIUS = 1e-6
"""Default radius (m) of the sphere that stands for a point mass (:meth:`RigidBody.point_mass`)."""


# --------------------------------------------------------------------------- small algebra


def dot(a: Array, b: Array) -> Array:
    """``a · b`` over the last axis, written elementwise: XLA fuses it (a tiny ``dot_general``
    would be a separate kernel, and dozens of them dominate compile time)."""
    return jnp.sum(a * b, axis=-1)


# --------------------------------------------------------------------------- converters


def concrete_or_none(x) -> np.ndarray | None:
    """``x`` as a NumPy array, or None when it is traced (checks are skipped then)."""
    try:
        return np.asarray(x, dtype=float)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError, TypeError):
        return None


as_float_array = as_float_leaf
"""Converter for float fields: a float64 JAX array (a traced value passes through)."""


def as_vector3(x: ArrayLike) -> Array:
    """Converter for 3-vectors (m, m/s, rad/s …)."""
    x = as_float_array(x)
    if x.shape != (3,):
        raise ValueError(f"expected a 3-vector, got shape {x.shape}")
    return x


def as_inertia(x: ArrayLike) -> Array:
    """Converter: a 3×3 inertia tensor, or its 3 diagonal entries (kg·m²)."""
    x = as_float_array(x)
    if x.shape == (3,):
        return jnp.diag(x)
    if x.shape != (3, 3):
        raise ValueError(f"inertia must be 3×3 or its 3 diagonal entries, got shape {x.shape}")
    return x


def as_quaternion(x: ArrayLike) -> Array:
    """Converter: a quaternion (w, x, y, z); normalised when concrete."""
    x = as_float_array(x)
    if x.shape != (4,):
        raise ValueError(f"expected a quaternion (w, x, y, z), got shape {x.shape}")
    arr = concrete_or_none(x)
    if arr is not None:
        n = np.linalg.norm(arr)
        if not (np.isfinite(n) and n > 0):
            raise ValueError(f"a quaternion must be finite and non-zero, got {arr.tolist()}")
        return jnp.asarray(arr / n)
    return x


# --------------------------------------------------------------------------- frames

_IDENTITY = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


class Frame(eqx.Module):
    """A frame attached to a body: origin ``point`` (m) and axes ``rotation`` (3×3, columns are
    the frame's x, y, z axes), both in the body frame (in the world for the ground)."""

    point: Array = eqx.field(converter=as_vector3)
    rotation: Array = eqx.field(default=_IDENTITY, converter=as_float_array)

    def __check_init__(self):
        r = concrete_or_none(self.rotation)
        if r is None:
            return
        if r.shape != (3, 3) or not np.allclose(r.T @ r, np.eye(3), atol=1e-9):
            raise ValueError(f"Frame.rotation must be a 3×3 rotation matrix, got {r.tolist()}")
        if np.linalg.det(r) < 0:
            raise ValueError("Frame.rotation is a reflection (det < 0), not a rotation")

    @classmethod
    def from_axis(
        cls, point: ArrayLike, z_axis: ArrayLike, x_axis: ArrayLike | None = None
    ) -> Frame:
        """Frame at ``point`` whose z axis is ``z_axis`` (the joint axis) and whose x axis is the
        part of ``x_axis`` orthogonal to it (default: any perpendicular)."""
        return cls(point, frame_from_axes(z_axis, x_axis))

    @classmethod
    def from_quaternion(cls, point: ArrayLike, quaternion: ArrayLike) -> Frame:
        """Frame at ``point`` with orientation ``quaternion`` (w, x, y, z) relative to the body."""
        return cls(point, quat_to_matrix(as_quaternion(quaternion)))


def as_frame(x) -> Frame:
    """Converter: a :class:`Frame`, or a point (3-vector) for a frame with the body's axes."""
    return x if isinstance(x, Frame) else Frame(x)


# --------------------------------------------------------------------------- bodies


def _check_mass_properties(name: str, mass, inertia) -> None:
    m, j = concrete_or_none(mass), concrete_or_none(inertia)
    if m is not None and not (np.isfinite(m) and m > 0):
        raise ValueError(f"body {name!r}: mass must be positive and finite, got {float(m)!r}")
    if j is None:
        return
    if not np.all(np.isfinite(j)):
        raise ValueError(f"body {name!r}: inertia is not finite: {j.tolist()}")
    scale = np.max(np.abs(j))
    if not np.allclose(j, j.T, rtol=0, atol=1e-12 * max(scale, 1e-300)):
        raise ValueError(f"body {name!r}: inertia tensor is not symmetric: {j.tolist()}")
    principal = np.linalg.eigvalsh(0.5 * (j + j.T))
    if not principal[0] > 1e-12 * max(scale, 1e-300):
        raise ValueError(
            f"body {name!r}: inertia tensor is not positive definite (principal moments "
            f"{principal.tolist()} kg·m²)"
        )
    a, b, c = principal
    if c > a + b + 1e-9 * c:
        raise ValueError(
            f"body {name!r}: principal moments {principal.tolist()} kg·m² violate the triangle "
            f"inequality ({c:.6g} > {a:.6g} + {b:.6g}): no mass distribution has this inertia"
        )


class RigidBody(eqx.Module):
    """A rigid body: mass properties and initial state. Float fields are parameters.

    Fields (SI units; vectors in the body frame unless said otherwise):
        name: unique name (static); ``"ground"`` is reserved.
        mass: m (kg), > 0.
        inertia: J̄_G (kg·m²), 3×3 about the centre of mass in body axes (or its diagonal);
            symmetric positive definite with principal moments satisfying the triangle inequality.
        com: c̄ (m), the centre of mass in the body frame.
        position: initial position of the body-frame origin, world (m).
        orientation: initial orientation, quaternion (w, x, y, z) body → world (normalised).
        velocity: initial velocity of the body-frame origin, world (m/s).
        angular_velocity: initial angular velocity ω̄, body axes (rad/s).

    Bad mass properties raise ``ValueError`` naming the body (checked when concrete).
    """

    name: str = eqx.field(static=True)
    mass: Array = eqx.field(converter=as_float_array)
    inertia: Array = eqx.field(converter=as_inertia)
    com: Array = eqx.field(default=(0.0, 0.0, 0.0), converter=as_vector3)
    position: Array = eqx.field(default=(0.0, 0.0, 0.0), converter=as_vector3)
    orientation: Array = eqx.field(default=(1.0, 0.0, 0.0, 0.0), converter=as_quaternion)
    velocity: Array = eqx.field(default=(0.0, 0.0, 0.0), converter=as_vector3)
    angular_velocity: Array = eqx.field(default=(0.0, 0.0, 0.0), converter=as_vector3)

    def __check_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a body needs a non-empty string name, got {self.name!r}")
        if self.name == GROUND:
            raise ValueError(f"{GROUND!r} is reserved for the fixed world frame")
        _check_mass_properties(self.name, self.mass, self.inertia)

    @classmethod
    def point_mass(
        cls, name: str, mass: ArrayLike, *, radius: float = POINT_MASS_RADIUS, **initial_state
    ) -> RigidBody:
        """A point mass ``mass`` (kg): a uniform sphere of ``radius`` (m), inertia
        ``2/5 m r²`` about every axis. The engine needs every rotation to carry inertia (a
        point mass on a ball joint would spin freely at zero inertia); a small sphere keeps the
        mass matrix definite and changes the motion by a relative ``(r/L)²`` for arms ``L``
        (a 1 m pendulum's period by 2e-13 at the default 1e-6 m; the constrained solve is exact
        at such inertias, see :class:`~diffmbs.system.NullSpaceKKT`). Attach forces at its
        centre (the body-frame origin); joints may attach at any point (a pendulum's pivot).
        ``initial_state``: ``position``, ``velocity`` (and, rarely needed, ``orientation``,
        ``angular_velocity``) as in the class."""
        if not (np.isfinite(radius) and radius > 0):
            raise ValueError(f"body {name!r}: point-mass radius must be positive, got {radius!r}")
        inertia = 0.4 * as_float_array(mass) * radius**2
        return cls(name, mass=mass, inertia=jnp.eye(3) * inertia, **initial_state)

    @classmethod
    def from_mesh(cls, name: str, mesh, density: float, **initial_state) -> RigidBody:
        """Body with the mass properties of a closed triangle mesh of uniform ``density`` (kg/m³).

        ``mesh`` is a ``trimesh.Trimesh`` or a path trimesh can load (STL, OBJ, PLY …), in metres,
        in the body frame. ``initial_state``: ``position``, ``orientation``, ``velocity``,
        ``angular_velocity`` as in the class. Raises ``ValueError`` (naming the body) for a mesh
        that is not watertight or whose volume is not positive (inverted faces).
        """
        import trimesh

        if isinstance(mesh, str | os.PathLike):
            mesh = trimesh.load(os.fspath(mesh), force="mesh")
        if not isinstance(mesh, trimesh.Trimesh):
            raise ValueError(f"body {name!r}: expected a trimesh.Trimesh or a mesh file path")
        if not mesh.is_watertight:
            raise ValueError(
                f"body {name!r}: the mesh is not watertight (open edges or holes), so it "
                "encloses no volume; close it (e.g. trimesh.repair.fill_holes) first"
            )
        if not density > 0:
            raise ValueError(f"body {name!r}: density must be positive, got {density!r}")
        if not mesh.volume > 0:
            raise ValueError(
                f"body {name!r}: the mesh volume is {mesh.volume:.6g} m³ (faces inverted? "
                "try mesh.invert() or trimesh.repair.fix_normals)"
            )
        props = mesh.mass_properties
        scale = density / props["density"]  # trimesh reports for its own density (1 by default)
        return cls(
            name,
            mass=props["mass"] * scale,
            inertia=np.asarray(props["inertia"]) * scale,  # about the centre of mass
            com=props["center_mass"],
            **initial_state,
        )


class BodyKinematics(eqx.Module):
    """Position and velocity state of one body (or, with a leading axis, of many), world axes.

    Fields: ``position`` r_G (3,) m; ``rotation`` R (3, 3) body → world; ``com`` c̄ (3,) m in the
    body frame; ``velocity`` ṙ_G (3,) m/s; ``angular_velocity`` ω (3,) rad/s, world axes. The
    ground has r_G = 0, R = I, c̄ = 0 and no motion. Methods act on one body (use inside ``vmap``).
    """

    position: Array
    rotation: Array
    com: Array
    velocity: Array
    angular_velocity: Array

    def arm(self, point: Array) -> Array:
        """World vector from the COM to the body-frame ``point``, ``R (s̄ − c̄)`` (m)."""
        return matvec(self.rotation, point - self.com)

    def point(self, point: Array) -> Array:
        """World position of the body-frame ``point`` (m)."""
        return self.position + self.arm(point)

    def point_velocity(self, point: Array) -> Array:
        """World velocity of the material point at body-frame ``point`` (m/s)."""
        return self.velocity + jnp.cross(self.angular_velocity, self.arm(point))

    def frame(self, frame: Frame) -> tuple[Array, Array]:
        """World origin (3,) and axes (3, 3) (columns x, y, z) of a body-attached ``frame``."""
        axes = jnp.sum(self.rotation[:, :, None] * frame.rotation[None, :, :], axis=1)
        return self.point(frame.point), axes


class BodyStack(eqx.Module):
    """All rigid bodies of a model as stacked arrays (leading axis ``n`` = number of bodies).

    ``names`` static; ``mass`` (n,), ``inertia`` (n, 3, 3), ``com`` (n, 3) and the initial state
    ``position``, ``orientation``, ``velocity``, ``angular_velocity`` of :class:`RigidBody`.
    """

    names: tuple[str, ...] = eqx.field(static=True)
    mass: Array = eqx.field(metadata={"units": "kg"})
    inertia: Array = eqx.field(metadata={"units": "kg m^2"})
    com: Array = eqx.field(metadata={"units": "m"})
    position: Array = eqx.field(metadata={"units": "m"})
    orientation: Array = eqx.field(metadata={"units": "1"})
    velocity: Array = eqx.field(metadata={"units": "m/s"})
    angular_velocity: Array = eqx.field(metadata={"units": "rad/s"})

    @classmethod
    def from_bodies(cls, bodies: list[RigidBody]) -> BodyStack:
        if not bodies:  # a model of modal bodies only
            z = jnp.zeros((0, 3))
            return cls((), jnp.zeros(0), jnp.zeros((0, 3, 3)), z, z, jnp.zeros((0, 4)), z, z)
        fields = ("mass", "inertia", "com", "position", "orientation", "velocity")
        stacked = {
            f: jnp.stack([getattr(b, f) for b in bodies]) for f in (*fields, "angular_velocity")
        }
        return cls(tuple(b.name for b in bodies), **stacked)

    @property
    def count(self) -> int:
        return len(self.names)

    def mass_matrix(self) -> Array:
        """The constant block-diagonal mass matrix ``diag(m_i I₃, J̄_i)``, shape (6n, 6n)."""
        n = self.count
        return jnp.einsum("ij,iab->iajb", jnp.eye(n), self.mass_blocks()).reshape(6 * n, 6 * n)

    def mass_blocks(self) -> Array:
        """The bodies' 6×6 mass matrices ``diag(m_i I₃, J̄_i)``, shape (n, 6, 6)."""
        blocks = jnp.zeros((self.count, 6, 6), dtype=self.mass.dtype)
        blocks = blocks.at[:, :3, :3].set(self.mass[:, None, None] * jnp.eye(3))
        return blocks.at[:, 3:, 3:].set(self.inertia)

    def initial_state(self) -> tuple[Array, Array]:
        """``(q0, v0)`` of shapes (7n,), (6n,) from the bodies' initial poses and velocities."""
        rot = quat_to_matrix(self.orientation)
        arm = jnp.einsum("nij,nj->ni", rot, self.com)
        r_g = self.position + arm
        spin = jnp.cross(self.angular_velocity, self.com)
        v_g = self.velocity + jnp.einsum("nij,nj->ni", rot, spin)
        q0 = jnp.concatenate([r_g, self.orientation], axis=1).reshape(-1)
        v0 = jnp.concatenate([v_g, self.angular_velocity], axis=1).reshape(-1)
        return q0, v0

    def qdot(self, q: Array, v: Array) -> Array:
        """``q̇ = (ṙ_G, ½ p ⊗ (0, ω̄))`` per body, shape (7n,)."""
        qb, vb = q.reshape(-1, 7), v.reshape(-1, 6)
        pdot = quat_derivative(qb[:, 3:], vb[:, 3:])
        return jnp.concatenate([vb[:, :3], pdot], axis=1).reshape(-1)

    def kinematics(self, q: Array, v: Array | None = None) -> BodyKinematics:
        """Stacked :class:`BodyKinematics` of the n bodies plus the ground (index n, last)."""
        qb = q.reshape(-1, 7)
        rot = quat_to_matrix(qb[:, 3:])
        if v is None:
            return self.with_ground(rot, qb[:, :3])
        vb = v.reshape(-1, 6)
        return self.with_ground(rot, qb[:, :3], vb[:, :3], vb[:, 3:])

    def with_ground(
        self,
        rotation: Array,
        position: Array,
        velocity: Array | None = None,
        omega_bar: Array | None = None,
    ) -> BodyKinematics:
        """Stacked :class:`BodyKinematics` from the bodies' rotations R (n, 3, 3), COM positions
        (n, 3) and, optionally, COM velocities (n, 3) and body-axes angular velocities ω̄ (n, 3);
        the ground is appended as row n."""
        zero = jnp.zeros((1, 3), dtype=position.dtype)
        if velocity is None:
            velocity = omega = jnp.zeros_like(position)
        else:
            omega = matvec(rotation, omega_bar)
        return BodyKinematics(
            position=jnp.concatenate([position, zero]),
            rotation=jnp.concatenate([rotation, jnp.eye(3, dtype=position.dtype)[None]]),
            com=jnp.concatenate([self.com, zero]),
            velocity=jnp.concatenate([velocity, zero]),
            angular_velocity=jnp.concatenate([omega, zero]),
        )
