"""What a user sets for the phonon and κ workflows: frozen dataclasses with the defaults, checked once.

:class:`PhononSettings` (for :func:`~mlip.workflows.phonons.harmonic.run_phonons`) and
:class:`KappaSettings` (for :func:`~mlip.workflows.phonons.kappa.run_kappa`) share the
finite-displacement and relaxation settings of :class:`ForceConstantSettings`. Every value is checked
when the object is made (ValueError naming the setting), so that a bad one never costs a relaxation
or a force call, and the values are kept in one form (meshes, temperatures and supercells as tuples,
the κ method in lower case), so that two settings that mean the same compare equal.

>>> from mlip.workflows.phonons import KappaSettings
>>> KappaSettings(mesh=19, method="RTA").mesh, KappaSettings(mesh=19, method="RTA").method
((19, 19, 19), 'rta')
>>> KappaSettings(displacement=0.7)
Traceback (most recent call last):
...
ValueError: displacement must be a positive distance up to 0.5 Å, got 0.7

``mlip phonons`` and ``mlip kappa`` build them through :mod:`mlip.cli.force_constants`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

import numpy as np

from mlip.workflows.phonons.supercells import parse_supercell

#: a supercell as given: ``n``, ``(n1, n2, n3)`` or a 3×3 integer matrix (nested tuples once checked)
Supercell = Union[int, Sequence[int], Sequence[Sequence[int]]]

#: phonopy's default displacement distance (Å), the harmonic phonons' default
DEFAULT_DISPLACEMENT = 0.01

#: the displacement distance (Å) of Matbench Discovery's κ protocol (almost all top models)
KAPPA_DISPLACEMENT = 0.03

#: default lower bound on the perpendicular widths of the automatic phonon supercell (Å)
DEFAULT_MIN_WIDTH = 12.0

#: default phonon q-mesh: phonopy's length-based density (Å): about ``100 · |b_i|`` points along each
#: reciprocal lattice vector b_i (without 2π) of the primitive cell, e.g. 48³ for fcc Cu
DEFAULT_MESH = 100.0

#: default κ q-mesh when neither ``mesh`` nor ``atoms.info["q_point_mesh"]`` is given (the protocol's)
KAPPA_MESH = (20, 20, 20)

#: phonon modes below −tolerance (THz) count as imaginary; smaller negative values are numerical
#: noise of the acoustic branches near Γ
DEFAULT_IMAGINARY_TOL = 0.05

#: κ methods: Wigner (RTA, particle + coherence), Peierls–Boltzmann RTA, direct LBTE
METHODS = ("wigner", "rta", "lbte")


@dataclass(frozen=True, kw_only=True)
class ForceConstantSettings:
    """Settings both finite-displacement workflows share: the displacements and the relaxation first.

    Attributes:
        displacement: finite-displacement distance (Å), in (0, 0.5].
        relax: relax positions and cell first, keeping the space group (FIRE + FrechetCellFilter +
            ``FixSymmetry``). Phonons of an unrelaxed structure have spurious soft/imaginary modes.
        fmax: relaxation threshold (eV/Å; the cell filter's scaled stress included), > 0.
        relax_steps: maximum relaxation steps, ≥ 0.
        symprec: symmetry tolerance of phonopy/phono3py (displacements, force-constant
            symmetrisation, primitive cell) and of the space-group report (Å), > 0.
        fix_symmetry_symprec: tolerance of the symmetry ``FixSymmetry`` imposes while relaxing (Å).
        subtract_residual_forces: subtract the forces on the undisplaced supercell from the
            displaced ones' (phonopy's ``--fz``; one more evaluation). They vanish for an exactly
            invariant model in a symmetric crystal, so this changes nothing there; for a model
            invariant only approximately it removes an error of F₀/``displacement`` from the force
            constants.
    """

    displacement: float
    relax: bool = True
    fmax: float = 1e-4
    relax_steps: int = 300
    symprec: float = 1e-5
    fix_symmetry_symprec: float = 0.01
    subtract_residual_forces: bool = True

    def __post_init__(self) -> None:
        displacement = self.displacement
        if not (isinstance(displacement, (int, float, np.number)) and math.isfinite(displacement)
                and 0 < displacement <= 0.5):
            raise ValueError(f"displacement must be a positive distance up to 0.5 Å, got {displacement!r}")
        if not (self.symprec > 0 and self.fix_symmetry_symprec > 0):
            raise ValueError(f"symprec and fix_symmetry_symprec must be positive, got {self.symprec}, "
                             f"{self.fix_symmetry_symprec}")
        if self.relax and not self.fmax > 0:
            raise ValueError(f"fmax must be positive (eV/Å), got {self.fmax}")
        if self.relax and self.relax_steps < 0:
            raise ValueError(f"relax_steps must be >= 0, got {self.relax_steps}")

    def _set(self, name: str, value: Any) -> None:
        """Store the checked form of a field (the dataclass is frozen)."""
        object.__setattr__(self, name, value)


@dataclass(frozen=True, kw_only=True)
class PhononSettings(ForceConstantSettings):
    """Settings of :func:`~mlip.workflows.phonons.harmonic.run_phonons` (and those of
    :class:`ForceConstantSettings`; ``displacement`` defaults to phonopy's 0.01 Å).

    Attributes:
        supercell: ``n``, ``(n1, n2, n3)`` or an integer 3×3 matrix applied to the (relaxed) cell.
            Default (None): the smallest diagonal supercell whose perpendicular widths are all
            ≥ ``min_width`` and ≥ twice the model's cutoff (when the model has one). A supercell
            narrower than twice the cutoff of an mlip model is refused.
        min_width: lower bound (Å) on the perpendicular widths of the default supercell.
        no_shear: relax the cell without shear (strain mask [1, 1, 1, 0, 0, 0]).
        mesh: q-mesh for the DOS, thermal properties and imaginary-mode check: a length (float, Å;
            phonopy's density, ≈ length·|b_i| points along reciprocal vector b_i), ``n`` or
            ``(n1, n2, n3)``. Γ-centred. Kept as a float or three integers.
        temperatures: ``(t_min, t_max, t_step)`` (K) of the thermal properties, t_max included.
        band_npoints: q-points per straight segment of the band path (ends included), ≥ 2.
        imaginary_tol: frequencies below ``-imaginary_tol`` (THz) count as imaginary; smaller
            negative values near Γ are numerical noise of the acoustic branches.
    """

    displacement: float = DEFAULT_DISPLACEMENT
    supercell: Optional[Supercell] = None
    min_width: float = DEFAULT_MIN_WIDTH
    no_shear: bool = False
    mesh: Union[float, int, Sequence[int]] = DEFAULT_MESH
    temperatures: Sequence[float] = (0.0, 1000.0, 10.0)
    band_npoints: int = 51
    imaginary_tol: float = DEFAULT_IMAGINARY_TOL

    def __post_init__(self) -> None:
        super().__post_init__()
        self._set("mesh", _phonon_mesh(self.mesh))
        self._set("temperatures", _temperature_range(self.temperatures))
        band_npoints = self.band_npoints
        if isinstance(band_npoints, bool) or not isinstance(band_npoints, (int, np.integer)) or band_npoints < 2:
            raise ValueError(f"band_npoints must be an integer >= 2, got {band_npoints!r}")
        self._set("band_npoints", int(band_npoints))
        min_width = self.min_width
        if not (isinstance(min_width, (int, float, np.number)) and math.isfinite(min_width) and min_width > 0):
            raise ValueError(f"min_width must be a positive length in Å, got {min_width!r}")
        if not (self.imaginary_tol >= 0 and math.isfinite(self.imaginary_tol)):
            raise ValueError(f"imaginary_tol must be >= 0 (THz), got {self.imaginary_tol}")
        self._set("supercell", _checked_supercell(self.supercell, "supercell"))

    def supercell_matrix(self) -> Optional[np.ndarray]:
        """The given supercell as a 3×3 integer matrix, or None for the default one."""
        return None if self.supercell is None else parse_supercell(self.supercell, "supercell")


@dataclass(frozen=True, kw_only=True)
class KappaSettings(ForceConstantSettings):
    """Settings of :func:`~mlip.workflows.phonons.kappa.run_kappa`, by default Matbench Discovery's κ
    protocol (and those of :class:`ForceConstantSettings`; ``displacement`` defaults to 0.03 Å).

    Attributes:
        fc2_supercell: the supercell of the second-order force constants: ``n``, ``(n1, n2, n3)`` or
            an integer 3×3 matrix applied to the cell of the structure. Default: its ``atoms.info``,
            else the fc3 supercell. Too small ones are refused
            (:func:`~mlip.workflows.phonons.kappa.check_supercell`) before anything is computed.
        fc3_supercell: the same for the third-order force constants. Default: ``atoms.info``, else
            the supercell of :func:`~mlip.workflows.phonons.supercells.suggest_supercell` at the
            minimum width.
        mesh: q-mesh ``n`` or ``(n1, n2, n3)`` of the primitive cell's reciprocal lattice (kept as
            three integers). Default: ``atoms.info["q_point_mesh"]``, else 20³.
        temperatures: one or more temperatures (K), kept as a tuple.
        method: ``"wigner"`` (Wigner transport, RTA: populations + coherences), ``"rta"``
            (Peierls–Boltzmann RTA) or ``"lbte"`` (direct solution of the linearised BTE); any case.
        isotopes: isotope scattering with natural abundances.
        boundary_mfp: boundary-scattering mean free path (µm); None: no boundary scattering.
        stop_on_broken_symmetry: stop before fc3 when the relaxation changed the space group.
        check_supercells: refuse too-small supercells (see
            :func:`~mlip.workflows.phonons.kappa.check_supercell`).

    The relaxation is always without shear (strain mask [1, 1, 1, 0, 0, 0]), as the protocol's.
    """

    displacement: float = KAPPA_DISPLACEMENT
    fc2_supercell: Optional[Supercell] = None
    fc3_supercell: Optional[Supercell] = None
    mesh: Union[None, int, Sequence[int]] = None
    temperatures: Union[float, Sequence[float]] = (300.0,)
    method: str = "wigner"
    isotopes: bool = True
    boundary_mfp: Optional[float] = 1e6
    stop_on_broken_symmetry: bool = True
    check_supercells: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        method = str(self.method).lower()
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        self._set("method", method)
        self._set("temperatures", tuple(_temperature_list(self.temperatures)))
        boundary_mfp = self.boundary_mfp
        if boundary_mfp is not None and not (boundary_mfp > 0 and math.isfinite(boundary_mfp)):
            raise ValueError(f"boundary_mfp must be a positive length in µm or None, got {boundary_mfp!r}")
        if self.mesh is not None:
            self._set("mesh", tuple(kappa_mesh(self.mesh)))
        self._set("fc3_supercell", _checked_supercell(self.fc3_supercell, "fc3_supercell"))
        self._set("fc2_supercell", _checked_supercell(self.fc2_supercell, "fc2_supercell"))

    def q_mesh(self, info: Optional[Mapping[str, Any]]) -> List[int]:
        """The q-mesh [3]: ``mesh``, else the structure's ``info["q_point_mesh"]``, else 20³."""
        if self.mesh is not None:
            return list(self.mesh)
        return kappa_mesh((info or {}).get("q_point_mesh", KAPPA_MESH))


SettingsT = TypeVar("SettingsT", bound=ForceConstantSettings)


def with_overrides(cls: type[SettingsT], settings: Optional[SettingsT], overrides: Mapping[str, Any],
                   function: str) -> SettingsT:
    """``settings`` (default: ``cls()``) with the keyword arguments ``overrides`` that a caller of
    ``function`` gave instead of (or on top of) a settings object; TypeError for a ``settings`` of
    another class or a keyword that is no setting, ValueError for a bad value."""
    if settings is not None and not isinstance(settings, cls):
        raise TypeError(f"{function}: settings must be a {cls.__name__}, got {type(settings).__name__} "
                        f"(pass the other settings by keyword or in {cls.__name__}(...))")
    names = {f.name for f in fields(cls)}
    unknown = [key for key in overrides if key not in names]
    if unknown:
        raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}")
    if settings is None:
        return cls(**overrides)
    return replace(settings, **overrides) if overrides else settings


