"""The one interface every export has, after nbgrader's `ExportPlugin`: one class per
format, one `export(scores, options)` method. Each gets the class's scores as typed
records and the same options record, so adding a format is one class and one line in
`grader.deliver.export.EXPORTERS`, never a new branch with a signature of its own."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from jinja2 import Environment

    from grader.config import Course
    from grader.record import ClassScores
    from grader.intake.roster import Match


@dataclass(frozen=True)
class ExportOptions:
    """What an export may use beside the scores."""
    course: Course
    lesson_key: str
    out_dir: Path        # OUT/export: the pages scores.json names are its parent's
    roster: Match        # the roster matched with the graded ids
    pages: Environment   # the pages' templates (Gradescope shows each page's top)
    language: str = "en"  # what students read beside a score (comments, the page's top)


@dataclass
class Exported:
    """The files an export wrote, and the graded students it could not write a row
    for (`format: student: why`), which `grader export` reports and fails on."""
    written: list[Path]
    left_out: list[str] = field(default_factory=list)


class Exporter(ABC):
    """One format an LMS or a grader imports."""
    to: ClassVar[str]  # its name in `grader export --to`

    @abstractmethod
    def export(self, scores: ClassScores, options: ExportOptions) -> Exported:
        """Write this format into `options.out_dir` (or where course.yml says)."""
