"""Static search for equality-based tangent rules on a differentiated path (used by
:mod:`diffmbs.derivatives`).

JAX differentiates ``lax.max``/``lax.min`` (and the reductions ``reduce_max``/``reduce_min``,
``cummax``/``cummin``, ``scatter_max``/``scatter_min``) by giving the tangent to the operand that
tests *bit-equal* to the result. Under ``jit`` XLA may recompute the operands in several fusions
whose copies differ in the last bit (FMA contraction on x86 and ARM CPUs), so neither operand
equals the result in the fusion that evaluates the tangent and the derivative is silently dropped.
``jnp.maximum``, ``jnp.minimum``, ``jnp.clip``, ``jnp.hypot`` (``max(|a|, |b|)·√(1 + (min/max)²)``),
``jnp.max``/``jnp.min`` and ``jnp.linalg.norm(ord=inf)`` lower to these primitives.

:func:`find_tangent_hazards` traces a function to its jaxpr and reports every such primitive that
lies on a differentiated path: one of its operands depends, through differentiable operations,
on an input that is differentiated, and its result reaches an output the same way. Nested jaxprs
(``jit``, ``checkpoint``, ``scan``, ``while``, ``cond``, ``shard_map``) are followed; the body of a
``custom_jvp``/``custom_vjp`` is not (its rule replaces the primitive's), nor anything behind
``stop_gradient``, a comparison or an integer result. The result depends on the program only, not
on the CPU, so it also flags models that happen to give the right numbers on the machine at hand.
"""

from __future__ import annotations

import dataclasses
import linecache
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.extend import core

try:  # private, but the only way to a user frame from an equation (jax 0.10)
    from jax._src import source_info_util
except ImportError:  # pragma: no cover - a future jax: findings without file and line
    source_info_util = None

__all__ = ["HAZARD_PRIMITIVES", "TangentHazard", "find_tangent_hazards"]

HAZARD_PRIMITIVES: frozenset[str] = frozenset(
    {"max", "min", "reduce_max", "reduce_min", "cummax", "cummin", "scatter_max", "scatter_min"}
)
"""Primitives whose JAX derivative selects an operand by a bit-equality test with the result."""

_NO_TANGENT = frozenset(
    {
        "stop_gradient", "eq", "ne", "lt", "le", "gt", "ge", "sign", "floor", "ceil", "round",
        "is_finite", "and", "or", "not", "xor", "argmax", "argmin", "iota", "nextafter",
        "population_count", "clz", "shift_left", "shift_right_logical",
        "shift_right_arithmetic", "random_bits", "random_seed", "random_wrap", "random_unwrap",
        "rng_bit_generator",
    }
)  # fmt: skip
_OPAQUE = frozenset({"custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr"})

# What users write, from the enclosing ``jit`` of a jax.numpy wrapper or the primitive itself,
# and what to write instead.
_OPERATIONS = {
    "hypot": ("jnp.hypot", "diffmbs.selection.hypot(a, b), or jnp.sqrt(a * a + b * b)"),
    "clip": ("jnp.clip", "diffmbs.selection.clip(x, lo, hi), or jnp.where on comparisons"),
    "norm": ("jnp.linalg.norm(ord=inf)", "diffmbs.selection.max(jnp.abs(x))"),
    "max": ("jnp.maximum", "diffmbs.selection.maximum(a, b), or jnp.where(a > b, a, b)"),
    "min": ("jnp.minimum", "diffmbs.selection.minimum(a, b), or jnp.where(a < b, a, b)"),
    "reduce_max": ("jnp.max", "diffmbs.selection.max(x, axis)"),
    "reduce_min": ("jnp.min", "diffmbs.selection.min(x, axis)"),
    "cummax": ("lax.cummax", "a jnp.where on comparisons"),
    "cummin": ("lax.cummin", "a jnp.where on comparisons"),
    "scatter_max": ("x.at[i].max", "a jnp.where on comparisons"),
    "scatter_min": ("x.at[i].min", "a jnp.where on comparisons"),
}
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclasses.dataclass(frozen=True)
class TangentHazard:
    """One equality-based tangent rule on a differentiated path.

    ``function``: what was traced (``"forces"``, ``"element 'cable'"`` …); ``primitive``: the
    JAX primitive (``"max"``); ``operation``: what the source most likely wrote (``"jnp.hypot"``);
    ``file``/``line``/``code``: the innermost user frame of the equation (``line`` 0 and
    ``file`` ``"?"`` when JAX kept no traceback); ``fix``: what to write instead."""

    function: str
    primitive: str
    operation: str
    file: str
    line: int
    code: str
    fix: str

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def in_diffmbs(self) -> bool:
        """Whether the equation comes from diffmbs itself (not from the user's model)."""
        return os.path.abspath(self.file).startswith(_PACKAGE_DIR + os.sep)

    def __str__(self) -> str:
        code = f" `{self.code}`" if self.code else ""
        where = "inside diffmbs (a library bug: please report it)" if self.in_diffmbs else ""
        return (
            f"{self.function}: {self.operation} ({self.primitive}) at {self.location}{code}"
            f"{' ' + where if where else ''}; use {self.fix}"
        )


