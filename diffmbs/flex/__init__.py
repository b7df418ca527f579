"""Flexible bodies: beam finite elements, modal reduction, modal data files, FFR invariants
and dynamics, stress recovery (see ``docs/guide/flexible_bodies.md``).

Pipeline::

    beam = BeamModel(nodes, elements, ISection(...), Material.steel())
    fe = beam.assemble()                                   # or load_fe_model(...)
    basis = CraigBampton(fe.dofs([0, n]), n_modes=8)(fe)   # FreeFreeModes, FixedInterfaceModes
    data = modal_data(fe, basis, stress_modes=beam_stress_modes(beam, basis, points))
    save_modal_data("channel.npz", data)
    body = FreeModalBody.from_modal_data(load_modal_data("channel.npz"))
"""

from diffmbs.flex._beam import (
    AbstractBeamTheory,
    BeamModel,
    EulerBernoulli,
    Timoshenko,
    beam_line,
)
from diffmbs.flex._fe import COMPONENTS, FEModel, FlexDataError, rigid_body_modes
from diffmbs.flex._ffr import (
    AbstractModalDamping,
    FreeModalBody,
    ModalDampingRatios,
    NodeModes,
    RayleighDamping,
    ffr_gravity_forces,
    ffr_mass_matrix,
    ffr_quadratic_velocity_forces,
    node_acceleration,
    node_angular_velocity,
    node_generalized_force,
    node_position,
    node_rotation,
    node_velocity,
)
from diffmbs.flex._invariants import FFRInvariants, ffr_invariants
from diffmbs.flex._modal_data import (
    FORMAT_NAME,
    FORMAT_VERSION,
    UNITS,
    ModalData,
    basis_from_shapes,
    load_fe_model,
    load_modal_data,
    modal_data,
    save_modal_data,
    validate_fe_model,
    validate_modal_data,
)
from diffmbs.flex._reduction import (
    AbstractReduction,
    CraigBampton,
    FixedInterfaceModes,
    FreeFreeModes,
    ModalBasis,
    ReductionReport,
    generalized_eigh,
    reduction_report,
)
from diffmbs.flex._sections import (
    AbstractSection,
    ChannelSection,
    GeneralSection,
    ISection,
    Material,
    RectangularSection,
    SectionProperties,
)
from diffmbs.flex._stress import (
    BeamStressPoint,
    beam_stress_matrix,
    beam_stress_modes,
    section_stress_points,
    stress_history,
)

__all__ = [
    "COMPONENTS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "UNITS",
    "AbstractBeamTheory",
    "AbstractModalDamping",
    "AbstractReduction",
    "AbstractSection",
    "BeamModel",
    "BeamStressPoint",
    "ChannelSection",
    "CraigBampton",
    "EulerBernoulli",
    "FEModel",
    "FFRInvariants",
    "FixedInterfaceModes",
    "FlexDataError",
    "FreeFreeModes",
    "FreeModalBody",
    "GeneralSection",
    "ISection",
    "Material",
    "ModalBasis",
    "ModalData",
    "ModalDampingRatios",
    "NodeModes",
    "RayleighDamping",
    "RectangularSection",
    "ReductionReport",
    "SectionProperties",
    "Timoshenko",
    "basis_from_shapes",
    "beam_line",
    "beam_stress_matrix",
    "beam_stress_modes",
    "ffr_gravity_forces",
    "ffr_invariants",
    "ffr_mass_matrix",
    "ffr_quadratic_velocity_forces",
    "generalized_eigh",
    "load_fe_model",
    "load_modal_data",
    "modal_data",
    "node_acceleration",
    "node_angular_velocity",
    "node_generalized_force",
    "node_position",
    "node_rotation",
    "node_velocity",
    "reduction_report",
    "rigid_body_modes",
    "save_modal_data",
    "section_stress_points",
    "stress_history",
    "validate_fe_model",
    "validate_modal_data",
]
