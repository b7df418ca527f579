"""Import of FE matrices and the modal-data file: round trips and rejection of bad data.

References: the matrices as written here (scipy.io.mmwrite, scipy.sparse.save_npz, np.save)
in a mm–t–s unit system with permuted DOFs and node labels, whose eigenvalues must equal
those of the original SI model (scipy.linalg.eigh); the arrays of the original ModalData.
"""

import functools
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.io
import scipy.linalg
import scipy.sparse

import diffmbs  # noqa: F401
from diffmbs.flex import (
    FORMAT_VERSION,
    BeamModel,
    FEModel,
    FlexDataError,
    FreeFreeModes,
    ISection,
    Material,
    basis_from_shapes,
    beam_stress_modes,
    load_fe_model,
    load_modal_data,
    modal_data,
    reduction_report,
    save_modal_data,
    section_stress_points,
    validate_fe_model,
    validate_modal_data,
)

HEB100 = ISection(0.100, 0.100, 0.006, 0.010, 0.012)
NODES = np.array([[0, 0, 0], [0.3, 0, 0], [0.6, 0, 0], [0.6, 0.2, 0], [0.6, 0.4, 0.1]], float)
BEAM = BeamModel(NODES, [(0, 1), (1, 2), (2, 3), (3, 4)], HEB100, Material.steel())


@functools.cache  # built on first use, not at collection (every test worker imports this file)
def frame():
    return BEAM.assemble()


@functools.cache
def frame_modes():
    return FreeFreeModes(n_modes=4)(frame())


def write_foreign_model(tmp_path, stiffness_format):
    """The FE model in mm–t–s units, DOFs permuted, nodes labelled 101…; returns file paths,
    the permutation and the labels."""
    length, mass = 1e-3, 1e3
    rng = np.random.default_rng(7)
    perm = rng.permutation(frame().n_dof)
    comp = np.asarray(frame().dof_components)
    d = np.where(comp < 3, length, 1.0)  # u_SI = d · u_file
    m_file = (d[:, None] * np.asarray(frame().mass) * d[None, :]) / (mass * length**2)
    k_file = (d[:, None] * np.asarray(frame().stiffness) * d[None, :]) / (mass * length**2)
    m_file, k_file = m_file[np.ix_(perm, perm)], k_file[np.ix_(perm, perm)]
    labels = 101 + np.arange(frame().n_nodes)
    paths = {"mass": tmp_path / "m.mtx", "nodes": tmp_path / "nodes.csv"}
    scipy.io.mmwrite(paths["mass"], scipy.sparse.coo_matrix(m_file), symmetry="symmetric")
    if stiffness_format == "sparse":
        paths["stiffness"] = tmp_path / "k.npz"
        scipy.sparse.save_npz(paths["stiffness"], scipy.sparse.csr_matrix(k_file))
    else:
        paths["stiffness"] = tmp_path / "k.npy"
        np.save(paths["stiffness"], k_file)
    np.savetxt(paths["nodes"], np.column_stack([labels, NODES / length]), delimiter=",")
    dof_map = np.column_stack([labels[np.asarray(frame().dof_nodes)], comp + 1])[perm]
    paths["dof_map"] = tmp_path / "dofs.txt"
    np.savetxt(paths["dof_map"], dof_map, fmt="%d")
    return paths, perm, labels


@pytest.mark.parametrize("stiffness_format", ["sparse", "dense"])
def test_imported_matrices_give_the_same_modes(tmp_path, stiffness_format):
    paths, perm, labels = write_foreign_model(tmp_path, stiffness_format)
    fe = load_fe_model(
        paths["mass"], paths["stiffness"], paths["nodes"], paths["dof_map"],
        length_unit=1e-3, mass_unit=1e3,
    )  # fmt: skip
    assert fe.node_ids == tuple(int(x) for x in labels)
    np.testing.assert_allclose(np.asarray(fe.mass), np.asarray(frame().mass)[np.ix_(perm, perm)],
                               rtol=1e-12, atol=1e-14)  # fmt: skip
    np.testing.assert_allclose(np.asarray(fe.nodes), NODES, rtol=1e-15)
    original = frame()
    ref = scipy.linalg.eigh(np.asarray(original.stiffness), np.asarray(original.mass),
                            eigvals_only=True)  # fmt: skip
    basis = FreeFreeModes(n_modes=4)(fe)
    np.testing.assert_allclose(np.diag(np.asarray(basis.stiffness)), ref[6:10], rtol=1e-9)
    # The node translations agree with those of the original model up to each mode's sign.
    t_new, _ = fe.node_vectors(basis.shapes)
    t_old, _ = frame().node_vectors(frame_modes().shapes)
    t_new, t_old = np.asarray(t_new), np.asarray(t_old)
    signs = np.sign(np.einsum("nak,nak->k", t_new, t_old))
    np.testing.assert_allclose(t_new * signs, t_old, atol=1e-9 * np.abs(t_old).max())


