"""Key names for Lua, generated from djwork/redis/keys.py: no script spells a key name itself.

A script (or a library it includes) asks for names with a line
``--@keys SCHEDULE queue batch_jids``; djwork.redis.scripts puts one line in front
of the script's text, ``local keys = {...}``, holding what every such line of
the script asked for, so the Lua reads ``keys.queue(name)`` where Python reads
``keys.queue(name)``. A constant becomes its value (a tuple, a Lua array); a
function of string arguments becomes a Lua function built from what the Python
function returns for marked arguments, so a key's shape is written once, in
keys.py, and a change there (a prefix, Cluster hash tags) reaches every script.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable

from djwork.redis import key_layout, keys

# One line a request: the names, separated by spaces, as djwork/redis/keys.py spells them.
REQUEST = re.compile(r"^--@keys ([A-Za-z0-9_ ]+)$", re.MULTILINE)
_MARK = re.compile("\x00([0-9]+)\x00")
# What a Lua single-quoted literal may hold unescaped here: a key name with a control character or a
# quote in it would need escapes that nothing in keys.py has ever needed.
_PLAIN = re.compile(r"\A[ -&(-\[\]-~]*\Z")


class UnknownKeyNameError(LookupError):
    pass


def requested(text: str) -> list[str]:
    """The names ``text``'s ``--@keys`` lines ask for, each once, in the order asked."""
    return list(dict.fromkeys(name for line in REQUEST.findall(text) for name in line.split()))


def pieces(function: Callable[..., str]) -> list[str | int]:
    """What ``function`` (a key function of keys.py) returns, as literal text and argument positions, in order.

    ``keys.queue`` gives ``["queue:", 0]``. A function whose result does not hold each argument
    once, unchanged and in order, has no such form and raises UnknownKeyNameError.
    """
    parameters = inspect.signature(function).parameters.values()
    if not all(parameter.annotation in ("str", str) for parameter in parameters):
        raise UnknownKeyNameError(f"keys.{function.__name__} takes more than text: no Lua form")
    count = len(parameters)
    text = function(*(f"\x00{position}\x00" for position in range(count)))
    if not isinstance(text, str):
        raise UnknownKeyNameError(f"keys.{function.__name__} does not make a key name")
    parts: list[str | int] = []
    for position, part in enumerate(_MARK.split(text)):
        if position % 2:
            parts.append(int(part))
        elif part:
            parts.append(part)
    if [part for part in parts if isinstance(part, int)] != list(range(count)):
        raise UnknownKeyNameError(f"keys.{function.__name__} does not return its arguments once each, in order")
    return parts


def _literal(text: str) -> str:
    if not _PLAIN.match(text):
        raise UnknownKeyNameError(f"{text!r} holds a character a Lua key literal is not written with here")
    return f"'{text}'"


def _lua_value(name: str) -> str:
    # A cluster's own key functions (its batch companions) are named in key_layout.py: keys.py is full.
    value = getattr(keys, name, None) if hasattr(keys, name) else getattr(key_layout, name, None)
    if isinstance(value, str):
        return _literal(value)
    if isinstance(value, tuple) and all(isinstance(each, str) for each in value):
        return "{" + ", ".join(_literal(each) for each in value) + "}"
    if inspect.isfunction(value) and value.__module__ in (keys.__name__, key_layout.__name__):
        parts = pieces(value)
        arguments = [f"a{part}" for part in parts if isinstance(part, int)]
        body = " .. ".join(f"a{part}" if isinstance(part, int) else _literal(part) for part in parts)
        return f"function({', '.join(arguments)}) return {body} end"
    raise UnknownKeyNameError(f"djwork/redis/keys.py has no key name, prefix or key function called {name!r}")


def prelude(names: Iterable[str]) -> str:
    """The Lua line that defines ``keys`` with ``names`` (a script's requests); '' for none."""
    fields = [f"{name} = {_lua_value(name)}" for name in names]
    if not fields:
        return ""
    return "local keys = {" + ", ".join(fields) + "}  -- generated from djwork/redis/keys.py\n"
