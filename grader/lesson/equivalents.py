"""The instructor's equivalent mutants: changes no test can catch, because the result
is the same for every input the lesson's contract allows (dim=1 for dim=-1 on a 2-D
tensor, say). They sit beside the hidden tests, in `equivalent_mutants.yml`, each with
a reason, so a reviewer can judge the claim; the audit leaves them out of the kill rate.
"""
from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

FILE = "equivalent_mutants.yml"


class Equivalent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    reason: str = Field(min_length=3)
    change: str = ""  # the changed lines, for the reader (the id decides)


def load(tests: Path) -> dict[str, Equivalent]:
    """{mutant id: entry} from the lesson's tests folder; {} when it lists none."""
    path = tests / FILE
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        if not isinstance(data, list):
            raise ValueError("the top level must be a list of {id, reason}")
        entries = [Equivalent(**item) for item in data]
    except (yaml.YAMLError, ValidationError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    found: dict[str, Equivalent] = {}
    for entry in entries:
        if entry.id in found:
            raise ValueError(f"{path}: {entry.id} is listed twice")
        found[entry.id] = entry
    return found