# --------------------------------------------------------------------------- dataflow


def _inexact(var) -> bool:
    aval = getattr(var, "aval", None)
    dtype = getattr(aval, "dtype", None)
    return dtype is not None and np.issubdtype(dtype, np.inexact)


def _is_var(x) -> bool:
    return isinstance(x, core.Var)


def _open(jaxpr) -> core.Jaxpr:
    return jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr


def _call_body(eqn) -> core.Jaxpr | None:
    """The body of a call-like equation (inputs and outputs map one to one), if it is one."""
    for value in eqn.params.values():
        if isinstance(value, core.Jaxpr | core.ClosedJaxpr):
            body = _open(value)
            if len(body.invars) == len(eqn.invars) and len(body.outvars) == len(eqn.outvars):
                return body
    return None


class _Frame:
    """Where an equation sits: the user frame of the enclosing call and the name of the
    innermost enclosing ``jit`` (``"hypot"`` for the body of ``jnp.hypot``)."""

    def __init__(self, source_info=None, name: str | None = None, parent: _Frame | None = None):
        frame = None
        if source_info is not None and source_info_util is not None:
            frame = source_info_util.user_frame(source_info.traceback)
        self.user = frame if frame is not None else (parent.user if parent else None)
        self.name = name if name is not None else (parent.name if parent else None)


