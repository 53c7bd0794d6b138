"""course.yml: the course, its lessons, parts, points, tolerances and limits.

Validated with pydantic on load; any wrong key or type is reported with its path
in the file and its line, e.g. `course.yml:14: lessons.13.parts.ffn.points: …`.
"""
from __future__ import annotations

from dataclasses import dataclass

import difflib
import hashlib
import re
import zoneinfo
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, ValidationError,
                      field_validator, model_validator)

from grader import points as exact
from grader.lesson import testfile
from grader.lesson.release import SHAPE_FIELDS
from grader.sandbox.limits import Limits
from grader.text import Language
from grader.text.yamlread import LOADER


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tolerance(Strict):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0, default=0.0)


_LIMITS = Limits()  # the defaults are the sandbox's (sandbox/limits.py), declared there once


class LimitsConfig(Strict):
    """The limits course.yml may set: every field of `Limits` but `received_mb` (the
    protocol's own budget, not a course's choice), with its default."""
    test_wall_s: float = Field(gt=0, default=_LIMITS.test_wall_s)
    submission_wall_s: float = Field(gt=0, default=_LIMITS.submission_wall_s)
    cpu_s: int = Field(gt=0, default=_LIMITS.cpu_s)
    memory_mb: int = Field(gt=0, default=_LIMITS.memory_mb)
    processes: int = Field(gt=0, default=_LIMITS.processes)
    file_size_mb: int = Field(gt=0, default=_LIMITS.file_size_mb)
    scratch_mb: int = Field(gt=0, default=_LIMITS.scratch_mb)
    output_kb: int = Field(gt=0, default=_LIMITS.output_kb)

    def limits(self) -> Limits:
        return Limits(**self.model_dump())


@dataclass(frozen=True)
class Budget:
    """What `grader similarity` may spend on one class (course.yml `similarity`, whose
    defaults these are): a hostile file must not slow the TA's run or swell the page.
    A real solution is about 5 KB; a class of 300 takes about a minute (a file's
    fingerprint 31 ms, a pair 1.3 ms, on a quiet machine)."""
    seconds: float = 300.0  # comparing the class; the pairs left then are not compared
    file_kb: int = 64       # of each file, only this much is compared and shown
    page_kb: int = 1024     # similarity.html: pairs, most similar first, while they fit


# no more of a file than intake reads of a source (intake.capped.MAX_SOURCE, 1 MiB; a
# test holds the two equal: config sits below intake and cannot import it)
MAX_FILE_KB = 1024
_BUDGET = Budget()


class SimilarityConfig(Strict):
    """`grader similarity`'s budget for each class it compares (similarity.Budget). At
    the course's top level, not under `defaults`: it decides no score, so changing it
    regrades nobody."""
    seconds: float = Field(gt=0, default=_BUDGET.seconds)
    file_kb: int = Field(gt=0, le=MAX_FILE_KB, default=_BUDGET.file_kb)
    page_kb: int = Field(gt=0, default=_BUDGET.page_kb)

    def budget(self) -> Budget:
        return Budget(**self.model_dump())


def _exact(points: float) -> float:
    """Refused at load, with the nearest good value, not when the first test is scored."""
    if (why := exact.problem(points)) is not None:
        raise ValueError(why)
    return points


# points as course.yml gives them (a part's, a question's, a rubric item's): positive,
# and a whole number of the grader's units
Points = Annotated[float, Field(gt=0), AfterValidator(_exact)]


def title_in(item: Part | Question | Lesson | Course, language: str) -> str:
    """A part's, check question's, lesson's or course's title in `language`: its
    `title_zh` on Chinese pages where given, else `title`."""
    return (item.title_zh if language == "zh" else "") or item.title


class Part(Strict):
    points: Points
    title: str = ""
    title_zh: str = ""
    visibility: Literal["visible", "hidden", "after_due_date", "after_published"] = "visible"


