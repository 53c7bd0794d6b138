"""An assembly lesson's earlier pieces (grader/judge/earlier.py): a stored result of an
earlier lesson counts only when it was made from the student's file as it is now.
Its `source_hash` is that file's text hashed (store.source_hash, recorded by the run
that graded it); a file edited since, or a result stored without the hash, is no grade
of the file: its pieces are stood in for, and the page says why, en and zh."""
from __future__ import annotations

from pathlib import Path

import yaml

from grader import config
from grader.judge import earlier
from grader.pages.explain import earlier_sentences
from grader.pages.feedback import STRINGS
from grader.record import GradeRecord, PartRecord
from grader.store import Store, dump, source_hash

ROOT = Path(__file__).resolve().parents[2]
RMSNORM = (ROOT / "solutions" / "10_rmsnorm.py").read_text(encoding="utf-8")


def _course(far_course: Path, tmp_path: Path) -> config.Course:
    """The course (its paths absolute) with lesson 10's submissions and OUT under
    tmp_path."""
    data = yaml.safe_load(far_course.read_text(encoding="utf-8"))
    data["lessons"]["10"].update(submissions=str(tmp_path / "subs10"), out=str(tmp_path / "out10"))
    path = tmp_path / "course.yml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), "utf-8")
    return config.load(path)


def _hand_in(course: config.Course, text: str) -> None:
    folder = course.path(course.lesson("10").submissions) / "ana"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "10_rmsnorm.py").write_text(text, encoding="utf-8")


def _store(course: config.Course, hashed: str) -> None:
    """Lesson 10's stored result for ana at full marks, made from a file whose hash is
    `hashed` ("" as a result stored before results named their file)."""
    record = GradeRecord("ana", "10", "graded", 2.0, 2.0,
                         {"norm": PartRecord(2.0, 2.0, 1, 1)}, [], source_hash=hashed)
    store = Store(course.path(course.lesson("10").out))
    store.results_path.mkdir(parents=True, exist_ok=True)
    store.result_path("ana").write_text(dump(record.to_json()), encoding="utf-8")


def _rmsnorm(course: config.Course) -> earlier.Piece:
    return next(p for p in earlier.find(course, "13b", "ana").pieces if p.name == "RMSNorm")


def test_a_result_of_the_file_as_it_is_runs_it_as_the_students_own(far_course, tmp_path):
    course = _course(far_course, tmp_path)
    _hand_in(course, RMSNORM)
    _store(course, source_hash(RMSNORM))
    found = earlier.find(course, "13b", "ana")
    assert next(p for p in found.pieces if p.name == "RMSNorm").own
    assert found.sources["10"] == RMSNORM


def test_a_file_changed_since_its_result_is_stood_in_for_and_the_page_says_why(far_course, tmp_path):
    course = _course(far_course, tmp_path)
    _hand_in(course, RMSNORM)
    _store(course, source_hash(RMSNORM))
    _hand_in(course, RMSNORM.replace("return self.weight * normed.type_as(x)",
                                     "return normed.type_as(x)"))
    piece = _rmsnorm(course)
    assert (piece.own, piece.why) == (False, "changed")
    assert "10" not in earlier.find(course, "13b", "ana").sources  # the new text never runs
    said = {lang: earlier_sentences({"pieces": [piece.to_json()]}, STRINGS[lang])
            for lang in ("en", "zh")}
    assert "changed after its stored grade was made" in said["en"][0], said
    assert "改过" in said["zh"][0], said


def test_a_result_that_names_no_file_is_not_taken_for_the_files(far_course, tmp_path):
    course = _course(far_course, tmp_path)
    _hand_in(course, RMSNORM)
    _store(course, "")
    piece = _rmsnorm(course)
    assert (piece.own, piece.why) == (False, "unhashed")
    said = earlier_sentences({"pieces": [piece.to_json()]}, STRINGS["en"])
    assert "does not say which file it was made from" in said[0], said


def test_the_hash_survives_the_stored_result_and_stays_out_of_scores_json():
    record = GradeRecord("ana", "10", "graded", 2.0, 2.0, {}, [], source_hash="ab12")
    assert GradeRecord.from_json(record.to_json()).source_hash == "ab12"
    assert "source_hash" not in record.score_json()


def test_a_file_saved_with_a_byte_order_mark_is_read_as_its_graded_run_reads_it(
        far_course, tmp_path):
    """Windows editors start a UTF-8 file with a byte-order mark, which the graded run
    drops (runner.read): a student bundle's check (`beside`) and the grader's own lookup
    (`find`) take the same text, so the piece runs in both, not in one alone."""
    course = _course(far_course, tmp_path)
    marked = "\ufeff" + RMSNORM
    _hand_in(course, marked)
    _store(course, source_hash(RMSNORM))  # the graded run hashed the text without it
    assert earlier.find(course, "13b", "ana").sources["10"] == RMSNORM
    folder = course.path(course.lesson("10").submissions) / "ana"
    assert earlier.beside(course, "13b", folder).sources["10"] == RMSNORM
