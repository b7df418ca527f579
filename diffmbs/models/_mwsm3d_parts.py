"""Machine data, geometry and flexible parts of the 3-D Medium Weight Shock Machine model.

Every number the 3-D model uses by default is here, in SI, with where it comes from. Three
kinds of source:

* **machine data** (SEEDS.md section 002, the Navantia/UDC study; MIL-DTL-901E): masses of the
  bed (90,000 lb), hammer (3,000 lb at the striking end) and anvil table (4,500 lb); anvil travel
  3 in (1.5 in reduced); drop heights; the T-clamp distances 480 mm and 630 mm; the equipment of
  the two tests (a 325 kg rigid block; the block plus an HEB 100 beam, 375 kg, cantilevered at
  both ends with different free lengths); 1.394 s of fall and 0.5 s after impact;
* **catalogue sections** (public steel tables): the supporting channels are a "carbuilding"
  channel, the American MC 6 × 12 (152.4 × 63.4 mm, web 7.87 mm, flange 9.53 mm), and a standard
  channel, the American C 6 × 8.2 (152.4 × 48.8 mm, web 5.08 mm, flange 8.71 mm); the HEB 100
  (100 × 100 × 6 × 10 mm, r 12 mm) of test 2; steel E = 210 GPa, ρ = 7850 kg/m³;
* **engineering assumptions**, where no public drawing gives a value (the machine's drawings are
  not public; a search of public sources found none). Each is chosen so the model does what the
  machine does and is a keyword of :func:`~diffmbs.models.mwsm3d.mwsm3d`:

  - hammer arm 6 ft (1.829 m): with it, the fall from 2 ft takes 1.391 s (the study's 1.394 s is
    matched by an arm of 1.835 m; the pendulum's period fixes the arm, not a drawing);
  - the head a 0.3 m steel-like cube (its inertia about its centre, 20.4 kg·m², is 0.4 % of the
    pendulum's), its striking face a sphere of 0.15 m, the anvil's striking pad a sphere of 1 m
    (Hertzian geometry; the stiffness itself is a parameter, 5e10 N/m^1.5 as in the lumped model);
  - anvil table 1.5 m × 1.2 m in plan, its thickness from its mass (steel, 0.144 m); four stop
    points at (±0.65, ±0.5) m, each with a quarter of the lumped model's stop stiffness (the
    same static penetration under the same load);
  - bed 3.0 × 2.4 × 1.5 m (its inertia from that box); bed springs 3 Hz vertically (the lumped
    model's assumption), the same stiffness laterally, rocking stiffness from four corner
    springs at (±1.2, ±0.9) m;
  - anvil bolts: 1e8 N/m laterally and 1e7 N·m/rad in yaw (free vertically and in rocking,
    which the stops limit);
  - a compliant anvil (off by default; ``anvil_hz`` > 0, the truth of the bundled fit records):
    the struck lower plate 40 % of the table's mass, the plates joined vertically and in
    rocking at ``anvil_hz`` with 2 % damping, 1e9 N/m laterally and 1e8 N·m/rad in yaw (rigid
    on the blow's time scale);
  - supporting channels 1.2 m between the bolts that hold them to the anvil table (their ends
    clamped), the two pairs 630 mm apart (distance B), the T-clamps 480 mm apart along each
    channel (distance A), each channel of a pair 0.1 m from its partner; T-clamps 1e8 N/m in
    each direction; modal damping 2 % of critical;
  - equipment block 0.6 × 0.8 m in plan, 86 mm thick (325 kg of steel); in test 2 an HEB 100
    2.45 m long (50 kg, so 375 kg in all) on two supports 1.0 m apart, 0.1 m high, its free ends
    0.6 m and 0.85 m long (cantilever frequencies 334 Hz and 167 Hz).
"""

from __future__ import annotations

import math

import numpy as np

