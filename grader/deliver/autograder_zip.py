"""A Gradescope autograder zip that runs this grader on one submission.

Gradescope unzips it into /autograder/source, runs setup.sh once, then run_autograder
per submission, which calls `run` below: the student's folder
/autograder/submission is copied as the one student of a class, and `run` becomes
the grading process (`grade`, an exec with a clean environment), steered by its
arguments: the recording, container mode, the paths closed to the submission. The
student's record becomes /autograder/results/results.json. The zip holds the grader, a
course.yml trimmed to the one lesson (no roster), and that lesson's solution, stub and
hidden tests; for an assembly lesson, also the solutions and hidden tests of the
lessons it builds on (their course.yml entries trimmed to what `build` keeps): the
grading process answers its stand-ins with those solutions. AUTOGRADER_ROOT moves /autograder (for tests); GRADER_ARGS
adds `grade`'s options (--unsandboxed, --jobs). Where Gradescope's container refuses
bubblewrap's namespaces, the grader runs in container mode by itself: each submission
as the unprivileged user setup.sh creates, with the grader's folders made unreadable
to it. results.json is what the Gradescope export writes for the student.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import stat
import sys
import tempfile
import zipfile
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import yaml

from grader.deliver.torch_pin import CPU_INDEX, torch_pin
from grader.intake.capped import chunks
from grader.sandbox.slot import BASE_UID
from grader.store import Store, safe_name
from grader.text.strings import TEMPLATES

if TYPE_CHECKING:
    from grader.sandbox.template import Template

SETUP = """#!/usr/bin/env bash
# Run once by Gradescope to build the image (Python >= 3.10: its default Ubuntu 22.04
# will do): a venv holding this grader and its dependencies, with torch's CPU build.
# AUTOGRADER_ROOT moves /autograder and SETUP_PYTHON picks the interpreter (for tests).
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip bubblewrap
"${{SETUP_PYTHON:-python3}}" -m venv "$ROOT/venv"
pip="$ROOT/venv/bin/pip"
# The CPU build first: the default index's Linux torch pulls about 20 CUDA packages.
if ! "$pip" install --no-cache-dir --retries 1 --index-url {cpu_index} torch=={torch}
then
  echo "setup: no torch=={torch} from {cpu_index}: the default index's instead"
fi
"$pip" install --no-cache-dir "$ROOT/source"
echo "setup: installed torch $("$pip" show torch | sed -n 's/^Version: //p')"
cuda=$("$pip" list --format=freeze | grep -iE '^(nvidia-|cuda-|triton=)' | tr '\\n' ' ' || true)
echo "setup: CUDA packages pulled: ${{cuda:-none}}"
# Container mode's submission user: the grader runs each submission as uid {uid} (the
# first it claims) where the container refuses namespaces.
if ! id -u {user} >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin --uid {uid} {user}
fi
"""
SUBMISSION_USER = "minimind-student"

RUN = """#!/usr/bin/env bash
# Run by Gradescope for each submission: grade it, write results/results.json.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
cd "$ROOT/source"
exec "${{GRADER_PYTHON:-$ROOT/venv/bin/python}}" \\
    -c "from grader.deliver.autograder_zip import main; main()" --lesson {lesson} --root "$ROOT"{preload}
"""
# What of Gradescope's environment the grading process gets: nothing else (a token in
# it is no business of the grader's)
PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")


SKIP = {"__pycache__", ".pytest_cache"}
# What the zip's course.yml keeps of an assembly lesson's earlier lessons (`build`)
EARLIER_KEYS = ("title", "title_zh", "exercise", "solution", "stub", "tests", "parts")
# Measured (docs/lms.md): Gradescope's default container, and the grader's own peak in it.
GRADESCOPE_MB, GRADER_MB = 768, 400


def _files(base: Path) -> list[Path]:
    if base.is_file():
        return [base]
    return sorted(f for f in base.rglob("*")
                  if f.is_file() and not SKIP.intersection(f.relative_to(base).parts))


def memory_warning(course, lesson_key: str) -> str:
    """Why the lesson's memory limit may not hold on Gradescope, or "": above what the
    container has beside the grader, a hungry submission makes the container run out
    before its own limit stops it."""
    memory_mb = course.limits_config(lesson_key).memory_mb
    if GRADER_MB + memory_mb <= GRADESCOPE_MB:
        return ""
    return (f"lesson {lesson_key}'s limits.memory_mb is {memory_mb}: with the grader's own "
            f"~{GRADER_MB} MB, a hungry submission can exhaust Gradescope's default "
            f"{GRADESCOPE_MB} MB container before its own limit stops it. Set "
            f"lessons.{lesson_key}.limits.memory_mb: 256 in course.yml, or give the "
            "autograder more memory in Gradescope's settings (docs/lms.md).")


def setup_script(course_root: Path) -> str:
    """The zip's setup.sh (its tests run it without building a zip)."""
    pin = torch_pin((course_root / "pyproject.toml").read_text(encoding="utf-8"))
    return SETUP.format(cpu_index=CPU_INDEX, torch=pin,
                        user=SUBMISSION_USER, uid=BASE_UID)


