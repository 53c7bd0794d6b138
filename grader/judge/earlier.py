"""An assembly lesson's own-code part: which of a student's earlier pieces run as their
own, and which are stood in for (docs/design.md, "Assembly lessons").

course.yml's `builds_on` names, for each earlier lesson, the pieces the assembly's
stub imports from it and the parts of that lesson each piece rests on. For a student,
each earlier lesson's file is `<its submissions>/<student id>/<its exercise>` and its
grade is that lesson's stored result (`<its out>/results/`, as its last `grader run`
wrote it: run the earlier lessons first). A piece runs as the student's own when the
file is there, a result made from that very file is there (the result's `source_hash`
is the file's now: a file changed since, or a result that names no file, is not its
grade), and every part the piece rests on got full marks in it. Otherwise the grader's
stand-in takes its place and the page says why: no file, no result, a result of
another file, or the parts that lost points (with the mistake, where that lesson named
one), which are charged there and not again here.

`grader check` where no solution answers a stand-in (a student bundle) has nothing to
stand in with: its practice run takes each piece from the student's own earlier file
beside the assembly's (`beside`), names a piece with no file, and runs every other
piece as theirs (docs/design.md, "Assembly lessons").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grader.config import Course
from grader.intake.capped import read_source
from grader.store import Store, source_hash

@dataclass
class Piece:
    """One piece the assembly imports: the student's own, or stood in for and why
    ("no_file", "no_record", "changed": the stored result was made from another file,
    "unhashed": it names none, or "lost": the parts that lost points, and the mistakes
    that lesson named for them, {language: title} each)."""

    name: str
    lesson: str
    own: bool
    why: str = ""
    parts: list[str] = field(default_factory=list)
    mistakes: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"name": self.name, "lesson": self.lesson, "own": self.own,
                **({"why": self.why, "parts": self.parts, "mistakes": self.mistakes}
                   if not self.own else {})}


@dataclass
class Earlier:
    """A student's earlier pieces: each piece's verdict, and the sources of the files
    whose pieces run as their own (lesson key -> text). `alone`: nothing stands in for
    a piece (`beside`); `files`: where each source was read (lesson key -> path)."""

    pieces: list[Piece]
    sources: dict[str, str]
    alone: bool = False
    files: dict[str, Path] = field(default_factory=dict)

    def own(self) -> dict[str, str]:
        """piece name -> the lesson whose source provides it, for the pieces run as own."""
        return {p.name: p.lesson for p in self.pieces if p.own}

    def practice(self) -> dict:
        """What a practice request sends the child with its arguments (probes.py's
        `_own_pieces`): the own pieces, their files' text, and the pieces with no file,
        which are said missing when called."""
        return {"own": self.own(), "sources": self.sources,
                "missing": {p.name: p.lesson for p in self.pieces if not p.own}}


def find(course: Course, key: str, student_id: str) -> Earlier:
    """What the student's earlier lessons give the assembly lesson `key`."""
    pieces: list[Piece] = []
    sources: dict[str, str] = {}
    for lesson_key, names in course.lesson(key).builds_on.items():
        lesson = course.lesson(lesson_key)
        source, why, record = None, "", None
        if lesson.submissions is None:
            why = "no_file"
        else:
            path = course.path(lesson.submissions) / student_id / lesson.exercise
            got = read_source(path) if path.is_file() else None
            if got is None or got.data is None:  # absent, unreadable or too big
                why = "no_file"
            else:
                text = got.text()
                record = Store(course.path(lesson.out)).load(student_id) if lesson.out else None
                if record is None:
                    why = "no_record"
                elif not record.source_hash:  # stored before results named their file
                    why = "unhashed"
                elif record.source_hash != source_hash(text):
                    why = "changed"
                else:
                    source = text
        for name, parts in names.items():
            if source is None or record is None:
                pieces.append(Piece(name, lesson_key, False, why))
                continue
            lost = [p for p in parts if p in record.parts
                    and record.parts[p].score < record.parts[p].max_score]
            if lost:
                mistakes = [d.title for p in lost
                            if (d := record.parts[p].diagnosis) is not None and d.id]
                pieces.append(Piece(name, lesson_key, False, "lost", lost, mistakes))
            else:
                pieces.append(Piece(name, lesson_key, True))
                sources[lesson_key] = source
    return Earlier(pieces, sources)


def beside(course: Course, key: str, folder: Path) -> Earlier:
    """The pieces a practice run of the assembly lesson `key` takes from the student's
    own files: each earlier lesson's exercise file in `folder` (the course's layout puts
    a student's lessons side by side), read as a submission is. Nothing can stand in
    here, so a piece whose file is absent or unreadable is named ("no_file"); an
    unreadable one is still in `files`, where its lesson's check says why."""
    pieces: list[Piece] = []
    sources: dict[str, str] = {}
    files: dict[str, Path] = {}
    for lesson_key, names in course.lesson(key).builds_on.items():
        path = folder / course.lesson(lesson_key).exercise
        if not path.is_file():
            got = None
        else:
            got, files[lesson_key] = read_source(path), path
        if got is not None and got.data is not None:
            sources[lesson_key] = got.text()
        pieces += [Piece(name, lesson_key, lesson_key in sources,
                         "" if lesson_key in sources else "no_file") for name in names]
    return Earlier(pieces, sources, alone=True, files=files)