# ----------------------------------------------------------------------------------------- checks
def _checked_supercell(value, name: str):
    """``value`` (n, (n1, n2, n3) or a 3×3 matrix) as it was given but in tuples, after
    :func:`parse_supercell` accepted it (ValueError prefixed with ``name`` otherwise); None stays."""
    if value is None:
        return None
    parse_supercell(value, name)
    listed = np.asarray(value).tolist()
    if isinstance(listed, list):
        return tuple(tuple(int(x) for x in row) if isinstance(row, list) else int(row) for row in listed)
    return int(listed)


def _phonon_mesh(mesh) -> Union[float, Tuple[int, int, int]]:
    """A phonon q-mesh: a length (float, Å), an integer n (n×n×n) or three integers."""
    if isinstance(mesh, (bool, np.bool_)) or mesh is None:
        raise ValueError(f"mesh must be a length in Å (float), n or (n1, n2, n3), got {mesh!r}")
    if isinstance(mesh, (float, np.floating)):
        if not (mesh > 0 and math.isfinite(mesh)):
            raise ValueError(f"a mesh length must be positive (Å), got {mesh}")
        return float(mesh)
    arr = np.asarray(mesh)
    if arr.ndim == 0:
        arr = np.repeat(arr, 3)
    if arr.shape != (3,) or not np.issubdtype(arr.dtype, np.number) or not np.allclose(arr, np.round(arr)):
        raise ValueError(f"mesh must be a length in Å (float), n or (n1, n2, n3) integers, got {mesh!r}")
    if np.any(arr < 1):
        raise ValueError(f"mesh numbers must be >= 1, got {arr.tolist()}")
    return tuple(int(x) for x in np.round(arr))


