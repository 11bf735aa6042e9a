"""ASE calculators."""

from .mlip_calculator import MLIPCalculator, load_calculator

__all__ = ["MLIPCalculator", "load_calculator"]
