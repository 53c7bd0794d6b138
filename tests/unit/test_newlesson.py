"""new-lesson's course.yml edit: text in, text out, at the end of the lessons block."""
import difflib

import pytest
import yaml

from grader.author.newlesson import LessonError, course_entry

COURSE = """course: c  # a comment
lessons:
   "1":   # three-space indent
      title: one
      parts:
         a: {points: 1}

# the roster, below the lessons
roster:
  s1: {name: S}
"""


def test_entry_goes_at_the_end_of_the_lessons_block_in_its_indent():
    text = course_entry(COURSE, "2", "2_two", ["b", "c"])
    data = yaml.safe_load(text)
    assert list(data["lessons"]) == ["1", "2"] and list(data["roster"]) == ["s1"]
    assert list(data["lessons"]["2"]["parts"]) == ["b", "c"]
    assert '\n   "2":\n' in text
    ops = difflib.SequenceMatcher(None, COURSE.splitlines(), text.splitlines()).get_opcodes()
    assert {op for op, *_ in ops} == {"equal", "insert"}


def test_entry_at_the_end_of_a_file_without_a_final_newline():
    text = course_entry(COURSE.split("\n\n#")[0], "2", "2_two", ["b"])
    assert list(yaml.safe_load(text)["lessons"]) == ["1", "2"]


def test_an_inline_lessons_mapping_is_refused():
    with pytest.raises(LessonError, match="no block `lessons:`"):
        course_entry("course: c\nlessons: {}\n", "2", "2_two", ["b"])