class RubricItem(Strict):
    """One thing a good answer does, worth `points`; a TA's mark is the applied items' sum."""
    id: str = Field(pattern=r"^[a-z0-9_]+$")
    points: Points
    description: str
    description_zh: str = ""
    note: str = ""  # for the TA only (model answers): never on a student's page


class ShapeField(Strict):
    """One field of a shapes question: its shape over the shapes question's names
    (judge/shapes.py's NAMES, e.g. "[B, P + S, n_kv_heads, head_dim]"), and why it is
    so, which the page says where an answer is wrong."""
    shape: str
    why: str
    why_zh: str = ""


def shape_fields(shapes: dict[str, ShapeField]) -> tuple[str, ...]:
    """A shapes question's fields, in the stub's order: those its `shapes` names, or
    without them lesson 13's five."""
    return tuple(shapes) or SHAPE_FIELDS


class Question(Strict):
    """One of a lesson's check questions: `text`, marked by a TA against its rubric, or
    `shapes`, marked by the grader (grader/shapes.py), each field an equal share: the
    fields `shapes` names, or without it lesson 13's five (the MoE layer's)."""
    points: Points
    title: str
    title_zh: str = ""
    text: str
    text_zh: str = ""
    kind: Literal["text", "shapes"]
    rubric: list[RubricItem] = []
    shapes: dict[str, ShapeField] = {}

    def fields(self) -> tuple[str, ...]:
        """A shapes question's fields, in the stub's order."""
        return shape_fields(self.shapes)

    @model_validator(mode="after")
    def _marked(self) -> Question:
        """A text question's rubric adds up to its points; a shapes question's points
        split into its fields exactly, in whole 1/1024 units."""
        if self.kind == "text":
            if self.shapes:
                raise ValueError("a `text` question has no `shapes`")
            if not self.rubric:
                raise ValueError("a `text` question needs rubric items")
            ids = [r.id for r in self.rubric]
            if len(set(ids)) != len(ids):
                raise ValueError(f"rubric item ids repeat: {', '.join(ids)}")
            total = sum(exact.units(r.points, "rubric") for r in self.rubric)
            if total != exact.units(self.points, "points"):
                raise ValueError(f"the rubric's items add up to {exact.as_points(total)!r}, "
                                 f"not the question's {self.points!r} points")
        else:
            if self.rubric:
                raise ValueError("a `shapes` question is marked by the grader: no rubric")
            n = len(self.fields())
            if exact.units(self.points, "points") % n:
                raise ValueError(f"{self.points} does not split into {n} equal shares of "
                                 f"whole 1/{exact.UNIT.denominator} points (e.g. 1.25, 2.5, 5)")
        return self


OFFSET = re.compile(r"^\+([1-9][0-9]*)([mhd])$")
OFFSET_MINUTES = {"m": 1, "h": 60, "d": 24 * 60}


def offset_minutes(text: str) -> int:
    """"+24h", "+90m", "+7d" as minutes after the due date (a late window's `until`)."""
    m = OFFSET.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not an offset after the due date like +30m, +24h "
                         "or +7d")
    return int(m[1]) * OFFSET_MINUTES[m[2]]


class LateWindow(Strict):
    """Up to `until` after the due date in effect, a late file earns `credit` % of its
    score."""
    until: str
    credit: float = Field(ge=0, le=100)

    @field_validator("until")
    @classmethod
    def _offset(cls, until: str) -> str:
        offset_minutes(until)
        return until

    @property
    def minutes(self) -> int:
        return offset_minutes(self.until)


