"""Small instances of every shipped architecture, with random weights, for the physics suite.

``ARCHITECTURES`` names one configuration per feature worth testing (attention kinds, density
embeddings, an attention cutoff shorter than the cutoff, the embedded-atom term alone);
:func:`build_potential` makes the float64 potential of one. mlip's own tests run the suite
(:mod:`mlip.testing.physics`) over all of them; to put a new configuration through it, add an entry.
"""

from __future__ import annotations

import torch

# name → (create_model arguments, how the energy is exactly invariant under rotations)
#   "group": exactly invariant under the model's finite group (Platonic); the rotations are
#            ``potential.model.invariant_rotations`` (the group, turned by its orientation).
#   "so3":   invariant under every rotation (EquiformerV3, the embedded-atom model).
ARCHITECTURES = {
    "platonic-softmax": (
        dict(name="platonic", group="tetrahedral", channels=8, num_layers=2, num_heads=2, head_dim=4,
             attention="softmax"),
        "group",
    ),
    # the density embedding with its logarithmic densities (the same sums as the term's, inside the network)
    "platonic-density": (
        dict(name="platonic", group="tetrahedral", channels=8, num_layers=1, num_heads=2, head_dim=4,
             attention="softmax", density=True, avg_neighbors=8.0, radial_values=True,
             density_log_densities=True),
        "group",
    ),
    # density sums and the embedded-atom term to the cutoff (4 Å), attention only to 3 Å
    "platonic-density-reach": (
        dict(name="platonic", group="tetrahedral", channels=8, num_layers=1, num_heads=2, head_dim=4,
             attention="softmax", density=True, avg_neighbors=8.0, attention_cutoff=3.0,
             terms={"embedded_atom": {}}),
        "group",
    ),
    "platonic-linear": (
        dict(name="platonic", group="octahedral", channels=4, num_layers=2, num_heads=2, head_dim=2,
             attention="linear"),
        "group",
    ),
    # the tetrahedral network averaged over its 5 cosets in the icosahedral group: exactly I-invariant
    "platonic-average-icosahedral": (
        dict(name="platonic", group="tetrahedral", channels=4, num_layers=1, num_heads=2, head_dim=2,
             attention="softmax", average_over="icosahedral"),
        "group",
    ),
    # with the logarithmic neighbour densities in its initial scalars
    "equiformer-v3": (
        dict(name="equiformer_v3", lmax=2, mmax=1, channels=8, num_layers=2, num_heads=2, alpha_channels=4,
             value_channels=2, attn_hidden_channels=4, ffn_hidden_channels=16, num_radial=6,
             log_density_embedding=True, avg_neighbors=8.0),
        "so3",
    ),
    # attention to 3 Å; the embedded-atom term and the logarithmic densities to the cutoff (4 Å)
    "equiformer-v3-gate-sepnorm": (
        dict(name="equiformer_v3", lmax=2, mmax=2, channels=4, num_layers=2, num_heads=2, alpha_channels=4,
             value_channels=2, attn_hidden_channels=4, ffn_hidden_channels=8, num_radial=6,
             activation="gate", norm="separate", attention_cutoff=3.0,
             terms={"embedded_atom": {"log_densities": True}}, log_density_embedding=True, avg_neighbors=8.0),
        "so3",
    ),
    # the term alone (the first stage of the shipped recipes) with its logarithmic densities; the
    # Platonic entry above carries the term without them, the EquiformerV3 one with them
    "embedded-atom": (
        dict(name="embedded_atom", num_radial=8, num_densities=4, hidden=16, avg_neighbors=8.0,
             log_densities=True),
        "so3",
    ),
}

#: the elements of the suite's structures (:mod:`mlip.testing.structures`)
SPECIES = ["Cu", "Au", "H", "C", "O"]
#: the cutoff (Å) the suite's structures are made for
CUTOFF = 4.0


def build_potential(arch: str, species=SPECIES, cutoff=CUTOFF, seed=0, dtype=torch.float64):
    """The potential of ``ARCHITECTURES[arch]`` with random weights from ``seed``, in ``dtype``
    (``None``: as ``create_model`` makes it, float32 weights and float64 derived constants), in eval mode.

    Reference energies and scale are non-trivial so that the potential's arithmetic is exercised, and
    weight matrices that start at zero get small random values so that the paths from their inputs are.
    """
    from mlip.models import create_model

    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown test architecture {arch!r} (known: {', '.join(sorted(ARCHITECTURES))})")
    kwargs, _ = ARCHITECTURES[arch]
    kwargs = dict(kwargs)
    potential = create_model(kwargs.pop("name"), species=species, cutoff=cutoff, seed=seed, **kwargs)
    # Non-trivial per-element references and scale so that the wrapper's arithmetic is exercised.
    with torch.no_grad():
        # Weight matrices that start at zero (Platonic's attention radial bias and value filter) would
        # leave the path from their input untested: give them small random values.
        generator = torch.Generator().manual_seed(seed)
        for param in potential.model.parameters():
            if param.dim() >= 2 and not param.any():
                param.copy_(0.3 * torch.randn(param.shape, generator=generator, dtype=param.dtype))
        potential.reference_energies.copy_(torch.linspace(-3.0, -1.0, len(species), dtype=torch.float64))
        potential.scale.fill_(0.7)
    # dtype=None: as create_model made it (float32 weights, float64 derived constants)
    return (potential if dtype is None else potential.to(dtype)).eval()
