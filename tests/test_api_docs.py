"""The API page (docs/api.md, rendered by mkdocstrings with Google-style docstrings) documents every parameter of
every public name it lists: a constructor's or a function's parameters each appear in its docstring's Args (or,
for a dataclass, Attributes) section."""

from __future__ import annotations

import enum
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "api.md"
NAMES = re.findall(r"^::: ([\w.]+)$", API_PAGE.read_text(encoding="utf-8"), re.MULTILINE)
SECTION = re.compile(r"^(?:Args|Attributes):\n((?:[ \t]+.*\n?|[ \t]*\n)*)", re.MULTILINE)
ENTRY = re.compile(r"^[ \t]+\**(\w+)(?: \([^)]*\))?:", re.MULTILINE)


def _public(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def documented(obj: Any) -> set[str]:
    """The names in the Args / Attributes sections of `obj`'s docstring and, for a class, of its __init__'s."""
    texts = [inspect.getdoc(obj) or ""]
    if inspect.isclass(obj) and "__init__" in vars(obj):
        texts.append(inspect.getdoc(obj.__init__) or "")
    names: set[str] = set()
    for text in texts:
        for section in SECTION.findall(text + "\n"):
            names |= set(ENTRY.findall(section))
    return names


def parameters(obj: Any) -> list[str]:
    """The named parameters of `obj`'s constructor or call; none for a Protocol, an Enum, or an exception that
    keeps Exception's constructor (the message)."""
    if inspect.isclass(obj) and (issubclass(obj, enum.Enum) or getattr(obj, "_is_protocol", False)):
        return []
    try:
        signature = inspect.signature(obj)
    except ValueError:  # a built-in's constructor: an exception class without one of its own
        return []
    return [p.name for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def test_the_api_page_lists_public_names() -> None:
    assert len(NAMES) >= 20 and "frontier.Frontier" in NAMES, NAMES


@pytest.mark.parametrize("dotted", NAMES)
def test_every_parameter_of_a_public_name_is_documented(dotted: str) -> None:
    obj = _public(dotted)
    missing = [name for name in parameters(obj) if name not in documented(obj)]
    assert not missing, f"{dotted}: parameters without an entry in its docstring's Args / Attributes: {missing}"
