"""Parameters by name: one resolver from a name to a model's leaf (layer 0, jax/equinox only).

A parameter name is an attribute path into a model pytree: ``"k_channel"``,
``"channel.stiffness"``, ``"springs[2].rate"``, ``"params['k']"``; an index after an array leaf
names one element of it (``"stiffness[2]"``). A model may resolve names its own way by
defining ``resolve_parameter(path) -> ParameterRef`` — :class:`~diffmbs.MechanicalSystem` does
(by attribute path) and ``MultibodyModel`` overrides it with its element names
(``"spring.stiffness"``, ``"hinge.motion.rate"``, ``"gravity"``). Every consumer —
``with_parameter``, ``identification``, job files — goes through :func:`resolve`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

__all__ = [
    "ParameterError",
    "ParameterRef",
    "parse_path",
    "resolve",
    "resolve_attribute_path",
    "get_parameter",
    "set_parameter",
    "parameter_paths",
]

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(-?\d+)\]|\[['\"]([^'\"]+)['\"]\]")


class ParameterError(KeyError, ValueError):
    """An unknown or unusable parameter name: ``path`` (None while it is being resolved) and
    ``reason``, which names what exists instead. A ``KeyError`` (a lookup) and a ``ValueError``
    (bad input: the CLI prints it on one line)."""

    def __init__(self, path: str | None, reason: str):
        super().__init__(path, reason)
        self.path, self.reason = path, reason

    def __str__(self) -> str:
        return self.reason if self.path is None else f"parameter {self.path!r}: {self.reason}"


class ParameterRef(NamedTuple):
    """Where a parameter lives: ``where(model)`` selects its leaf (an ``eqx.tree_at``
    selector) and ``index`` the element inside that leaf (``()``: the whole leaf)."""

    where: Callable[[Any], Any]
    index: tuple[int, ...] = ()


def parse_path(path: str) -> tuple[tuple[str, Any], ...]:
    """``"a.b[2].c['key']"`` → ``(("attr", "a"), ("attr", "b"), ("index", 2), ("attr", "c"),
    ("key", "key"))``; raises ValueError on malformed text."""
    if not isinstance(path, str):
        raise ValueError(f"a parameter path must be a string, got {path!r}")
    out: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(path):
        if path[pos] == "." and out:
            pos += 1
        m = _SEGMENT.match(path, pos)
        if m is None:
            raise ValueError(f"malformed path {path!r} at character {pos}")
        if m.group(1) is not None:
            out.append(("attr", m.group(1)))
        elif m.group(2) is not None:
            out.append(("index", int(m.group(2))))
        else:
            out.append(("key", m.group(3)))
        pos = m.end()
    if not out:
        raise ValueError("empty path")
    return tuple(out)


def _is_array(x: Any) -> bool:
    return isinstance(x, jax.Array | np.ndarray)  # tracers included


def _is_float(x: Any) -> bool:
    """A float, or an array (concrete or traced) of floats."""
    if isinstance(x, float):
        return True
    return _is_array(x) and jnp.issubdtype(x.dtype, jnp.floating)


def _is_module(node: Any) -> bool:
    return dataclasses.is_dataclass(node) and not isinstance(node, type)


def _names_at(node: Any) -> str:
    """The names one can step to from ``node`` (for error messages)."""
    if _is_module(node):
        names = [f.name for f in dataclasses.fields(node) if not f.metadata.get("static")]
    elif isinstance(node, dict):
        names = [repr(k) for k in node]
    elif isinstance(node, list | tuple):
        names = [f"[0]…[{len(node) - 1}]"] if node else []
    else:
        names = []
    return ", ".join(names) if names else "none"


def _descend(node: Any, segment: tuple[str, Any]) -> Any:
    kind, key = segment
    if kind == "attr":
        fields = {f.name: f for f in dataclasses.fields(node)} if _is_module(node) else {}
        if key in fields and fields[key].metadata.get("static"):
            raise ParameterError(
                None, f"{type(node).__name__}.{key} is a static field: structure, not a parameter"
            )
        if isinstance(node, dict) or not hasattr(node, key):
            raise ParameterError(
                None, f"{type(node).__name__} has no {key!r}; it has: {_names_at(node)}"
            )
        return getattr(node, key)
    try:
        return node[key]
    except (KeyError, IndexError, TypeError):  # the container's own lookup errors
        raise ParameterError(
            None, f"{type(node).__name__} has no [{key!r}]; it has: {_names_at(node)}"
        ) from None


def _selector(segments: tuple[tuple[str, Any], ...], base: Callable[[Any], Any] | None = None):
    def where(model):
        node = model if base is None else base(model)
        for seg in segments:
            node = _descend(node, seg)
        return node

    return where


def resolve_attribute_path(
    model: Any,
    path: str,
    base: Callable[[Any], Any] | None = None,
    leading: tuple[int, ...] = (),
    name: str | None = None,
) -> ParameterRef:
    """Resolve ``path`` by attributes, items and indices, from ``model`` (or from
    ``base(model)``); ``leading`` indices come before the path's own in an array leaf (the row
    of an element in a stacked leaf); ``name`` is the parameter's name in messages (default
    ``path``). Raises :class:`ParameterError` naming the step that failed and what exists there."""
    name = path if name is None else name
    segments = parse_path(path)
    node = model if base is None else base(model)
    depth = 0  # segments walked; the rest index into the leaf reached
    while depth < len(segments) and not _is_array(node):
        try:
            node = _descend(node, segments[depth])
        except ParameterError as err:
            raise ParameterError(name, err.reason) from None
        depth += 1
    rest = segments[depth:]
    if any(kind != "index" for kind, _ in rest):
        raise ParameterError(name, f"goes through an array of shape {node.shape}")
    index = leading + tuple(k for _, k in rest)
    try:
        np.empty(np.shape(node))[index]
    except IndexError:
        raise ParameterError(
            name, f"index {index} is out of range for shape {np.shape(node)}"
        ) from None
    return ParameterRef(_selector(segments[:depth], base), index)


def resolve(model: Any, path: str) -> ParameterRef:
    """The model's own resolver (``model.resolve_parameter``) where it has one, else
    :func:`resolve_attribute_path`. Raises :class:`ParameterError` for an unknown name, naming
    what exists."""
    own = getattr(model, "resolve_parameter", None)
    if own is not None:
        return own(path)
    return resolve_attribute_path(model, path)


def _checked_leaf(model: Any, path: str, ref: ParameterRef) -> Any:
    leaf = ref.where(model)
    if not (_is_float(leaf) or (isinstance(leaf, int) and not isinstance(leaf, bool))):
        raise ParameterError(path, f"is a {type(leaf).__name__}, not a float or a float array")
    return leaf


def get_parameter(model: Any, path: str) -> Array:
    """The value of the parameter ``path`` (an element of its leaf where the path indexes)."""
    ref = resolve(model, path)
    leaf = jnp.asarray(_checked_leaf(model, path, ref))
    return leaf[ref.index] if ref.index else leaf


POSITIVE_NAMES = frozenset({"mass", "radius", "radius_i", "radius_j", "smoothing", "clearance",
                            "contact_modulus", "crown_radius", "half_length",
                            "bore_half_length"})  # fmt: skip
NON_NEGATIVE_NAMES = frozenset({"stiffness", "damping", "journal_radius", "mu", "allowance",
                                "wear_coefficient"})  # fmt: skip


def check_physical_value(name: str, value: Any, path: str | None = None) -> None:
    """Raise :class:`ParameterError` (naming ``path``, default ``name``) when a concrete value
    of a parameter called ``name`` is outside its physical range: not finite, a mass, radius,
    smoothing length, clearance, contact modulus or a wearing journal's lengths ≤ 0, a
    stiffness, damping, journal radius, friction coefficient, thickness allowance or wear
    coefficient < 0. Traced values are not checked (they are a fit's or a sweep's
    business)."""
    if isinstance(value, jax.core.Tracer):
        return
    x = np.asarray(value)
    if not np.issubdtype(x.dtype, np.number):
        return
    path = name if path is None else path
    if not np.all(np.isfinite(x)):
        raise ParameterError(path, f"must be finite, got {value!r}")
    if name in POSITIVE_NAMES and not np.all(x > 0):
        raise ParameterError(path, f"must be positive, got {value!r}")
    if name in NON_NEGATIVE_NAMES and not np.all(x >= 0):
        raise ParameterError(path, f"must not be negative, got {value!r}")


def set_parameter(model: Any, path: str, value: ArrayLike) -> Any:
    """A copy of ``model`` with the parameter ``path`` set to ``value`` (broadcast to the
    leaf's shape, or to the indexed element's); differentiable in ``value``. A concrete value
    outside its physical range (:func:`check_physical_value`) raises :class:`ParameterError`."""
    names = [key for kind, key in parse_path(path) if kind == "attr"]
    if names:
        check_physical_value(names[-1], value, path)
    ref = resolve(model, path)
    leaf = jnp.asarray(_checked_leaf(model, path, ref))
    leaf = leaf.astype(jnp.result_type(leaf, float))  # an integer field becomes a float one
    value = jnp.asarray(value, dtype=leaf.dtype)
    if ref.index:
        new = leaf.at[ref.index].set(value)
    else:
        new = jnp.broadcast_to(value, leaf.shape)
    return eqx.tree_at(ref.where, model, new)


def parameter_paths(node: Any, prefix: str = "") -> dict[str, tuple[tuple[int, ...], str]]:
    """Every float leaf of a pytree of modules, lists and dicts by attribute path:
    ``{path: (shape, units)}``, units from the field's ``metadata["units"]`` ("" if none).
    Static fields are structure, not parameters, and are left out."""
    out: dict[str, tuple[tuple[int, ...], str]] = {}

    def visit(x: Any, path: str, units: str) -> None:
        if _is_float(x):
            out[path] = (tuple(np.shape(x)), units)
        elif _is_module(x):
            for f in dataclasses.fields(x):
                if not f.metadata.get("static"):
                    child = f"{path}.{f.name}" if path else f.name
                    visit(getattr(x, f.name, None), child, f.metadata.get("units", ""))
        elif isinstance(x, list | tuple):
            for i, item in enumerate(x):
                visit(item, f"{path}[{i}]", units)
        elif isinstance(x, dict):
            for key, item in x.items():
                visit(item, f"{path}[{key!r}]", units)

    visit(node, prefix, "")
    return out