def test_modal_data_file_round_trip(tmp_path):
    points = section_stress_points(BEAM, element=0, xi=0.0)
    data = modal_data(
        frame(),
        frame_modes(),
        stress_modes=beam_stress_modes(BEAM, frame_modes(), points),
        stress_labels=tuple(p.label for p in points),
        report=reduction_report(frame(), frame_modes()).to_json(),
    )
    path = save_modal_data(tmp_path / "beam.npz", data)
    back = load_modal_data(path)
    leaves = lambda d: jax.tree.leaves(eqx.filter(d, eqx.is_array))
    assert len(leaves(data)) == 15
    for a, b in zip(leaves(data), leaves(back), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert back.kinds == data.kinds and back.node_ids == data.node_ids
    assert back.stress_labels == data.stress_labels and back.orthonormal
    assert json.loads(back.report)["frequencies_hz"] == pytest.approx(
        list(np.asarray(frame_modes().frequencies_hz()))
    )
    with np.load(path) as f:
        assert int(f["format_version"]) == FORMAT_VERSION
        np.testing.assert_allclose(f["frequencies_hz"], np.asarray(frame_modes().frequencies_hz()))


def rewrite(path, **changes):
    with np.load(path) as f:
        raw = {k: f[k] for k in f.files}
    for key, value in changes.items():
        if value is None:
            raw.pop(key)
        else:
            raw[key] = value
    np.savez(path, **raw)


def test_bad_modal_data_files_are_rejected(tmp_path):
    path = save_modal_data(tmp_path / "beam.npz", modal_data(frame(), frame_modes()))
    with pytest.raises(FlexDataError, match="file not found"):
        load_modal_data(tmp_path / "none.npz")
    cases = [
        ({"format_version": np.array(FORMAT_VERSION + 1)}, "format_version: file is version"),
        ({"format": np.array("other")}, "format: expected"),
        ({"units": np.array(json.dumps({"length": "mm"}))}, "units: expected"),
        ({"inertia": None}, "inertia: missing"),
        ({"psi_integral": np.zeros((3, 5))}, r"psi_integral: expected shape \(3, 4\)"),
        ({"modal_stiffness": np.diag([1.0, 2.0, -3.0, 4.0])}, "modal_stiffness: not positive"),
        ({"modal_mass": 2 * np.eye(4)}, "claimed mass-orthonormal"),
        ({"translations": np.full((5, 3, 4), np.nan)}, "translations: non-finite"),
    ]
    for changes, message in cases:
        bad = tmp_path / "bad.npz"
        bad.write_bytes(path.read_bytes())
        rewrite(bad, **changes)
        with pytest.raises(FlexDataError, match=message) as err:
            load_modal_data(bad)
        assert str(bad) in str(err.value)


def test_bad_fe_matrices_are_rejected():
    m, k = np.asarray(frame().mass), np.asarray(frame().stiffness)
    dofs = np.column_stack([np.asarray(frame().dof_nodes), np.asarray(frame().dof_components) + 1])
    ok = dict(nodes=NODES, dof_map=dofs)
    asym = m.copy()
    asym[0, 7] += 1e-3 * np.abs(m).max()
    with pytest.raises(FlexDataError, match="mass matrix: not symmetric"):
        load_fe_model(asym, k, **ok)
    indefinite = k.copy()
    indefinite[0, 0] = -indefinite[0, 0]
    with pytest.raises(FlexDataError, match="stiffness matrix: not positive semi-definite"):
        load_fe_model(m, indefinite, **ok)
    singular = m.copy()
    singular[3, :] = singular[:, 3] = 0.0
    with pytest.raises(FlexDataError, match="mass matrix: not positive definite.*massless"):
        load_fe_model(singular, k, **ok)
    with pytest.raises(FlexDataError, match=r"stiffness matrix: expected shape \(30, 30\)"):
        load_fe_model(m, k[:-1, :-1], **ok)
    with pytest.raises(FlexDataError, match="dof map: node label 9"):
        load_fe_model(m, k, NODES, np.vstack([dofs[:-1], [9, 1]]))
    with pytest.raises(FlexDataError, match="dof map: dof numbers must be 1–6"):
        load_fe_model(m, k, NODES, np.vstack([dofs[:-1], [4, 7]]))
    shifted = (0,) + frame().dof_components[:-1]
    model = frame()
    duplicate = FEModel(model.mass, model.stiffness, model.nodes, model.dof_nodes, shifted,
                        model.node_ids)  # fmt: skip
    with pytest.raises(FlexDataError, match="dof map: node 0 component ux appears twice"):
        validate_fe_model(duplicate)
    with pytest.raises(FlexDataError, match="mass matrix: file not found"):
        load_fe_model("missing.mtx", k, **ok)
    assert isinstance(load_fe_model(m, k, **ok), FEModel)


def test_mode_claims_and_shapes_are_checked():
    shapes = np.asarray(frame_modes().shapes)
    with pytest.raises(FlexDataError, match="shapes: claimed mass-orthonormal"):
        basis_from_shapes(frame(), 2 * shapes, orthonormal=True)
    scaled = basis_from_shapes(frame(), 2 * shapes, orthonormal=False)
    np.testing.assert_allclose(np.asarray(scaled.mass), 4 * np.eye(4), atol=1e-10)
    with pytest.raises(FlexDataError, match="shapes: expected"):
        basis_from_shapes(frame(), shapes[:-1], orthonormal=False)
    data = modal_data(frame(), frame_modes())
    with pytest.raises(FlexDataError, match=r"rotations: expected shape \(5, 3, 4\)"):
        validate_modal_data(eqx.tree_at(lambda d: d.rotations, data, jnp.zeros((5, 3, 3))))
    wrong = eqx.tree_at(lambda d: d.invariants.inertia, data, -data.invariants.inertia)
    with pytest.raises(FlexDataError, match="inertia: not positive definite"):
        validate_modal_data(wrong)
