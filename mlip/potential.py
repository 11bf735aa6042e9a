"""The potential: an energy model (the network) plus its declared terms (learned energy terms, a
short-range repulsion) and per-element reference energies, with forces and stress obtained by
automatic differentiation of the total energy (a conservative force field)."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import torch
from torch import nn

from mlip.elements import to_atomic_numbers, to_symbols
from mlip.graph import AtomicGraph, edge_vectors, vector_times_matrix
from mlip.repulsion import build_repulsion
from mlip.terms import build_terms, scaled, term_specs
from mlip.nn import scatter_sum

MAX_Z = 119


class Potential(nn.Module):
    """Wraps an energy model into a potential energy surface.

    Per-atom energy  E_i = scale · model_i + E_ref[Z_i] (+ the short-range repulsion's share
    E_rep,i when one is declared, + Σ_p term_p,i of the declared physical terms, in eV), with
    model_i = network_i + Σ_t term_t,i the network's output plus the declared learned terms
    (:mod:`mlip.terms`);  total energy E = Σ_i E_i per structure;
    with ``isolated_reference`` the reference energies are isolated-atom energies and the model's
    own output for an atom with no neighbors is subtracted,  E_i = E_ref[Z_i] + scale · (model_i −
    model_iso[Z_i]),  so an isolated atom has exactly its reference energy (the dissociation limit)
    whatever the weights (only per-element constants change: forces and stress are the same);
    forces F = −∂E/∂r; stress σ = (1/V) ∂E/∂ε for a symmetric strain ε applied to positions *and*
    cell before edge vectors are formed (ASE sign convention, eV/Å³, Voigt order xx yy zz yz xz xy).

    The wrapped ``model`` (the interface of :mod:`mlip.models.base`) is called as
    ``model(species, edge_index, edge_vectors, batch, n_graphs)`` with ``species`` [n_atoms] indices
    into ``species`` (not atomic numbers), and returns per-atom energies [n_atoms]; each term as
    ``term(species, edge_index, edge_vectors)`` → [n_atoms]. Edge vectors carry the gradient to
    positions and strain.

    Args:
        model: the energy model (an ``nn.Module``).
        species: chemical symbols or atomic numbers the model was built for (fixes embedding order).
        cutoff: neighbor-list cutoff radius (Å).
        architecture: registered architecture name, used by checkpoints to rebuild the model.
        hyperparameters: the keyword arguments that rebuild ``model`` with ``create_model``.
        reference_energies: per-element reference energies (eV), in ``species`` order; default zeros.
        scale: multiplies the model output (eV).
        metadata: JSON-serialisable provenance stored in checkpoints.
        isolated_reference: ``reference_energies`` are isolated-atom energies, matched exactly (above).
        repulsion: a declared short-range repulsion term (:func:`mlip.repulsion.build_repulsion`:
            ``"zbl"``, a mapping with its switch radii, or ``None`` for none), added to the model's
            energy whatever its weights, so atoms pushed together repel.
        terms: the energy terms, by name or import path (:func:`mlip.terms.term_specs`'s declaration, e.g.
            ``{"embedded_atom": {"log_densities": True}, "lennard_jones": {"epsilon": 0.01, "sigma": 2.5}}``;
            ``None`` for none): learned ones added to the network's output, physical ones after the scale.
    """

    def __init__(
        self,
        model: nn.Module,
        species: Sequence[str | int],
        cutoff: float,
        architecture: str,
        hyperparameters: Optional[dict] = None,
        reference_energies: Optional[Sequence[float]] = None,
        scale: float = 1.0,
        metadata: Optional[dict] = None,
        isolated_reference: bool = False,
        repulsion=None,
        terms=None,
    ):
        super().__init__()
        numbers = to_atomic_numbers(species)
        #: free-form provenance saved with checkpoints (training data, command, model card, ...)
        self.metadata: dict = dict(metadata or {})
        self.model = model
        self.architecture = str(architecture)
        self.hyperparameters = dict(hyperparameters or {})
        self.cutoff = float(cutoff)
        self.register_buffer("atomic_numbers", torch.tensor(numbers, dtype=torch.int64))
        table = torch.full((MAX_Z,), -1, dtype=torch.int64)
        table[torch.tensor(numbers)] = torch.arange(len(numbers))
        self.register_buffer("species_table", table, persistent=False)
        if reference_energies is None:
            reference_energies = [0.0] * len(numbers)
        if len(reference_energies) != len(numbers):
            raise ValueError(
                f"reference_energies has {len(reference_energies)} entries for {len(numbers)} species"
            )
        self.register_buffer("reference_energies", torch.tensor(list(reference_energies), dtype=torch.float64))
        self.register_buffer("scale", torch.tensor(float(scale), dtype=torch.float64))
        #: reference energies are isolated-atom energies, reproduced exactly (see the class docstring)
        self.isolated_reference = bool(isolated_reference)
        self._isolated_cache: Optional[tuple] = None  # (key, model_iso) for frozen weights
        #: the full declaration of the terms, {name: {argument: value}} (stored in checkpoints)
        self.term_specs = term_specs(terms)
        self.repulsion = None
        self.set_repulsion(repulsion)
        #: the term modules by name (:func:`mlip.terms.registry.module_key`), in declaration order; the
        #: learned ones inside ``scale`` like the network, the physical ones after it
        self.terms = build_terms(self.term_specs, numbers, self.cutoff)

    def set_repulsion(self, spec) -> None:
        """Declare the short-range repulsion term (:func:`mlip.repulsion.build_repulsion`'s ``spec``;
        ``None`` removes it). It must lie within the cutoff, where the neighbor list reaches."""
        term = build_repulsion(spec, self.atomic_numbers.tolist())
        if term is not None and "zbl" in self.term_specs:
            raise ValueError("the ZBL repulsion is declared twice, as the repulsion and among the terms: "
                             "declare repulsion: none")
        if term is not None and term.max_range() > self.cutoff:
            raise ValueError(f"the repulsion term reaches {term.max_range():.2f} Å, "
                             f"beyond the cutoff {self.cutoff} Å")
        #: the short-range repulsion term (a module with ``config()``), or None
        self.repulsion = None if term is None else term.to(self.atomic_numbers.device)

    # ------------------------------------------------------------------ metadata
    @property
    def species(self) -> List[str]:
        """Chemical symbols in embedding order."""
        return to_symbols(self.atomic_numbers.tolist())

    def num_parameters(self) -> int:
        """Number of weights (counted whether or not they are frozen, as in a calculator)."""
        return sum(p.numel() for p in self.parameters())

    def species_index(self, numbers: torch.Tensor) -> torch.Tensor:
        """Map atomic numbers [n_atoms] to embedding indices; ValueError for unsupported elements.

        The result for the last ``numbers`` tensor is kept while neither it nor the species table has
        changed (a calculator passes the same tensor on every call for one structure): the checks
        and the lookup then cost no operation. Callers must not modify the returned tensor."""
        table = self.species_table
        key = (numbers._version, id(table), table._version, table.data_ptr())
        cached = self.__dict__.get("_species_cache")
        if cached is not None and cached[0] is numbers and cached[1] == key:
            return cached[2]
        idx = self.lookup_species(numbers)
        # the cache holds ``numbers`` itself, so its id cannot be reused by another tensor meanwhile
        self.__dict__["_species_cache"] = (numbers, key, idx)
        return idx

    def lookup_species(self, numbers: torch.Tensor) -> torch.Tensor:
        """:meth:`species_index` computed afresh (checks and lookup)."""
        if numbers.numel() and (int(numbers.min()) < 0 or int(numbers.max()) >= MAX_Z):
            raise ValueError(f"invalid atomic numbers {sorted(set(numbers.tolist()))}")
        idx = self.species_table[numbers]
        if idx.numel() and bool((idx < 0).any()):
            bad = sorted(set(numbers[idx < 0].tolist()))
            raise ValueError(
                f"element(s) {', '.join(to_symbols(bad))} not supported by this potential "
                f"(it was built for {', '.join(self.species)})"
            )
        return idx

    # ------------------------------------------------------------------ evaluation
    def model_energies(self, species: torch.Tensor, edge_index: torch.Tensor, edge_vectors: torch.Tensor,
                       batch: torch.Tensor, n_graphs: int,
                       attention_edges: Optional[torch.Tensor] = None) -> torch.Tensor:
        """model_i [N] = network_i + Σ_t term_t,i (terms added in declaration order), the output that
        ``scale`` multiplies; arguments as the model's (``attention_edges``, passed on when given: the
        edges within the attention cutoff of a model that has one, see :meth:`forward`).

        The terms are evaluated before the network: the order in which their gradients accumulate into
        the edge vectors (and so the forces and stress, to the last bit) is that of the checkpoints
        written when the term sat inside the network, which evaluated it first."""
        term_energies = [term(species, edge_index, edge_vectors)
                         for term in self.terms.values() if scaled(term)]
        if attention_edges is None:
            energies = self.model(species, edge_index, edge_vectors, batch, n_graphs)
        else:
            energies = self.model(species, edge_index, edge_vectors, batch, n_graphs, attention_edges)
        for term_energy in term_energies:
            energies = energies + term_energy
        return energies

    def isolated_model_energies(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """:meth:`model_energies` [n_species] for one atom of each species with no neighbors (a graph
        of n_species single-atom structures and no edges); differentiable in the weights."""
        n = len(self.atomic_numbers)
        device = self.atomic_numbers.device
        index = torch.arange(n, device=device)
        no_edges = torch.zeros((2, 0), dtype=torch.int64, device=device)
        return self.model_energies(index, no_edges, torch.zeros((0, 3), dtype=dtype, device=device), index, n)

    def _weights_state(self) -> tuple:
        """``(state, trainable)``: the identity, storage and in-place version of every parameter and
        buffer (changes whenever a weight does: an optimizer step, ``load_state_dict``, ``.to()``,
        a module or parameter replaced), and whether some parameter requires a gradient.

        One walk over ``_modules``, ``_parameters`` and ``_buffers`` (not ``parameters()`` and
        ``buffers()``, whose generators cost more than the rest of a small structure's bookkeeping)."""
        state = []
        trainable = False
        stack, seen = [self], set()
        while stack:
            module = stack.pop()
            if id(module) in seen:  # a module shared by two parents (or a cycle) is visited once
                continue
            seen.add(id(module))
            for t in module._parameters.values():
                if t is not None:
                    state.append((id(t), t.data_ptr(), t._version))
                    trainable = trainable or t.requires_grad
            for t in module._buffers.values():
                if t is not None:
                    state.append((id(t), t.data_ptr(), t._version))
            stack.extend(m for m in module._modules.values() if m is not None)
        return tuple(state), trainable

    def _isolated_energies(self, dtype: torch.dtype) -> torch.Tensor:
        """``isolated_model_energies`` [n_species], cached while the weights are frozen.

        When a gradient with respect to the weights can be taken (grad mode on and some parameter
        requiring it: training) it is recomputed on every call, so it stays in the graph. Otherwise
        (a calculator, whose copy of the weights is frozen, or ``torch.no_grad``) it is computed
        once per state of the weights: one forward pass fewer per call, which matters for small
        structures (benchmarks/speed/isolated_reference_cost.py measures it). Traced by torch.compile
        (a compiled training step) it is always recomputed: the cache key reads storage addresses."""
        if torch.compiler.is_compiling():
            return self.isolated_model_energies(dtype)
        state, trainable = self._weights_state()
        if torch.is_grad_enabled() and trainable:
            return self.isolated_model_energies(dtype)
        key = (dtype, self.atomic_numbers.device, state)
        if self._isolated_cache is None or self._isolated_cache[0] != key:
            with torch.no_grad():
                self._isolated_cache = (key, self.isolated_model_energies(dtype))
        return self._isolated_cache[1]

    def per_element_offsets(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """What is added to ``scale · model_i`` for each species [n_species] (eV): the reference
        energies, minus ``scale · model_iso`` with ``isolated_reference``."""
        offsets = self.reference_energies.to(dtype)
        if self.isolated_reference:
            offsets = offsets - self.scale.to(dtype) * self._isolated_energies(dtype)
        return offsets

    def forward(
        self,
        graph: AtomicGraph,
        compute_forces: bool = True,
        compute_stress: bool = True,
        create_graph: bool = False,
        species: Optional[torch.Tensor] = None,
        attention_edges: Optional[torch.Tensor] = None,
    ) -> Dict[str, torch.Tensor]:
        """Evaluate a batch.

        Returns a dict with ``energy`` [n_graphs], ``energies`` [n_atoms], and when asked
        ``forces`` [n_atoms, 3] and ``stress`` [n_graphs, 6] (Voigt; NaN for a structure whose
        cell has zero volume, where stress is undefined). ``create_graph=True`` keeps the graph of
        the derivatives so force and stress losses can be trained. ``species`` [n_atoms]: the
        embedding indices of ``graph.numbers`` when the caller has them (:meth:`species_index`; a
        compiled training step looks them up outside the compiled graph, whose checks depend on data).
        ``attention_edges`` [E']: for a network with an attention cutoff shorter than the graph's
        (``model.attention_cutoff``), the indices of the edges within it when the caller has selected
        them (:func:`mlip.nn.edge_indices_within`; the compiled calculator does, so that no shape in its
        graph depends on the data); None: the network selects them.
        """
        need_grad = compute_forces or compute_stress
        grad_was_enabled = torch.is_grad_enabled()
        with torch.set_grad_enabled(need_grad or grad_was_enabled):
            out, leaf, strain = self.differentiable_energy(graph, compute_forces, compute_stress, species,
                                                           attention_edges)
            if need_grad:
                inputs = [t for t in (leaf, strain) if t is not None]
                grads = torch.autograd.grad(
                    out["energy"].sum(), inputs, create_graph=create_graph, allow_unused=True
                )
                out.update(self.derivatives(graph, leaf, strain, grads))
        return out

    def differentiable_energy(self, graph: AtomicGraph, compute_forces: bool = True,
                              compute_stress: bool = True, species: Optional[torch.Tensor] = None,
                              attention_edges: Optional[torch.Tensor] = None):
        """The energies of :meth:`forward` before any derivative is taken, with the tensors they are
        differentiated against: ``(out, positions, strain)`` with ``out`` = {``energy`` [n_graphs],
        ``energies`` [n_atoms]}, ``positions`` [n_atoms, 3] the leaf the forces are the negative
        gradient against (None unless ``compute_forces``) and ``strain`` [n_graphs, 3, 3] the leaf of
        the stress (None unless ``compute_stress``). Call it with grad mode on when a derivative is
        wanted; :meth:`derivatives` turns the gradients into forces and stress. A committee of
        potentials (:mod:`mlip.calculators.committee`) evaluates every member this way on one graph and
        takes all their gradients in one backward pass. ``species``, ``attention_edges``: as in
        :meth:`forward`."""
        if species is None:
            species = self.species_index(graph.numbers)
        dtype = graph.positions.dtype
        n_graphs = graph.n_graphs
        positions = graph.positions
        cell = graph.cell
        leaf = None
        if compute_forces:
            leaf = positions.detach().requires_grad_(True)
            positions = leaf
        strain = None
        if compute_stress:
            # made a leaf afterwards, not by ``requires_grad=True`` at creation, which torch.compile refuses
            strain = torch.zeros((n_graphs, 3, 3), dtype=dtype, device=positions.device).requires_grad_(True)
            sym = 0.5 * (strain + strain.transpose(1, 2))
            positions = positions + vector_times_matrix(positions, sym, graph.batch)
            cell = cell + torch.bmm(cell, sym)
        vec = edge_vectors(positions, cell, graph.batch, graph.edge_index, graph.shifts)
        model_energy = self.model_energies(species, graph.edge_index, vec, graph.batch, n_graphs,
                                           attention_edges)
        energies = model_energy * self.scale.to(dtype) + self.per_element_offsets(dtype)[species]
        if self.repulsion is not None:
            energies = energies + self.repulsion(species, graph.edge_index, vec)
        for term in self.terms.values():  # the physical terms (eV), in declaration order
            if not scaled(term):
                energies = energies + term(species, graph.edge_index, vec)
        energy = scatter_sum(energies, graph.batch, n_graphs)
        return {"energy": energy, "energies": energies}, leaf, strain

    @staticmethod
    def derivatives(graph: AtomicGraph, positions: Optional[torch.Tensor], strain: Optional[torch.Tensor],
                    grads: Sequence[Optional[torch.Tensor]]) -> Dict[str, torch.Tensor]:
        """``forces`` [n_atoms, 3] and ``stress`` [n_graphs, 6] (those whose leaf is not None) from
        ``grads``, the gradients of the total energy with respect to the leaves of
        :meth:`differentiable_energy` that are not None, in the order positions, strain."""
        out: Dict[str, torch.Tensor] = {}
        k = 0
        if positions is not None:
            g = grads[0]
            out["forces"] = -g if g is not None else torch.zeros_like(graph.positions)
            k = 1
        if strain is not None:
            g = grads[k]
            if g is None:
                g = torch.zeros_like(strain)
            volume = torch.linalg.det(graph.cell).abs()
            has_volume = (volume > 0).view(-1, 1, 1)
            # Divide by 1 where there is no volume and put NaN there afterwards: a NaN in the
            # forward division would turn the (zero) gradient of those rows into NaN when a
            # stress loss is trained on a batch that also holds molecules or clusters.
            stress = g / torch.where(has_volume, volume.view(-1, 1, 1), torch.ones_like(g[:, :1, :1]))
            stress = torch.where(has_volume, stress, torch.full_like(stress, float("nan")))
            out["stress"] = stress[:, [0, 1, 2, 1, 0, 0], [0, 1, 2, 2, 2, 1]]
        return out

