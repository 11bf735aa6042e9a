"""Messages for configuration keys and values that are not accepted: "unknown key, did you mean" and
"must be an integer, got ...", shared by the training config and :func:`mlip.models.create_model`."""

from __future__ import annotations

import difflib
import numbers
import typing
from typing import Any, Iterable, List, Optional


def closest_first(unknown: Iterable[Any], accepted: Iterable[str]) -> List[str]:
    """``accepted``, the close matches of each ``unknown`` key first (best match first, as
    :func:`difflib.get_close_matches` ranks them), then the others in alphabetical order."""
    accepted = sorted(set(accepted))
    first: List[str] = []
    for key in unknown:
        for match in difflib.get_close_matches(str(key), accepted, n=3):
            if match not in first:
                first.append(match)
    return first + [k for k in accepted if k not in first]


def unknown_keys_message(unknown: Iterable[Any], accepted: Iterable[str], what: str = "key",
                         context: str = "") -> str:
    """One line naming the unknown keys, the closest accepted key of each, and every accepted key,
    closest match first: ``unknown key 'epoch' (did you mean 'epochs'?); accepted: epochs, ...``
    (``context``, e.g. ``" for architecture 'platonic'"``, follows the unknown keys)."""
    unknown = sorted(unknown, key=str)
    accepted = sorted(set(accepted))
    names = ", ".join(repr(k) for k in unknown)
    guesses = []
    for key in unknown:
        match = difflib.get_close_matches(str(key), accepted, n=1)
        if match and match[0] not in guesses:
            guesses.append(match[0])
    hint = f" (did you mean {' or '.join(repr(g) for g in guesses)}?)" if guesses else ""
    plural = "s" if len(unknown) > 1 else ""
    listed = ", ".join(closest_first(unknown, accepted))
    return f"unknown {what}{plural} {names}{context}{hint}; accepted: {listed}"


def is_integer(value: Any) -> bool:
    """An integer that is not a bool (``True`` is an ``int`` in Python)."""
    return isinstance(value, numbers.Integral) and not _is_bool(value)


def is_number(value: Any) -> bool:
    """A real number that is not a bool: an integer is accepted where a float is expected."""
    return isinstance(value, numbers.Real) and not _is_bool(value)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy.bool_


def expected_type(hint) -> Optional[str]:
    """What a value of the field type ``hint`` must be, in words (None: anything)."""
    if typing.get_origin(hint) is typing.Union:
        kinds = [expected_type(h) for h in typing.get_args(hint) if h is not type(None)]
        if None in kinds:
            return None
        return " or ".join(kinds) + (" or null" if type(None) in typing.get_args(hint) else "")
    origin = typing.get_origin(hint) or hint
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string",
            tuple: "a list", list: "a list", dict: "a mapping"}.get(origin)


def matches_type(value, hint) -> bool:
    """Whether ``value`` has the type ``hint`` (int, float, bool, str, list, tuple, dict, Optional/Union
    of them; anything else accepts any value): an integer is accepted for a float, a bool is no integer."""
    if typing.get_origin(hint) is typing.Union:
        return any(matches_type(value, h) for h in typing.get_args(hint))
    origin = typing.get_origin(hint) or hint
    if hint is type(None):
        return value is None
    if origin is int:
        return is_integer(value)
    if origin is float:
        return is_number(value)
    if origin is bool:
        return isinstance(value, bool)
    if origin in (tuple, list):
        return isinstance(value, (tuple, list))
    if origin in (str, dict):
        return isinstance(value, origin)
    return True  # Any


def type_error_message(name: str, expected: str, value: Any) -> str:
    """``epochs must be an integer, got 'two'``; for a number written as ``1e-3`` (which YAML reads as
    a string) it adds how to write it."""
    message = f"{name} must be {expected}, got {value!r}"
    if isinstance(value, str) and "e" in value.lower() and "." not in value:
        try:
            float(value)
        except ValueError:
            return message
        dotted = value.lower().replace("e", ".0e", 1)
        message += f" (YAML reads an exponent without a dot as a string: write {dotted})"
    return message


__all__ = ["closest_first", "expected_type", "is_integer", "is_number", "matches_type", "type_error_message",
           "unknown_keys_message"]