class LatePolicy(Strict):
    """The late rule of one lesson (grader/judge/final.py applies it): who applies it
    (`grader`, `lms` or `none`, so it is applied exactly once), a grace period, credit
    windows counted from the due date in effect, and the credit after the last."""
    applied_by: Literal["grader", "lms", "none"]
    grace_minutes: int = Field(ge=0, default=0)
    windows: list[LateWindow] = []
    after_last: float = Field(ge=0, le=100, default=0)

    @model_validator(mode="after")
    def _ordered(self) -> LatePolicy:
        """Windows end one after another, past the grace period, and never give more
        credit than the one before (a later file never earns more)."""
        ends = [w.minutes for w in self.windows]
        if any(b <= a for a, b in zip(ends, ends[1:])):
            raise ValueError("the windows' `until` must grow: "
                             + ", ".join(w.until for w in self.windows))
        if ends and ends[0] <= self.grace_minutes:
            raise ValueError(f"the first window ends at {self.windows[0].until}, inside "
                             f"the grace period of {self.grace_minutes} minutes")
        credits = [w.credit for w in self.windows] + [self.after_last]
        if any(b > a for a, b in zip(credits, credits[1:])):
            raise ValueError("a later window gives more credit than an earlier one: "
                             + ", ".join(f"{c:g}" for c in credits))
        return self


def when_of(text: str, due: datetime | None, zone: tzinfo) -> datetime:
    """An offset after `due` (+24h, +7d) or a date and time (without an offset: in
    `zone`): a regrade window's ends."""
    if text.startswith("+"):
        if due is None:
            raise ValueError(f"{text!r} counts from the lesson's `due`, which it has not")
        return due + timedelta(minutes=offset_minutes(text))
    when = datetime.fromisoformat(text)
    return when if when.tzinfo else when.replace(tzinfo=zone)


class RegradeWindow(Strict):
    """When students may ask for a regrade: offsets from the lesson's `due` or dates."""
    opens: str | None = None
    closes: str | None = None

    @field_validator("opens", "closes")
    @classmethod
    def _when(cls, text: str | None) -> str | None:
        if text is not None:
            try:
                when_of(text, datetime.now(timezone.utc), timezone.utc)
            except ValueError:
                raise ValueError(f"{text!r} is neither an offset after the due date like "
                                 "+24h or +7d nor a date and time like 2026-10-10 23:59") \
                    from None
        return text


DEFAULT_TOLERANCES = {
    "float32": Tolerance(atol=1e-5, rtol=1e-4),
    "float64": Tolerance(atol=1e-10, rtol=1e-8),
}


class Lesson(Strict):
    title: str
    title_zh: str = ""
    exercise: str = Field(description="the file name students submit, e.g. 13_moe.py")
    solution: Path | None = None  # None in a student bundle, which has `recorded`
    recorded: Path | None = None  # reference results of the practice tests (no solution)
    stub: Path
    tests: Path
    provides: list[str] = ["torch", "numpy"]
    preload: list[str] = ["torch"]  # imported once per warm worker, not per student
    parts: dict[str, Part]
    tolerances: dict[str, Tolerance] = {}
    limits: LimitsConfig | None = None
    submissions: Path | None = None
    out: Path | None = None
    due: datetime | None = None
    canvas_assignment_id: int | None = None  # the Canvas column `Title (id)`
    moodle_item: str | None = None           # the Moodle grade item's name
    moodle_worksheet: Path | None = None     # the assignment's grading worksheet (CSV)
    correct: Path | None = None  # correct variants (*.py) for `grader selftest`, `tolerance`
    written: dict[str, Question] = {}  # the check questions students answer in the file
    late: LatePolicy | None = None  # the late rule: applied at every run, after grading
    regrades: RegradeWindow | None = None  # when `grader regrade` takes a request
    # an assembly lesson's earlier pieces: lesson key -> {name its stub imports from that
    # lesson: the parts of that lesson it rests on}. grader/judge/standin.py builds the
    # trusted side's `model_parts` of them; grader/judge/earlier.py finds a student's own
    builds_on: dict[str, dict[str, list[str]]] = {}

    @field_validator("written")
    @classmethod
    def _question_ids(cls, written: dict[str, Question]) -> dict[str, Question]:
        """Ids are `q1`, `q2`, …: the stub's `ANSWER_Q1` … name them."""
        for qid in written:
            if not re.fullmatch(r"q[1-9][0-9]*", qid):
                raise ValueError(f"question id {qid!r} is not q1, q2, …")
        return written

    @model_validator(mode="after")
    def _late_needs_due(self) -> Lesson:
        """The late rule's windows count from `due`: without one, nothing is late."""
        if self.late is not None and self.due is None:
            raise ValueError("`late` needs the lesson's `due`")
        return self

    @field_validator("parts")
    @classmethod
    def _some_parts(cls, parts: dict[str, Part]) -> dict[str, Part]:
        if not parts:
            raise ValueError("a lesson needs at least one part")
        return parts

    @property
    def max_score(self) -> float:
        return sum(p.points for p in self.parts.values())

    @property
    def written_points(self) -> float:
        return exact.as_points(sum(exact.units(q.points, "question")
                                   for q in self.written.values()))

    @property
    def probes(self) -> Path:
        return self.tests / "probes.py"