def build(course_root: Path, lesson_key: str, dest: Path) -> Path:
    """Write the zip to dest (a .zip path, or a folder to put `autograder_<lesson>.zip` in)."""
    from grader.config import NOT_SCORED_KEYS, load

    course_root = Path(course_root).resolve()
    course = load(course_root / "course.yml")
    lesson = course.lesson(lesson_key)
    raw = yaml.safe_load((course_root / "course.yml").read_text(encoding="utf-8"))
    entries = {str(k): v for k, v in raw["lessons"].items()}
    raw["lessons"] = {lesson_key: {k: v for k, v in entries[lesson_key].items()
                                   if k not in ("submissions", "out", *NOT_SCORED_KEYS)}}
    # an assembly lesson's earlier lessons: what answering its stand-ins needs (their
    # solutions, `standin.pieces`) and what course.yml's `builds_on` is checked against
    # (their parts, and their hidden tests, which loading course.yml asks for; nothing
    # of them runs); no submissions or results of theirs (the own-code part then
    # stands in for every piece, and says so), and their stubs stay home
    for key in lesson.builds_on:
        raw["lessons"][key] = {k: v for k, v in entries[key].items() if k in EARLIER_KEYS}
    raw.pop("roster", None)
    if lesson.written:  # issue 55: the result carries the shapes question's mark and
        # says the text ones await a TA; their rubric notes (model answers) stay home
        raw["lessons"][lesson_key]["written"] = {
            qid: q.model_dump(mode="json", exclude={"rubric": {"__all__": {"note"}}})
            for qid, q in lesson.written.items()}
    recording = f"reference/{safe_name(lesson_key)}.bin"
    raw["lessons"][lesson_key]["recorded"] = recording
    sources = [course_root / "pyproject.toml", course_root / "grader"]
    sources += [course.solution(lesson), course.path(lesson.stub), course.path(lesson.tests)]
    for key in lesson.builds_on:
        sources += [course.solution(course.lesson(key)), course.path(course.lesson(key).tests)]
    dest = Path(dest)
    if dest.suffix != ".zip":
        dest = dest / f"autograder_{lesson_key}.zip"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (("setup.sh", setup_script(course_root)), ("run_autograder", RUN.format(
                lesson=shlex.quote(lesson_key), preload="".join(
                    f" --preload {shlex.quote(m)}" for m in lesson.preload)))):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16
            z.writestr(info, text)
        z.writestr("course.yml", yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
        z.writestr(recording, _recording(course, lesson_key))
        for src in sources:
            for f in _files(src.resolve()):
                z.write(f, f.relative_to(course_root).as_posix())
        if not TEMPLATES.is_relative_to(course_root / "grader"):  # else shipped above
            for f in _files(TEMPLATES):  # where the zip's grader finds them: beside it
                z.write(f, (Path("templates") / f.relative_to(TEMPLATES)).as_posix())
    return dest


def _recording(course, lesson_key: str) -> bytes:
    """The reference's and every known mistake's results for the hidden tests, the
    reference's side of the fresh inputs feedback is shown on, and the mistakes'
    signatures, computed now (the solution graded as a student, as every run
    does first): a run on Gradescope then loads them instead of importing the solution
    and its mistakes and computing them again for each submission."""
    from grader.judge import divergence, runner
    from grader.judge.runner import grade_solution
    from grader.judge.context import LessonContext
    from grader.judge.reference import Caller, lesson_digest, recording

    lesson = course.lesson(lesson_key)
    ctx = LessonContext(course, lesson_key)
    grade_solution(ctx)
    refs = ctx.refs
    # Each known mistake graded as a submission, with a cache of its own: what grading
    # one asks of the trusted side beyond its own part's tests (a composite part
    # compares with the mistakes established in the other parts) is then recorded
    # too, so that no single known mistake makes a run import the solution after all.
    runner.run_tests(ctx, [(Caller(v.caller.module, refs.probes), lambda raw: None)
                           for v in refs.variants])
    # the fresh inputs of the smallest examples and of the traces, the reference's side
    divergence.fresh_for_recording(ctx)
    return recording(refs, lesson_digest(course.path(lesson.solution),
                                         course.path(lesson.tests)))


def _student_id(root: Path) -> str:
    """Gradescope's submission_metadata.json names the submitter (sid, else email); it
    becomes a folder name, so it is made a safe one (`../x` would land elsewhere)."""
    try:
        users = json.loads((root / "submission_metadata.json").read_text())["users"]
        return safe_name(str(users[0].get("sid") or users[0].get("email") or "student"))
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return "student"


# Opening what a submission holds, as root: never through a link (the last component
# is opened relative to its folder's descriptor, so no folder on the way is one), and
# never blocking (a FIFO would hang the run).
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def copy_submission(src: Path, dest: Path) -> None:
    """Copy the student's folder to `dest` for `grader run`, reading nothing a link
    points to: this runs as root, so a link to the solution or to /etc/shadow, followed,
    would be graded as the student's file. A link is copied as a link (its target's
    text only) and a FIFO, socket or device as an empty FIFO, so that intake names each
    in the student's feedback and the run's summary, as it does for any class; a file
    over intake's size limit is copied as a sparse file of its size, which intake
    refuses in the same words. Folders and entries stop just past intake's own caps."""
    from grader.intake.submissions import MAX_DEPTH, MAX_ENTRIES
    from grader.intake.capped import MAX_FILE

    try:
        top = os.open(src, _OPEN | os.O_DIRECTORY)
    except OSError:
        if stat.S_ISLNK(os.lstat(src).st_mode):
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), dest)
            return
        raise
    dest.mkdir(parents=True)
    queue: deque[tuple[int, Path, int]] = deque([(top, dest, 0)])
    left = MAX_ENTRIES + 1
    try:
        while queue:
            folder, out, depth = queue.popleft()
            try:
                for name in sorted(os.listdir(folder))[:max(left, 0)]:
                    left -= 1
                    _copy_entry(folder, name, out / name, depth, queue,
                                depth < MAX_DEPTH + 1, MAX_FILE)
            finally:
                os.close(folder)
    finally:
        for folder, _, _ in queue:
            os.close(folder)