from diffmbs.flex import (
    AbstractBeamTheory,
    BeamModel,
    ChannelSection,
    FixedInterfaceModes,
    ISection,
    Material,
    ModalData,
    beam_stress_modes,
    modal_data,
    section_stress_points,
)
from diffmbs.models.mwsm import FT, INCH, LB

__all__ = ["Geometry", "beam_nodes", "cantilever_frequency_hz", "channel_modal_data",
           "equipment_beam_modal_data", "section", "steel"]  # fmt: skip

STEEL_DENSITY = 7850.0  # kg/m³, as Material.steel()


def steel() -> Material:
    """Structural steel (:meth:`Material.steel`). A function, not a module constant: JAX arrays
    made at import would start JAX's backend before ``diffmbs.configure()``."""
    return Material.steel()


def section(name: str):
    """Catalogue sections (m): ``"MC6x12"`` (American MC 6 × 12, the "carbuilding" channel),
    ``"C6x8.2"`` (American C 6 × 8.2, the standard channel), ``"HEB100"`` (test 2's beam)."""
    if name == "MC6x12":
        return ChannelSection(6.0 * INCH, 2.497 * INCH, 0.310 * INCH, 0.375 * INCH)
    if name == "C6x8.2":
        return ChannelSection(6.0 * INCH, 1.920 * INCH, 0.200 * INCH, 0.343 * INCH)
    if name == "HEB100":
        return ISection(0.100, 0.100, 0.006, 0.010, 0.012)
    raise ValueError(f"section: {name!r} is not one of 'MC6x12', 'C6x8.2', 'HEB100'")


class Geometry:
    """The machine's dimensions (m) and masses (kg); see the module docstring for sources."""

    hammer_mass = 3000.0 * LB
    anvil_mass = 4500.0 * LB
    bed_mass = 90000.0 * LB
    hammer_arm = 6.0 * FT
    head_size = 0.3
    face_radius = 0.15
    pad_radius = 1.0
    anvil_plan = (1.5, 1.2)
    stop_points = (0.65, 0.5)
    bed_box = (3.0, 2.4, 1.5)
    bed_spring_points = (1.2, 0.9)
    anvil_underside = 1.0  # height of the anvil's underside above the bed's centre of mass
    channel_span = 1.2
    pair_spacing = 0.63  # distance B
    clamp_spacing = 0.48  # distance A
    partner_offset = 0.05  # each channel of a pair, from the pair's centre line
    block_plan = (0.6, 0.8)
    block_mass = 325.0
    beam_length = 2.45
    beam_free_lengths = (0.6, 0.85)
    beam_support_height = 0.1

    @classmethod
    def anvil_thickness(cls) -> float:
        return cls.anvil_mass / (STEEL_DENSITY * cls.anvil_plan[0] * cls.anvil_plan[1])

    @classmethod
    def block_thickness(cls) -> float:
        return cls.block_mass / (STEEL_DENSITY * cls.block_plan[0] * cls.block_plan[1])



def beam_nodes(length_points: list[float], step: float) -> np.ndarray:
    """Sorted node abscissae (m): a grid of about ``step`` between the first and last of
    ``length_points`` that contains every one of them."""
    ends = sorted(set(float(x) for x in length_points))
    xs: list[float] = []
    for a, b in zip(ends[:-1], ends[1:], strict=True):
        n = max(1, math.ceil((b - a) / step - 1e-9))
        xs.extend(np.linspace(a, b, n + 1)[:-1].tolist())
    xs.append(ends[-1])
    return np.asarray(xs)


def _line_model(xs: np.ndarray, cross_section, theory) -> BeamModel:
    nodes = np.stack([xs, np.zeros_like(xs), np.zeros_like(xs)], axis=1)
    elements = np.stack([np.arange(len(xs) - 1), np.arange(1, len(xs))], axis=1)
    return BeamModel(nodes, elements, cross_section, steel(), theory=theory)


def _row(xs: np.ndarray, x: float) -> int:
    return int(np.argmin(np.abs(xs - x)))