# A lesson's keys that decide no code score, which stay on the staff's machine: where
# its scores go in an LMS, the correct variants selftest grades, and the check
# questions (marked again at every run, grader/written.py, so editing a rubric regrades
# no code; their rubric notes are model answers), the late rule (applied again at
# every run, grader/judge/final.py) and the regrade window
NOT_SCORED_KEYS = {"canvas_assignment_id", "moodle_item", "moodle_worksheet", "correct",
                   "written", "late", "regrades"}


class Defaults(Strict):
    limits: LimitsConfig = LimitsConfig()
    tolerances: dict[str, Tolerance] = {}


class Student(Strict):
    name: str = ""
    email: str = ""
    lms_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""


class LtiConfig(Strict):
    """Where `grader upload --to lti` sends scores: the tool's registration on one
    platform. The private key is named (a file or an environment variable), never
    written here, so course.yml can be committed."""
    client_id: str = Field(min_length=1)
    token_url: str = Field(pattern=r"^https?://")
    lineitems_url: str = Field(pattern=r"^https?://")
    deployment_id: str | None = None
    audience: str | None = None  # the assertion's aud when the platform wants other than token_url
    key_file: Path | None = None
    key_env: str | None = None
    key_id: str | None = None

    @model_validator(mode="after")
    def _one_key(self) -> LtiConfig:
        if (self.key_file is None) == (self.key_env is None):
            raise ValueError("give exactly one of key_file and key_env")
        return self


