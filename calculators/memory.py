"""Memory an evaluation needs, estimated before its graph is built, against the memory available.

Forces and stress come from a backward pass, which keeps the intermediate tensors of every edge
until it runs: an evaluation needs about (edges × bytes per edge), and a structure too large for the
machine would otherwise be found out only when the allocator fails, or the kernel kills the process,
gigabytes and many seconds later. :class:`MemoryCheck` measures a model's bytes per edge on a small
probe crystal with as many neighbours per atom as the structure (the tensors autograd saves, counted with
``torch.autograd.graph.saved_tensors_hooks``, times :data:`PEAK_FACTOR` for the gradients the backward
pass holds beside them, plus :data:`GRAPH_BYTES_PER_EDGE` for the neighbour list and the graph),
multiplies them by the edges the structure will have (:func:`mlip.structure_checks.estimate_edges`) and
refuses a structure whose estimate exceeds the memory available (:func:`available_memory`) with
:class:`InsufficientMemoryError`, before any neighbour list is built.

Measured on one CPU core in float32 for 864 Cu atoms at lattice constants of 3.2–6.0 Å (17–110 neighbours
within the cutoff), the estimate is 1.06–2.1 times the peak resident memory of the evaluation, for
``equiformer_v3-emt`` (21–35 KB per edge), ``platonic-emt`` (32–53 KB) and ``embedded-atom-emt``
(1.4–2.4 KB).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from pathlib import Path
from typing import Dict, Optional, Tuple

import torch

from mlip.potential import Potential
from mlip.structure_checks import estimate_edges

__all__ = ["GRAPH_BYTES_PER_EDGE", "InsufficientMemoryError", "MemoryCheck", "PEAK_FACTOR",
           "available_memory", "saved_bytes", "saved_bytes_per_edge"]

#: peak memory of an evaluation over the bytes of the tensors saved for its backward pass
PEAK_FACTOR = 2.0
#: the neighbour list (pairs, shifts, distances) and the graph's edge tensors, per edge
GRAPH_BYTES_PER_EDGE = 200
#: structures with fewer estimated edges are not checked: no larger than the probe, they cost less to
#: evaluate than to measure
MIN_CHECKED_EDGES = 20_000


class InsufficientMemoryError(ValueError):
    """A structure whose evaluation would need more memory than the machine has available."""


def _cgroup_room() -> Optional[int]:
    """Bytes the process's cgroup may still take (its limit minus its usage), or None without a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2
            folder = Path("/sys/fs/cgroup") / path.lstrip("/")
            limit_name, usage_name = "memory.max", "memory.current"
        elif "memory" in controllers.split(","):  # cgroup v1
            folder = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            limit_name, usage_name = "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            continue
        try:
            limit = (folder / limit_name).read_text().strip()
            usage = int((folder / usage_name).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 1 << 60:  # "max" or a huge number: no limit
            return max(int(limit) - usage, 0)
    return None


def _heap_free() -> int:
    """Bytes freed to glibc's heap and kept there (the process reuses them before asking the system:
    :mod:`mlip.allocator` keeps them), or 0 where that cannot be read."""
    try:
        mallinfo2 = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return 0

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                         "usmblks", "fsmblks", "uordblks", "fordblks",
                                                         "keepcost")]

    mallinfo2.restype = MallInfo2
    return int(mallinfo2().fordblks)


def available_memory(device: torch.device) -> Tuple[int, str]:
    """(bytes an evaluation on ``device`` may still take, where that number comes from).

    CUDA: the device's free memory plus what PyTorch's caching allocator holds unused. CPU: the
    system's ``MemAvailable``, or the room left under the process's cgroup limit when that is smaller,
    plus the memory freed to the process's heap and kept there.
    """
    device = torch.device(device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free + cached), f"free on {device}"
    room, source = None, "MemAvailable"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                room = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    cgroup = _cgroup_room()
    if cgroup is not None and (room is None or cgroup < room):
        room, source = cgroup, "the cgroup's limit less its usage"
    if room is None:  # not Linux: no figure to check against
        return 1 << 62, "unknown"
    return room + _heap_free(), source


