"""diffmbs._linalg: SPD solves that vmap without batched LAPACK calls on CPU.

References: NumPy's products and solve, central finite differences of NumPy's solve, and the
structure of the traced program (no LAPACK call sees a batched matrix).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffmbs  # noqa: F401
from diffmbs._linalg import UNROLL_MAX, cholesky_factor, matvec, spd_solve, tmatvec

RNG = np.random.default_rng(3)
N = 5


def _spd(b):
    return b @ b.T + N * np.eye(N)


def _loss_np(b, r):
    return float(np.sum(np.sin(np.linalg.solve(_spd(b), r))))


def _loss(b, r):
    a = b @ b.T + N * jnp.eye(N)
    return jnp.sum(jnp.sin(spd_solve(a, r)))


def test_solve_matches_numpy_and_factor_is_cholesky():
    b, r = RNG.normal(size=(N, N)), RNG.normal(size=N)
    a = _spd(b)
    np.testing.assert_allclose(spd_solve(jnp.asarray(a), jnp.asarray(r)), np.linalg.solve(a, r),
                               rtol=1e-12)  # fmt: skip
    np.testing.assert_allclose(cholesky_factor(jnp.asarray(a)), np.linalg.cholesky(a), rtol=1e-12)


def test_not_positive_definite_gives_nan_factor():
    assert np.any(np.isnan(np.asarray(cholesky_factor(-jnp.eye(3)))))


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_gradients_match_finite_differences(mode):
    b, r = RNG.normal(size=(N, N)), RNG.normal(size=N)
    grad = jax.grad if mode == "rev" else jax.jacfwd
    gb, gr = jax.jit(grad(_loss, argnums=(0, 1)))(jnp.asarray(b), jnp.asarray(r))
    h = 1e-6
    fd_b = np.zeros_like(b)
    for i in range(N):
        for j in range(N):
            e = np.zeros_like(b)
            e[i, j] = h
            fd_b[i, j] = (_loss_np(b + e, r) - _loss_np(b - e, r)) / (2 * h)
    fd_r = np.array(
        [(_loss_np(b, r + h * e) - _loss_np(b, r - h * e)) / (2 * h) for e in np.eye(N)]
    )
    np.testing.assert_allclose(gb, fd_b, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gr, fd_r, rtol=1e-6, atol=1e-9)


def test_vmap_and_gradients_under_vmap_equal_a_loop():
    bs, rs = RNG.normal(size=(4, N, N)), RNG.normal(size=(4, N))
    f = jax.jit(jax.vmap(jax.value_and_grad(_loss, argnums=(0, 1))))
    (vals, (gb, gr)) = f(jnp.asarray(bs), jnp.asarray(rs))
    for k in range(4):
        v, (gb_k, gr_k) = jax.value_and_grad(_loss, argnums=(0, 1))(bs[k], rs[k])
        np.testing.assert_allclose(vals[k], v, rtol=1e-13)
        np.testing.assert_allclose(gb[k], gb_k, rtol=1e-11, atol=1e-14)
        np.testing.assert_allclose(gr[k], gr_k, rtol=1e-11, atol=1e-14)


def _lapack_operand_ranks(jaxpr) -> list[int]:
    ranks = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("cholesky", "triangular_solve"):
            ranks.append(eqn.invars[0].aval.ndim)
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple | list) else (value,):
                if isinstance(sub, jax.extend.core.ClosedJaxpr):
                    ranks += _lapack_operand_ranks(sub.jaxpr)
                elif isinstance(sub, jax.extend.core.Jaxpr):
                    ranks += _lapack_operand_ranks(sub)
    return ranks


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the CPU path maps; GPUs batch")
@pytest.mark.parametrize("n", [5, UNROLL_MAX + 3], ids=["written_out", "mapped"])
def test_nested_vmap_of_gradient_has_no_batched_lapack_call(n):
    """The deadlock of jaxlib 0.10 needs batched LAPACK calls: none may be left. Small
    matrices use none at all (written out), larger ones one unbatched call per matrix."""
    rng = np.random.default_rng(n)
    bs = jnp.asarray(rng.normal(size=(2, 3, n, n)))
    rs = jnp.asarray(rng.normal(size=(2, 3, n)))

    def loss(b, r):
        return jnp.sum(jnp.sin(spd_solve(b @ b.T + n * jnp.eye(n), r)))

    f = jax.vmap(jax.vmap(jax.grad(loss, argnums=(0, 1))))
    ranks = _lapack_operand_ranks(jax.make_jaxpr(f)(bs, rs).jaxpr)
    if n <= UNROLL_MAX:
        assert not ranks, ranks
    else:
        assert ranks and all(r == 2 for r in ranks), ranks
    gb, gr = jax.jit(f)(bs, rs)
    b, r = np.asarray(bs[1, 2]), np.asarray(rs[1, 2])
    a = b @ b.T + n * np.eye(n)
    x = np.linalg.solve(a, r)
    # Closed form: d/dr Σ sin(x) = A⁻¹ cos(x) =: w ...
    w = np.linalg.solve(a, np.cos(x))
    np.testing.assert_allclose(gr[1, 2], w, rtol=1e-10, atol=1e-13)
    # ... and dL/dB = −(w xᵀ + x wᵀ) B, from dA = dB Bᵀ + B dBᵀ.
    np.testing.assert_allclose(gb[1, 2], -(np.outer(w, x) + np.outer(x, w)) @ b, rtol=1e-9,
                               atol=1e-12)  # fmt: skip


@pytest.mark.parametrize("n", [1, 9, UNROLL_MAX + 2], ids=["1", "written_out", "mapped"])
def test_batched_columns_match_numpy(n):
    rng = np.random.default_rng(11)
    b = rng.normal(size=(6, n, n))
    a = b @ np.swapaxes(b, 1, 2) + n * np.eye(n)
    rhs = rng.normal(size=(6, n))
    low = jax.vmap(cholesky_factor)(jnp.asarray(a))
    np.testing.assert_allclose(low, np.linalg.cholesky(a), rtol=1e-12, atol=1e-14)
    x = jax.vmap(spd_solve)(jnp.asarray(a), jnp.asarray(rhs))
    np.testing.assert_allclose(x, np.linalg.solve(a, rhs[..., None])[..., 0], rtol=1e-11)
    cols = rng.normal(size=(6, n, 3))  # several right-hand sides per matrix
    xs = jax.vmap(jax.vmap(spd_solve, in_axes=(None, 1), out_axes=1))(jnp.asarray(a), cols)
    np.testing.assert_allclose(xs, np.linalg.solve(a, cols), rtol=1e-11)


def test_written_out_cholesky_reports_an_indefinite_matrix_as_nan():
    a = jnp.asarray([[[1.0, 2.0], [2.0, 1.0]], [[2.0, 0.0], [0.0, 3.0]]])  # indefinite, SPD
    low = np.asarray(jax.vmap(cholesky_factor)(a))
    assert np.isnan(low[0, 1, 1]) and np.all(np.isfinite(low[1]))


def test_elementwise_products_match_numpy_with_broadcasting():
    m = RNG.standard_normal((4, 3, 5))  # a stack of 3 × 5 matrices
    x, y = RNG.standard_normal((2, 1, 5)), RNG.standard_normal((3,))
    expected = np.einsum("kij,pj->pki", m, x[:, 0])  # (2, 4, 3)
    np.testing.assert_allclose(matvec(m, x), expected, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(tmatvec(m, y), np.einsum("kij,i->kj", m, y), rtol=1e-14, atol=1e-14)
