"""Make ``mlip`` importable from a bare checkout (no ``pip install``): the top-level folders models/,
calculators/ and kernels/ are the subpackages mlip.models, mlip.calculators and mlip.kernels
(pyproject.toml's package-dir mapping), so the repository root joins ``mlip.__path__``."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
try:
    import mlip.models  # noqa: F401  (installed, e.g. pip install -e .)
except ImportError:
    sys.path.insert(0, str(ROOT))
    for name in [m for m in sys.modules if m == "mlip" or m.startswith("mlip.")]:
        del sys.modules[name]
    import mlip

    if str(ROOT) not in mlip.__path__:
        mlip.__path__.append(str(ROOT))
    import mlip.models  # noqa: F401