def _copy_entry(folder: int, name: str, target: Path, depth: int,
                queue: deque[tuple[int, Path, int]], deeper: bool, max_file: int) -> None:
    """One entry of the folder open as `folder`, copied to `target` (see above)."""
    st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(name, dir_fd=folder), target)
    elif stat.S_ISDIR(st.st_mode):
        target.mkdir()
        if deeper:
            queue.append((os.open(name, _OPEN | os.O_DIRECTORY, dir_fd=folder), target,
                          depth + 1))
    elif stat.S_ISREG(st.st_mode):
        fd = os.open(name, _OPEN, dir_fd=folder)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # swapped since: not the file it was
                os.mkfifo(target)
                return
            with open(target, "wb") as dst:
                if st.st_size > max_file:
                    dst.truncate(st.st_size)
                else:  # at most one byte over, should it grow meanwhile
                    dst.writelines(chunks(fd, max_file))
        finally:
            os.close(fd)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # intake's "newest"
    else:
        os.mkfifo(target)


def run(root: Path, lesson_key: str, preload: tuple[str, ...] = ()) -> NoReturn:
    """Copy the submission, then become the grading process (`grade`, an exec): none
    of Gradescope's environment but PASSED_ENV goes with it, and no wrapper waits
    beside it in the container's memory. `preload`: the lesson's, which run_autograder
    names (`build` wrote them from course.yml), for the template."""
    source = root / "source"
    sid = _student_id(root)
    work = Path(tempfile.mkdtemp(prefix="grader-"))
    copy_submission(root / "submission", work / "submissions" / sid)
    # Gradescope's container is the grader's alone: container mode where it refuses
    # namespaces, with what the submission must not read named
    private = [source, root / "submission", root / "results", root / "submission_metadata.json"]
    argv = [sys.executable, "-c", "from grader.deliver.autograder_zip import grade; grade()",
            "--lesson", lesson_key, "--work", str(work), "--student", sid,
            "--results", str(root / "results" / "results.json"),
            *[a for m in preload for a in ("--preload", m)],
            *[a for p in private for a in ("--private", str(p))],
            *shlex.split(os.environ.get("GRADER_ARGS", ""))]
    os.chdir(source)
    sys.stdout.flush()
    os.execve(sys.executable, argv, {k: os.environ[k] for k in PASSED_ENV if k in os.environ})


