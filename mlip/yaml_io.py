"""Reading YAML configuration files with errors that name the file and the problem."""

from __future__ import annotations

from typing import Any


def read_yaml(path, what: str = "config") -> Any:
    """``yaml.safe_load`` of ``path``; ValueError ``"cannot read <what> ..."`` or ``"<what> ... is not
    valid YAML"`` instead of OSError/YAMLError."""
    import yaml

    path = str(path)
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except OSError as err:
        raise ValueError(f"cannot read {what} {path!r}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"{what} {path!r} is not valid YAML: {err}") from None