def _probe_atoms(symbol: str, cutoff: float, neighbors: float):
    """A 32-atom fcc crystal of ``symbol`` whose atoms have about ``neighbors`` neighbours within
    ``cutoff`` (density × sphere volume; at least 1 neighbour, nearest neighbours at least 0.5 Å apart)."""
    from ase.build import bulk

    # fcc: 4 atoms per a³, so k = (4 / a³) · (4π/3) rc³
    a = (16.0 * math.pi * cutoff**3 / (3.0 * max(neighbors, 1.0))) ** (1.0 / 3.0)
    return bulk(symbol, "fcc", a=max(a, 0.5 * 2**0.5), cubic=True).repeat((2, 2, 2))


def saved_bytes(potential: Potential, graph) -> int:
    """Bytes of the tensors autograd saves when ``potential`` evaluates forces and stress of ``graph``
    (each storage counted once); a compiled calculator's memory is estimated from this eager evaluation."""
    seen, total = set(), 0

    def pack(tensor):
        nonlocal total
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        potential(graph, compute_forces=True, compute_stress=True)
    return total


def saved_bytes_per_edge(potential: Potential, dtype: torch.dtype, device: torch.device,
                         neighbors: float) -> float:
    """Bytes autograd saves per edge for ``potential``'s forces and stress (:func:`saved_bytes`) on a
    32-atom fcc crystal of its first element whose atoms have about ``neighbors`` neighbours (what an
    atom costs, over its edges, depends on how many it has; so does the part of the edges a radius of
    attention shorter than the cutoff keeps)."""
    from mlip.graph_builder import GraphBuilder

    graph = GraphBuilder(potential.cutoff, dtype=dtype, device=device)(
        _probe_atoms(potential.species[0], potential.cutoff, neighbors))
    return saved_bytes(potential, graph) / max(graph.edge_index.shape[1], 1)


def _gigabytes(n: float) -> str:
    """``2,342 GB``, ``19.4 GB``, ``0.0123 GB``."""
    return f"{n / 1e9:,.0f} GB" if n >= 1e11 else f"{n / 1e9:.3g} GB"


class MemoryCheck:
    """Refuses a structure whose evaluation by ``potential`` (in ``dtype`` on ``device``) would need
    more memory than is available (see the module notes); called with the structure before its graph
    is built. The bytes per edge are measured at the first structure large enough to be checked."""

    def __init__(self, potential: Potential, dtype: torch.dtype, device: torch.device):
        self.potential, self.dtype, self.device = potential, dtype, torch.device(device)
        self._per_edge: Dict[int, float] = {}  # by neighbours per atom, in steps of 25 %
        self._passed = 0.0  # the largest estimate that fitted: what is no larger needs no new check

    def bytes_per_edge(self, neighbors: float) -> float:
        """Estimated peak bytes per edge of an evaluation of a structure whose atoms have about
        ``neighbors`` neighbours (measured once for each 25 % step of it)."""
        step = round(math.log(max(neighbors, 1.0)) / math.log(1.25))
        if step not in self._per_edge:
            saved = saved_bytes_per_edge(self.potential, self.dtype, self.device, 1.25**step)
            self._per_edge[step] = PEAK_FACTOR * saved + GRAPH_BYTES_PER_EDGE
        return self._per_edge[step]

    def estimate(self, atoms, edges: Optional[float] = None) -> Tuple[float, float]:
        """(estimated edges, estimated peak bytes) of an evaluation of ``atoms`` (``edges``: the edges
        estimated already)."""
        edges = estimate_edges(atoms, self.potential.cutoff) if edges is None else edges
        return edges, edges * self.bytes_per_edge(edges / len(atoms))

    def __call__(self, atoms) -> None:
        cutoff = self.potential.cutoff
        edges = estimate_edges(atoms, cutoff)
        if edges < max(MIN_CHECKED_EDGES, self._passed):
            return
        edges, needed = self.estimate(atoms, edges)
        room, source = available_memory(self.device)
        if needed > room:
            dtype = str(self.dtype).replace("torch.", "")
            raise InsufficientMemoryError(
                f"{len(atoms):,} atoms with about {edges / len(atoms):.0f} neighbours each within the cutoff "
                f"({cutoff:g} Å) would need about {_gigabytes(needed)} to evaluate "
                f"({needed / edges / 1e3:.1f} KB per edge for this model in {dtype}), and "
                f"{_gigabytes(room)} is available ({source}); evaluate a smaller structure (e.g. a smaller "
                f"--supercell) or use a machine with more memory (MLIP_MEMORY_CHECK=0 skips this estimate)")
        self._passed = edges * 1.25  # a cell that breathes (NPT, a cell relaxation) is not checked again