def _temperature_range(temperatures) -> Tuple[float, float, float]:
    """``(t_min, t_max, t_step)`` (K) with 0 ≤ t_min ≤ t_max and t_step > 0."""
    try:
        t_min, t_max, t_step = (float(t) for t in temperatures)
    except (TypeError, ValueError):
        raise ValueError(
            f"temperatures must be (t_min, t_max, t_step) in K, got {temperatures!r}"
        ) from None
    if not all(math.isfinite(t) for t in (t_min, t_max, t_step)):
        raise ValueError(f"temperatures must be finite, got {temperatures!r}")
    if t_min < 0 or t_max < t_min or t_step <= 0:
        raise ValueError(
            f"temperatures (t_min, t_max, t_step) need 0 <= t_min <= t_max and t_step > 0 (K), "
            f"got {temperatures!r}"
        )
    return t_min, t_max, t_step


def kappa_mesh(value) -> List[int]:
    """A κ q-mesh [3] from ``n`` or ``(n1, n2, n3)`` positive integers; ValueError otherwise."""
    arr = np.asarray(value)
    if arr.ndim == 0:
        arr = np.repeat(arr, 3)
    if (isinstance(value, (bool, np.bool_)) or arr.shape != (3,) or not np.issubdtype(arr.dtype, np.number)
            or not np.allclose(arr, np.round(arr)) or np.any(arr < 1)):
        raise ValueError(f"mesh must be n or (n1, n2, n3) positive integers, got {value!r}")
    return [int(x) for x in np.round(arr)]


def _temperature_list(value) -> List[float]:
    """One or more non-negative temperatures (K)."""
    temps = np.atleast_1d(np.asarray(value, dtype=float)) if value is not None else np.zeros(0)
    if temps.ndim != 1 or temps.size == 0 or not np.all(np.isfinite(temps)) or np.any(temps < 0):
        raise ValueError(f"temperatures must be one or more non-negative values in K, got {value!r}")
    return [float(t) for t in temps]


__all__ = [
    "DEFAULT_DISPLACEMENT",
    "DEFAULT_IMAGINARY_TOL",
    "DEFAULT_MESH",
    "DEFAULT_MIN_WIDTH",
    "KAPPA_DISPLACEMENT",
    "KAPPA_MESH",
    "METHODS",
    "ForceConstantSettings",
    "KappaSettings",
    "PhononSettings",
    "kappa_mesh",
    "with_overrides",
]
