"""Shared fixtures: the architectures every physics test runs on, and test structures.

To put a new architecture through the whole physics suite, add an entry to ``ARCHITECTURES``.
"""

from __future__ import annotations

import os

# The test structures are small (≤ 100 atoms): one thread is as fast as two and, unlike two OpenMP/
# OpenBLAS threads spin-waiting for each other, stays fast when the 2-core machine is shared.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from ase import Atoms  # noqa: E402
from ase.build import bulk, fcc111, molecule  # noqa: E402

import mlip  # noqa: E402
from mlip.models import create_model  # noqa: E402

torch.set_num_threads(1)

# name → (create_model arguments, how the energy is exactly invariant under rotations)
#   "group": exactly invariant under the model's finite group (Platonic); the test draws the
#            rotations from ``potential.model.invariant_rotations`` (the group, turned by its orientation).
#   "so3":   invariant under every rotation (EquiformerV3).
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
             activation="gate", norm="separate", attention_cutoff=3.0, terms={"embedded_atom": {"log_densities": True}},
             log_density_embedding=True, avg_neighbors=8.0),
        "so3",
    ),
    # the term alone (the first stage of the shipped recipes) with its logarithmic densities; the
    # Platonic entry above carries the term without them, the EquiformerV3 one with them
    "embedded-atom": (
        dict(name="embedded_atom", num_radial=8, num_densities=4, hidden=16, avg_neighbors=8.0, log_densities=True),
        "so3",
    ),
}

SPECIES = ["Cu", "Au", "H", "C", "O"]
CUTOFF = 4.0


def build_potential(arch: str, species=SPECIES, cutoff=CUTOFF, seed=0, dtype=torch.float64):
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


@pytest.fixture(params=sorted(ARCHITECTURES))
def arch(request):
    return request.param


@pytest.fixture
def potential64(arch):
    return build_potential(arch)


def calc64(potential):
    return mlip.MLIPCalculator(potential, device="cpu", dtype="float64")


# ---------------------------------------------------------------------------------------- structures
def triclinic_crystal(seed=0) -> Atoms:
    """Rattled two-species crystal in a skewed triclinic cell (8 atoms)."""
    rng = np.random.default_rng(seed)
    cell = np.array([[3.9, 0.0, 0.0], [1.3, 3.6, 0.0], [-0.9, 0.8, 4.1]])
    frac = rng.random((8, 3))
    atoms = Atoms("Cu5Au3", scaled_positions=frac, cell=cell, pbc=True)
    # Spread atoms out a little: keep the minimum distance reasonable.
    atoms.set_scaled_positions((np.indices((2, 2, 2)).reshape(3, -1).T + 0.25 * frac) / 2.0)
    atoms.rattle(0.08, seed=seed)
    return atoms


def small_fcc_cell() -> Atoms:
    """One-atom fcc primitive cell, much smaller than the cutoff (every image matters)."""
    atoms = bulk("Cu", "fcc", a=3.61)
    atoms.cell[2] += [0.05, -0.03, 0.02]  # break symmetry so forces/stress are not zero by symmetry
    return atoms


def small_pair_cell() -> Atoms:
    """Two-atom CsCl-type CuAu cell (2.95 Å edge, skewed), smaller than the cutoff, rattled."""
    atoms = Atoms("CuAu", scaled_positions=[[0, 0, 0], [0.5, 0.5, 0.5]],
                  cell=[[2.95, 0.0, 0.0], [0.1, 2.95, 0.0], [0.05, -0.08, 2.95]], pbc=True)
    atoms.rattle(0.05, seed=2)
    return atoms


def slab() -> Atoms:
    """fcc(111) slab, pbc = [T, T, F], vacuum above and below."""
    atoms = fcc111("Cu", size=(2, 2, 3), vacuum=5.0, a=3.61)
    atoms.numbers[[1, 6]] = 79
    atoms.pbc = [True, True, False]
    atoms.rattle(0.05, seed=3)
    return atoms


def far_molecule() -> Atoms:
    """Isolated molecule (no cell) far from the origin."""
    atoms = molecule("CH3CH2OH")
    atoms.rattle(0.05, seed=4)
    atoms.positions += np.array([1.0e3, -2.5e3, 7.0e2])
    atoms.cell = np.zeros((3, 3))
    atoms.pbc = False
    return atoms


STRUCTURES = {
    "triclinic": triclinic_crystal,
    "small_fcc": small_fcc_cell,
    "small_pair": small_pair_cell,
    "slab": slab,
    "molecule": far_molecule,
}