class _Analysis:
    """Forward activity (depends on a differentiated input) and backward need (reaches an
    output) over one jaxpr, with the hazards found where both hold."""

    def __init__(self, function: str):
        self.function = function
        self.found: dict[tuple, TangentHazard] = {}

    # ----------------------------------------------------------------- forward

    def forward(self, jaxpr: core.Jaxpr, active_in: Sequence[bool]) -> list[bool]:
        active = {v: a for v, a in zip(jaxpr.invars, active_in, strict=True)}
        for eqn in jaxpr.eqns:
            ins = [_is_var(x) and active.get(x, False) for x in eqn.invars]
            outs = self._eqn_forward(eqn, ins)
            for var, a in zip(eqn.outvars, outs, strict=True):
                active[var] = a and _inexact(var)
        return [_is_var(x) and active.get(x, False) for x in jaxpr.outvars]

    def _eqn_forward(self, eqn, ins: list[bool]) -> list[bool]:
        name, n_out = eqn.primitive.name, len(eqn.outvars)
        if name in _NO_TANGENT or not any(ins):
            return [False] * n_out
        if name == "scan":
            return self._loop_forward(_open(eqn.params["jaxpr"]), ins, eqn.params["num_consts"],
                                      eqn.params["num_carry"])  # fmt: skip
        if name == "while":
            nc, nb = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
            body = _open(eqn.params["body_jaxpr"])
            return self._loop_forward(body, ins[nc:], nb, len(ins) - nc - nb)
        if name == "cond":
            outs = [self.forward(_open(b), ins[1:]) for b in eqn.params["branches"]]
            return [any(col) for col in zip(*outs, strict=True)]
        body = _call_body(eqn)
        if body is not None and name not in _OPAQUE:
            return self.forward(body, ins)
        return [True] * n_out

    def _loop_forward(self, body, ins, n_consts, n_carry) -> list[bool]:
        carry = list(ins[n_consts : n_consts + n_carry])
        while True:
            outs = self.forward(body, ins[:n_consts] + carry + ins[n_consts + n_carry :])
            new = [a or b for a, b in zip(carry, outs[:n_carry], strict=True)]
            if new == carry:
                return outs
            carry = new

    # ----------------------------------------------------------------- backward

    def backward(self, jaxpr, active_in, needed_out, frame: _Frame) -> list[bool]:
        """Which inputs reach a needed output; records hazards on the way."""
        active = {v: a for v, a in zip(jaxpr.invars, active_in, strict=True)}
        eqn_active = []
        for eqn in jaxpr.eqns:
            ins = [_is_var(x) and active.get(x, False) for x in eqn.invars]
            eqn_active.append(ins)
            for var, a in zip(eqn.outvars, self._eqn_forward(eqn, ins), strict=True):
                active[var] = a and _inexact(var)
        needed: dict[Any, bool] = {}
        for var, n in zip(jaxpr.outvars, needed_out, strict=True):
            if _is_var(var) and n:
                needed[var] = True
        for eqn, ins in zip(reversed(jaxpr.eqns), reversed(eqn_active), strict=True):
            outs = [needed.get(v, False) and _inexact(v) for v in eqn.outvars]
            if not any(outs) or not any(ins) or eqn.primitive.name in _NO_TANGENT:
                continue
            for var, n in zip(eqn.invars, self._eqn_backward(eqn, ins, outs, frame), strict=True):
                if n and _is_var(var) and _inexact(var):
                    needed[var] = True
        return [needed.get(v, False) for v in jaxpr.invars]

    def _eqn_backward(self, eqn, ins, outs, frame: _Frame) -> list[bool]:
        name, p = eqn.primitive.name, eqn.params
        if name in HAZARD_PRIMITIVES:
            self._record(eqn, _Frame(eqn.source_info, None, frame))
            return ins
        inner = _Frame(eqn.source_info, p.get("name") if isinstance(p.get("name"), str) else None,
                       frame)  # fmt: skip
        if name == "scan":
            return self._loop_backward(_open(p["jaxpr"]), ins, outs, p["num_consts"],
                                       p["num_carry"], inner)  # fmt: skip
        if name == "while":
            nc, nb = p["cond_nconsts"], p["body_nconsts"]
            body = _open(p["body_jaxpr"])
            loop = self._loop_backward(body, ins[nc:], outs, nb, len(ins) - nc - nb, inner)
            return [False] * nc + loop
        if name == "cond":
            parts = [self.backward(_open(b), ins[1:], outs, inner) for b in p["branches"]]
            return [False] + [any(col) for col in zip(*parts, strict=True)]
        body = _call_body(eqn)
        if name in _OPAQUE:
            return ins
        if body is not None:
            return self.backward(body, ins, outs, inner)
        for value in p.values():  # an unknown higher-order primitive: search it conservatively
            if isinstance(value, core.Jaxpr | core.ClosedJaxpr):
                body = _open(value)
                self.backward(body, [True] * len(body.invars), [True] * len(body.outvars), inner)
        return ins

    def _loop_backward(self, body, ins, outs, n_consts, n_carry, frame) -> list[bool]:
        carry_in = list(ins[n_consts : n_consts + n_carry])
        while True:  # activity of the carry at the fixed point
            fwd = self.forward(body, ins[:n_consts] + carry_in + ins[n_consts + n_carry :])
            new = [a or b for a, b in zip(carry_in, fwd[:n_carry], strict=True)]
            if new == carry_in:
                break
            carry_in = new
        body_ins = ins[:n_consts] + carry_in + ins[n_consts + n_carry :]
        carry_out = list(outs[:n_carry])
        while True:  # need of the carry at the fixed point
            need = self.backward(body, body_ins, carry_out + list(outs[n_carry:]), frame)
            new = [a or b for a, b in zip(carry_out, need[n_consts : n_consts + n_carry],
                                          strict=True)]  # fmt: skip
            if new == carry_out:
                return need
            carry_out = new

    def _record(self, eqn, frame: _Frame) -> None:
        prim = eqn.primitive.name
        wrapper = frame.name if frame.name in _OPERATIONS and frame.name not in ("max", "min") \
            else None  # fmt: skip
        operation, fix = _OPERATIONS[wrapper or prim]
        user = frame.user
        file, line = (user.file_name, user.start_line) if user is not None else ("?", 0)
        code = linecache.getline(file, line).strip() if user is not None else ""
        key = (prim, file, line)
        self.found.setdefault(key, TangentHazard(self.function, prim, operation, file, line,
                                                 code, fix))  # fmt: skip


def find_tangent_hazards(
    function: str,
    fn: Callable[..., Any],
    args: Sequence[Any],
    differentiated: Sequence[bool],
) -> tuple[TangentHazard, ...]:
    """The hazards of ``fn(*args)``, differentiated with respect to the arguments flagged in
    ``differentiated`` (one flag per positional argument; array arguments). Every inexact output
    is taken as differentiated. ``function`` names ``fn`` in the findings. Sorted by location."""
    closed = jax.make_jaxpr(fn)(*args)
    flags = [
        flag
        for arg, flag in zip(args, differentiated, strict=True)
        for _ in jax.tree_util.tree_leaves(arg)
    ]
    jaxpr = closed.jaxpr
    active_in = [f and _inexact(v) for v, f in zip(jaxpr.invars, flags, strict=True)]
    analysis = _Analysis(function)
    analysis.backward(jaxpr, active_in, [_inexact(v) for v in jaxpr.outvars], _Frame())
    merged: dict[tuple, TangentHazard] = {}  # one finding per operation and line
    for h in sorted(analysis.found.values(), key=lambda h: (h.file, h.line, h.primitive)):
        key = (h.file, h.line, h.operation)
        if key in merged:
            h = dataclasses.replace(h, primitive=f"{merged[key].primitive}, {h.primitive}")
        merged[key] = h
    return tuple(merged.values())
