"""One lesson as one run sees it: course.yml's entry and everything computed from it.

A run builds one `LessonContext` and passes it down; every cache of what came from
the lesson's files that outlives a single submission (the references and their
results, the lesson folder's imported modules, the serialised probe requests, the
reference's result sizes) lives here, and so do the pages' compiled templates. The one
other is `reference.lesson_file`'s (a lesson's examples.py, questions.py,
trace_inputs.py, loaded by path), which `reset()` clears too; so `reset()` forgets all
that came from the lesson's files at once: a long-lived Dask worker calls it when they
change, and no module keeps a stale copy. The grader's own strings (strings.STRINGS)
are read once at import: they are not the lesson's.
"""
from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from grader.config import Course, Lesson

if TYPE_CHECKING:
    from jinja2 import Environment

    from grader.judge.reference import LessonRefs


@dataclass
class LessonContext:
    course: Course
    key: str
    # the lesson folder's imported modules (tests and helpers), kept between pytest
    # sessions of this run: their cached inputs stay warm, forked workers inherit them
    modules: dict[str, types.ModuleType] = field(default_factory=dict)
    # serialised probe requests by request key: the same bytes for every student
    frames: dict[str, bytes] = field(default_factory=dict)
    # the size of each value of the reference's result, and their sum, by request key
    expected: dict[str, tuple[dict[str, int], int] | None] = field(default_factory=dict)
    # the recording in the user's cache this context reads where the lesson ships none,
    # and `grader.judge.kept.remember` writes again (None: nothing kept between runs)
    kept: Path | None = None
    # how many results the references held when loaded (`LessonRefs.computed`): the kept
    # recording is written again only when a run computed more
    loaded: int = 0
    _refs: LessonRefs | None = field(default=None, repr=False)
    _version: str | None = field(default=None, repr=False)
    # the templates this run renders its pages with, compiled once (forked workers
    # inherit them) by `pages.feedback.run_templates`; not the lesson's files, so
    # `reset()` keeps them
    pages: Environment | None = field(default=None, repr=False)
    # The autograder zip's run (its `grade` sets it): grade from the lesson's recording.
    # The smallest failing example and the line-of-divergence trace read the
    # reference's side of their fresh inputs from it too (runner.grade_many), so a
    # failing submission alone imports no solution. Only stand-ins load solutions on
    # the trusted side (a composite part's round, an assembly lesson's pieces), after
    # the template has forked and sharing its libraries (sandbox/template.py): before
    # the template, importing the solution beside the grader's and the sandbox's own
    # torch ran Gradescope's 768 MB container out.
    recorded_only: bool = False

    @property
    def lesson(self) -> Lesson:
        return self.course.lesson(self.key)

    @property
    def tests(self) -> Path:
        return self.course.path(self.lesson.tests)

    @property
    def version(self) -> str:
        """The lesson's version (solution, tests, course.yml entry), read once a run."""
        if self._version is None:
            self._version = self.course.version(self.key)
        return self._version

    @property
    def refs(self) -> LessonRefs:
        """The solution and its known mistakes as callers, loaded on first need; a
        recording warms them where the lesson ships one, or the user's cache keeps one."""
        if self._refs is None:
            # imported here: grader.judge.reference imports torch, which a run without work
            # (or before its sandbox is made) must not pay for
            from grader.judge.reference import lesson_refs

            lesson = self.lesson
            recorded = self.course.path(lesson.recorded) if lesson.recorded else self.kept
            self._refs = lesson_refs(
                self.key, self.course.path(lesson.solution) if lesson.solution else None,
                self.tests, recorded)
            self._refs.pieces = self._pieces()
            self.loaded = self._refs.computed()
        return self._refs

    def _pieces(self) -> types.ModuleType | None:
        """An assembly lesson's trusted `model_parts` (course.yml's `builds_on`), its
        stand-ins then answered in-process by the trusted side's probes too; None for
        any other lesson, or where an earlier lesson's solution is absent (a bundle)."""
        from grader.judge import standin

        lesson = self.lesson
        stand_ins = standin.always(self.tests) if lesson.builds_on else None
        solutions = {k: self.course.lesson(k).solution for k in lesson.builds_on}
        if stand_ins is None or any(s is None or not self.course.path(s).exists()
                                for s in solutions.values()):
            return None
        own = self.course.path(lesson.solution) if lesson.solution else None
        nested = getattr(stand_ins, "NESTED", {})
        module = standin.pieces({k: (self.course.path(s), lesson.builds_on[k])
                                 for k, s in solutions.items() if s is not None},
                                (own, list(nested)) if nested and own and own.exists()
                                else None)
        probes = self._refs.probes if self._refs is not None else None
        if probes is not None and hasattr(probes, "TRUSTED"):
            # (a lesson's probes module, typed as any module: its TRUSTED is ours to set)
            memo = self._refs.stand_in_memo if self._refs is not None else None
            probes.TRUSTED = (  # type: ignore[attr-defined]
                lambda: standin.Answerer(module, stand_ins.ANSWERS, memo=memo,
                                         only=standin.only(stand_ins)))
        return module

    def loaded_refs(self) -> LessonRefs | None:
        """The references if this run has loaded them, else None (nothing is loaded)."""
        return self._refs

    def reset(self) -> None:
        """Forget everything computed from the lesson's files (they changed), and the
        lesson's modules pytest left in sys.modules under their files' names."""
        tests = self.tests.resolve()
        names = {p.stem for p in tests.rglob("*.py")} if tests.is_dir() else set()
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None) or ""
            if name in names or (file and Path(file).resolve().is_relative_to(tests)):
                del sys.modules[name]
        self.modules.clear()
        self.frames.clear()
        self.expected.clear()
        self._refs = None
        self.loaded = 0
        self._version = None
        reference = sys.modules.get("grader.judge.reference")  # never imported: nothing cached
        if reference is not None:
            reference.lesson_file.cache_clear()
