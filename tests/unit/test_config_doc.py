"""docs/course-yml.md documents every course.yml key, and only keys that exist.

The keys are read from the pydantic models in grader/config.py (the schema load()
validates against), walked from Course; the page's keys are the first cell of its
table rows, with `<placeholders>` standing for mapping keys (a lesson, a part).
"""
from __future__ import annotations

import re
import types
import typing
from pathlib import Path

from pydantic import BaseModel

from grader.config import Course

PAGE = Path(__file__).resolve().parents[2] / "docs" / "course-yml.md"
# Fields load() fills in itself, which course.yml cannot set.
NOT_KEYS = {"root"}


def _models(annotation) -> list[tuple[type[BaseModel], bool]]:
    """The models a field holds, and whether each sits under a mapping's keys."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, False)]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict:
        return [(m, True) for m, _ in _models(args[1])]
    if origin is list:  # a list's items, as `<item>` (a rubric's items)
        return [(m, True) for m, _ in _models(args[0])]
    if origin in (typing.Union, types.UnionType):
        return [found for a in args for found in _models(a)]
    return []


def schema_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    keys = set()
    for name, info in model.model_fields.items():
        if not prefix and name in NOT_KEYS:
            continue
        path = f"{prefix}{name}"
        keys.add(path)
        for sub, mapped in _models(info.annotation):
            keys |= schema_keys(sub, f"{path}.*." if mapped else f"{path}.")
    return keys


def documented_keys(text: str) -> set[str]:
    """First cells of the rows of tables headed `| key |` (other tables, such as the
    roster CSV's columns, are not course.yml keys)."""
    keys, in_keys = set(), False
    for line in text.splitlines():
        if not line.startswith("|"):
            in_keys = False
        elif not in_keys and re.match(r"\|\s*key\s*\|", line):
            in_keys = True
        elif in_keys and (cell := re.match(r"\|\s*`([^`]+)`", line)):
            keys.add(re.sub(r"<[^>]+>", "*", cell[1]))
    return keys


def test_every_key_is_documented_and_nothing_else():
    schema, page = schema_keys(Course), documented_keys(PAGE.read_text(encoding="utf-8"))
    assert sorted(schema - page) == [], "keys in grader/config.py missing from the page"
    assert sorted(page - schema) == [], "keys on the page that grader/config.py lacks"


def test_the_walk_sees_nested_and_mapped_models():
    """The comparison can fail: the walk reaches keys under mappings and unions."""
    keys = schema_keys(Course)
    assert {"lessons.*.parts.*.points", "roster.*.email", "lti.key_env",
            "defaults.limits.memory_mb", "lessons.*.tolerances.*.atol",
            "lessons.*.written.*.rubric.*.note"} <= keys
    assert NOT_KEYS <= set(Course.model_fields) and not NOT_KEYS & keys
    table = "| key | m |\n| --- | --- |\n| `lessons.<key>.title` | x |\n\n| column |\n| `id` |"
    assert documented_keys(table) == {"lessons.*.title"}
