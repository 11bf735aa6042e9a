"""The options ``mlip phonons`` and ``mlip kappa`` share, and their settings objects built from them.

Both commands take the structure, the model, the finite displacement and the symmetry-preserving
relaxation before it; :func:`add_force_constant_args` adds those options with the defaults of the
command's settings class (:class:`~mlip.workflows.phonons.PhononSettings` or
:class:`~mlip.workflows.phonons.KappaSettings`), and :func:`build_settings` makes the settings
object from them and the command's own options (:func:`force_constant_settings`: the shared ones
alone, as ``mlip kappa --batch`` records them for its campaign).
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, Dict

from mlip.cli.arguments import add_model_args, nonneg_int, positive_float


def setting_default(settings_class, name: str) -> Any:
    """The default of the setting ``name`` of ``settings_class`` (a settings dataclass)."""
    for f in fields(settings_class):
        if f.name == name and f.default is not MISSING:
            return f.default
    raise KeyError(f"{settings_class.__name__} has no default for {name!r}")


def add_force_constant_args(p, settings_class, structure_help: str) -> None:
    """The ``STRUCTURE`` argument, the model options (float64) and ``--displacement``,
    ``--no-relax``, ``--fmax``, ``--relax-steps`` and ``--keep-residual-forces`` with the defaults
    of ``settings_class``."""
    p.add_argument("structure", metavar="STRUCTURE", help=structure_help)
    add_model_args(p, dtype="float64")
    p.add_argument("--displacement", type=positive_float, default=setting_default(settings_class, "displacement"),
                   help="Å (default: %(default)s)")
    p.add_argument("--no-relax", action="store_true", help="skip the symmetry-preserving relaxation")
    p.add_argument("--fmax", type=positive_float, default=setting_default(settings_class, "fmax"),
                   help="relaxation threshold, eV/Å (default: %(default)s)")
    p.add_argument("--relax-steps", type=nonneg_int, default=setting_default(settings_class, "relax_steps"),
                   help="default: %(default)s")
    p.add_argument("--keep-residual-forces", action="store_true",
                   help="keep the forces on the undisplaced supercell in the force constants (default: "
                        "subtract them, as phonopy's --fz; a change only for models not exactly invariant)")


def force_constant_settings(args) -> Dict[str, Any]:
    """The settings (keyword arguments of the settings classes) that the options of
    :func:`add_force_constant_args` set."""
    return dict(
        displacement=args.displacement,
        relax=not args.no_relax,
        fmax=args.fmax,
        relax_steps=args.relax_steps,
        subtract_residual_forces=not args.keep_residual_forces,
    )


def build_settings(settings_class, args, **own):
    """``settings_class`` from the shared options in ``args`` and the command's ``own`` settings;
    a bad value is a ValueError naming the setting (``mlip: error: ...``)."""
    return settings_class(**force_constant_settings(args), **own)


__all__ = ["add_force_constant_args", "build_settings", "force_constant_settings", "setting_default"]