class Course(Strict):
    course: str
    title: str = ""
    title_zh: str = ""       # the title on Chinese pages (else `title`)
    language: Language = "en"
    defaults: Defaults = Defaults()
    lessons: dict[str, Lesson]
    roster: dict[str, Student] | Path | None = None
    nbgrader_db: Path | None = None  # an existing gradebook to write scores into
    missing: Literal["blank", "zero"] = "blank"  # a missing submission's score in exports
    moodle_identifier: Literal["username", "email", "idnumber"] = "username"
    timezone: str | None = None  # where an LMS's times without an offset were written
    lti: LtiConfig | None = None
    similarity: SimilarityConfig = SimilarityConfig()
    root: Path = Path(".")

    @model_validator(mode="after")
    def _builds_on_lessons(self) -> Course:
        """An assembly lesson builds on lessons of this course, never on itself."""
        for key, lesson in self.lessons.items():
            for earlier, pieces in lesson.builds_on.items():
                if earlier == key or earlier not in self.lessons:
                    raise ValueError(f"lesson {key}'s builds_on names {earlier!r}, which is "
                                     "not another lesson of this course")
                for name, parts in pieces.items():
                    unknown = [p for p in parts if p not in self.lessons[earlier].parts]
                    if unknown or not parts:
                        raise ValueError(f"lesson {key}'s builds_on: {name} rests on parts "
                                         f"of lesson {earlier}, and {unknown or 'none'} are "
                                         "not its parts")
        return self

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, name: str | None) -> str | None:
        if name is not None:
            try:
                zoneinfo.ZoneInfo(name)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"{name!r} is not a time zone name (e.g. Asia/Shanghai)") \
                    from None
        return name

    def lms_zone(self, key: str) -> tzinfo:
        """Where an LMS's times without an offset (Moodle's worksheet) were written:
        course.yml's `timezone`, else the lesson's `due`'s offset, else UTC."""
        if self.timezone is not None:
            return zoneinfo.ZoneInfo(self.timezone)
        due = self.lesson(key).due
        return due.tzinfo if due is not None and due.tzinfo is not None else timezone.utc

    def due(self, key: str) -> datetime | None:
        """The lesson's `due`; one without an offset is in `timezone`, else UTC."""
        due = self.lesson(key).due
        return due if due is None or due.tzinfo else due.replace(tzinfo=self.lms_zone(key))

    def lesson(self, key: str) -> Lesson:
        if key not in self.lessons:
            known = ", ".join(sorted(self.lessons))
            raise ConfigError(f"course.yml has no lesson {key!r} (it has: {known})")
        return self.lessons[key]

    def limits_config(self, key: str) -> LimitsConfig:
        """The lesson's limits as course.yml sets them: its own entries over the defaults."""
        lesson = self.lesson(key)
        merged = {**self.defaults.limits.model_dump(),
                  **(lesson.limits.model_dump(exclude_unset=True) if lesson.limits else {})}
        return LimitsConfig(**merged)

    def limits(self, key: str):
        return self.limits_config(key).limits()

    def tolerances(self, key: str) -> dict[str, Tolerance]:
        return {**DEFAULT_TOLERANCES, **self.defaults.tolerances,
                **self.lesson(key).tolerances}

    def path(self, p: Path) -> Path:
        return p if p.is_absolute() else self.root / p

    def folder(self, lesson_key: str, given: Path | str | None,
               field: Literal["out", "submissions"]) -> Path | None:
        """A lesson's OUT or class, with the one precedence every command and the API
        use: the one given (an option, an argument), else the lesson's `field` in
        course.yml, else None (the caller says which to give)."""
        if given is not None:
            return Path(given)
        default = getattr(self.lesson(lesson_key), field)
        return None if default is None else self.path(default)

    def solution(self, lesson: Lesson) -> Path:
        """The lesson's solution file, for the tools that run or read it (a student
        bundle's course.yml has none: it has `recorded`)."""
        if lesson.solution is None:
            raise ConfigError("this lesson gives no `solution` in course.yml (a student "
                              "bundle has only `recorded`)")
        return self.path(lesson.solution)

    def version(self, key: str) -> str:
        """Changes whenever anything that decides a lesson's scores changes (where the
        scores go in an LMS does not: setting `moodle_worksheet` regrades nobody)."""
        lesson = self.lesson(key)
        h = hashlib.sha256(lesson.model_dump_json(exclude=NOT_SCORED_KEYS).encode())
        h.update(self.defaults.model_dump_json().encode())
        for base in (lesson.solution, lesson.recorded, lesson.tests):
            if base is None or not self.path(base).exists():
                continue
            base = self.path(base)
            for f in inputs(base):
                h.update(str(f.relative_to(base.parent)).encode() + b"\0" + f.read_bytes())
        return h.hexdigest()[:16]


def inputs(base: Path) -> list[Path]:
    """Every file of a lesson's tests folder decides its scores (mistakes.yml names the
    mistakes, a data file feeds a test), not only *.py; bytecode caches don't."""
    if not base.is_dir():
        return [base]
    return sorted(f for f in base.rglob("*") if f.is_file() and f.suffix != ".pyc"
                  and "__pycache__" not in f.relative_to(base).parts)


class ConfigError(Exception):
    """course.yml is missing, unreadable or invalid; the message says where."""