def channel_modal_data(
    section_name: str, span: float, clamp_spacing: float, n_modes: int, step: float = 0.06,
    theory: AbstractBeamTheory | None = None,
) -> tuple[ModalData, dict[str, int]]:
    """A supporting channel along x, centred on its frame origin, clamped at its two bolts
    (x = ±span/2): fixed-interface modes with every DOF of the bolt nodes held, so the frame
    rides with the anvil table and the modes are the channel's own. Stress points (labels
    ``"<station>#<k>"``): the section's outline at the bolt ``bolt_0``, the T-clamp
    ``clamp_0`` and the middle (by symmetry the other bolt and clamp see the same static
    stresses). Returns the modal data and the node labels ``{"bolt_0", "bolt_1", "clamp_0",
    "clamp_1", "middle"}``. Web vertical (strong-axis bending in the vertical plane);
    Timoshenko beams unless ``theory``."""
    xs = beam_nodes([-span / 2, -clamp_spacing / 2, 0.0, clamp_spacing / 2, span / 2], step)
    beam = _line_model(xs, section(section_name), theory)
    fe = beam.assemble()
    rows = {"bolt_0": _row(xs, -span / 2), "bolt_1": _row(xs, span / 2),
            "clamp_0": _row(xs, -clamp_spacing / 2), "clamp_1": _row(xs, clamp_spacing / 2),
            "middle": _row(xs, 0.0)}  # fmt: skip
    basis = FixedInterfaceModes(fe.dofs([rows["bolt_0"], rows["bolt_1"]]), n_modes=n_modes)(fe)
    points = [p for name in ("bolt_0", "clamp_0", "middle")
              for p in section_stress_points(beam, rows[name], 0.0, name)]  # fmt: skip
    data = modal_data(fe, basis, stress_modes=beam_stress_modes(beam, basis, points),
                      stress_labels=tuple(p.label for p in points),
                      source=f"diffmbs.models.mwsm3d channel {section_name}")  # fmt: skip
    labels = {k: int(np.asarray(fe.node_ids)[r]) for k, r in rows.items()}
    return data, labels


def equipment_beam_modal_data(
    length: float, free_lengths: tuple[float, float], n_modes: int, step: float = 0.05,
    theory: AbstractBeamTheory | None = None,
) -> tuple[ModalData, dict[str, int]]:
    """The HEB 100 of test 2 along x, its frame origin midway between its two welded supports:
    fixed-interface modes with the support nodes held (the two cantilevers and the span between
    the supports). Node labels ``{"support_0", "support_1", "tip_0", "tip_1"}``."""
    span = length - free_lengths[0] - free_lengths[1]
    if not span > 0:
        raise ValueError(f"beam_free_lengths: {free_lengths} leave no span on a {length} m beam")
    a, b = -span / 2, span / 2
    xs = beam_nodes([a - free_lengths[0], a, b, b + free_lengths[1]], step)
    fe = _line_model(xs, section("HEB100"), theory).assemble()
    rows = {"support_0": _row(xs, a), "support_1": _row(xs, b), "tip_0": 0, "tip_1": len(xs) - 1}
    basis = FixedInterfaceModes(fe.dofs([rows["support_0"], rows["support_1"]]),
                                n_modes=n_modes)(fe)  # fmt: skip
    data = modal_data(fe, basis, source="diffmbs.models.mwsm3d equipment beam HEB 100")
    labels = {k: int(np.asarray(fe.node_ids)[r]) for k, r in rows.items()}
    return data, labels


def cantilever_frequency_hz(section_name: str, free_length: float) -> float:
    """First bending frequency (Hz) of a clamped–free Euler–Bernoulli beam of ``section_name``
    bending about its strong axis: ``(1.8751²/2π) √(EI/(ρA L⁴))``."""
    props = section(section_name).properties()
    ei = float(steel().E) * float(props.iy)
    mass = STEEL_DENSITY * float(props.area)
    return 1.8751040687**2 / (2 * math.pi) * math.sqrt(ei / (mass * free_length**4))