def _results(course, lesson_key: str, scores, folder: Path) -> str:
    """The one student's results.json, as the Gradescope export writes it. A record
    with nothing handed in gets none there (a class's export has no Gradescope
    submission to attach it to); here there is one, so its results say so."""
    from grader.deliver.export.exporter import ExportOptions
    from grader.deliver.export.gradescope import Gradescope, results
    from grader.intake.roster import Match
    from grader.pages.feedback import templates

    options = ExportOptions(course, lesson_key, folder, Match(entries={}), templates(),
                            course.language)
    written = Gradescope().export(scores, options).written
    if written:
        return written[0].read_text(encoding="utf-8")
    return json.dumps(results(course, lesson_key, scores.students[0], options.pages),
                      indent=1, ensure_ascii=False)


class _Printed:
    """What the grading tells, printed for the run's log (Gradescope's stdout, which
    staff see): `grading.Events`."""

    def note(self, text: str) -> None:
        print(f"note: {text}")

    def warn(self, text: str) -> None:
        print(f"warning: {text}")

    def unsandboxed(self) -> None:
        print("warning: the submission runs without the sandbox (--unsandboxed)")

    @contextlib.contextmanager
    def grading(self, total: int) -> Iterator[Callable[[str, dict], None]]:
        yield lambda kind, info: None


def grade(argv: list[str] | None = None) -> None:
    """The grading process of a Gradescope run (`run` execs it, in the zip's folder):
    the template first (sandbox/template.py), before anything private is read, then
    the one submission in `--work` graded from the zip's recording, in container mode
    where the container refuses namespaces, with the `--private` paths closed to the
    submission there; its results.json written to `--results` as the Gradescope export
    writes it. Exit 1 without one: Gradescope then flags the run for staff."""
    parser = argparse.ArgumentParser(description="grade one Gradescope submission")
    parser.add_argument("--lesson", required=True)
    parser.add_argument("--work", type=Path, required=True,
                        help="the run's folder: submissions/STUDENT, then out/ (removed)")
    parser.add_argument("--student", required=True, help="the submission's student id")
    parser.add_argument("--results", type=Path, required=True, help="results.json's path")
    parser.add_argument("--private", type=Path, action="append", default=[],
                        help="a path the submission must not read (container mode)")
    parser.add_argument("--unsandboxed", action="store_true",
                        help="grade without the sandbox where it cannot be set up")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--preload", action="append", default=[],
                        help="a library the lesson's zygote imports (course.yml's preload)")
    args = parser.parse_args(argv)
    from grader.sandbox.template import Template

    try:
        # imports torch and the preloaded libraries, nothing private read yet; one
        # sandbox, so one zygote
        with Template.start(zygotes=1, preload=tuple(args.preload)) as template:
            text = _graded(args, template)
    finally:
        shutil.rmtree(args.work, ignore_errors=True)
    if text is None:
        sys.exit(1)  # no results.json: Gradescope flags the run for staff
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(text, encoding="utf-8")


def _graded(args: argparse.Namespace, template: Template) -> str | None:
    """`grade`'s grading: the student's results.json, or None (said why on stderr)."""
    from grader.config import load
    from grader.record import ClassScores
    from grader.run import grading

    course = load(Path("course.yml").resolve())
    out = args.work / "out"
    try:
        graded = grading.grade_lesson(
            course, args.lesson, args.work / "submissions", out, jobs=args.jobs,
            events=_Printed(), unsandboxed=args.unsandboxed, container=True,
            recorded_only=True, private=tuple(args.private), template=template)
    except grading.GradingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    for failure in graded.summary.worker_failures:
        print(f"worker failure: {failure}", file=sys.stderr)
    store = Store(out)
    scores = ClassScores.from_json(json.loads(store.scores_path.read_text(encoding="utf-8")))
    student = next((s for s in scores.students if s.student_id == args.student), None)
    if student is None:  # the grader failed on it (its output above says why)
        print("the grading ended without grading the submission", file=sys.stderr)
        return None
    stored = store.load(args.student)  # the whole record: scores.json leaves examples out
    if stored is not None:
        student.examples = stored.examples
    scores.students = [student]
    return _results(course, args.lesson, scores, args.work / "export")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", required=True)
    parser.add_argument("--root", type=Path,
                        default=Path(os.environ.get("AUTOGRADER_ROOT", "/autograder")))
    parser.add_argument("--preload", action="append", default=[])
    args = parser.parse_args()
    run(args.root, args.lesson, tuple(args.preload))


if __name__ == "__main__":
    main()