def _line_of(node: yaml.Node | None, loc: tuple) -> int | None:
    """Follow a pydantic error location through the YAML node tree to a line number."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if k.value == str(key):
                    node, line = v, k.start_mark.line + 1
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def load(path: Path | str = "course.yml") -> Course:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    try:
        node = yaml.compose(text, Loader=LOADER)
        data = yaml.load(text, Loader=LOADER)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping (course:, lessons:, …)")
    if isinstance(data.get("lessons"), dict):  # lesson numbers are keys, whatever YAML made of them
        data["lessons"] = {str(k): v for k, v in data["lessons"].items()}
    try:
        course = Course(**data, root=path.resolve().parent)
    except ValidationError as exc:
        raise ConfigError(_invalid(path, node, [
            (err["loc"], err["msg"].removeprefix("Value error, ") + _did_you_mean(err))
            for err in exc.errors()])) from None
    problems = _file_problems(course)
    if problems:
        raise ConfigError(_invalid(path, node, problems))
    return course


def _did_you_mean(err: Mapping[str, Any]) -> str:
    """For a key course.yml does not know, the known key it is most likely a typo of."""
    if err.get("type") != "extra_forbidden" or not err.get("loc"):
        return ""
    models, keys = [Strict], set[str]()
    while models:
        model = models.pop()
        models += model.__subclasses__()
        keys.update(model.model_fields)
    near = difflib.get_close_matches(str(err["loc"][-1]), sorted(keys), n=1, cutoff=0.75)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _invalid(path: Path, node: yaml.Node | None, problems: list[tuple[tuple, str]]) -> str:
    """Each problem as `file:line: key.path: what`, under one heading."""
    lines = []
    for loc, msg in problems:
        where, line = ".".join(str(p) for p in loc), _line_of(node, loc)
        lines.append(f"{path}:{line}: {where}: {msg}" if line else f"{path}: {where}: {msg}")
    return "invalid course file\n  " + "\n  ".join(lines)


def _file_problems(course: Course) -> list[tuple[tuple, str]]:
    """What the files course.yml names must hold for grading to start: a solution (or
    a recording), the tests folder, one graded test file per part and no test file of
    a part course.yml lacks (else the first student's scoring would fail), the roster.
    Only names and existence: no file of the class is read here."""
    problems: list[tuple[tuple, str]] = []
    if isinstance(course.roster, Path) and not course.path(course.roster).is_file():
        problems.append((("roster",), f"{course.roster} does not exist (paths are "
                                      "relative to the folder of course.yml)"))
    for key, lesson in course.lessons.items():
        where = ("lessons", key)
        tests = course.path(lesson.tests)
        if not tests.exists():
            problems.append(((*where, "tests"), f"{lesson.tests} does not exist"))
            continue
        found = [p for p in (lesson.solution, lesson.recorded)
                 if p is not None and course.path(p).exists()]
        if not found:
            given = lesson.solution or lesson.recorded
            problems.append(((*where, "solution"), f"{given} does not exist") if given
                            else (where, "needs a solution"))
        graded = {testfile.part_of(f) for f in tests.glob("test_*.py")
                  if not testfile.is_practice(f)}
        practice = {testfile.part_of(f) for f in tests.glob("test_*.py")
                    if testfile.is_practice(f)}
        for part in sorted((graded | practice) - set(lesson.parts)):
            problems.append(((*where, "parts"), f"{lesson.tests} has tests of a part "
                             f"{part!r} ({testfile.name_of(part)} or "
                             f"{testfile.name_of(part, practice=True)}) that "
                             f"is not among the parts: {', '.join(lesson.parts)}"))
        if graded:  # a student bundle has practice tests only
            for part in lesson.parts:
                if part not in graded:
                    problems.append(((*where, "parts", part), f"no graded test file "
                                     f"{lesson.tests / testfile.name_of(part)}: the part's "
                                     "points need at least one hidden test"))
    return problems
