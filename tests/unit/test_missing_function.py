"""A submission without a function the stub defines is told where it is in the stub."""
from pathlib import Path

from grader.pages import feedback
from grader.record import TestRecord

STUB = "import torch\n\n\nclass Layer:\n    pass\n\n\ndef helper(x):\n    raise NotImplementedError()\n"


def failing(message: str) -> TestRecord:
    return TestRecord(name="test_x", part="p", practice=False, outcome="failed",
                      error={"kind": "exception", "message": message})


def test_missing_names_found_in_the_stub(tmp_path: Path):
    (tmp_path / "stub.py").write_text(STUB)
    stub = feedback.Stub("exercises/x.py", tmp_path / "stub.py")
    tests = [failing("AttributeError: module 'submission' has no attribute 'helper'"),
             failing("NameError: name 'helper' is not defined"),
             failing("AttributeError: module 'submission' has no attribute 'absent'"),
             failing("TypeError: Layer() takes no arguments")]
    assert feedback.missing_from_stub(tests, stub) == [
        {"name": "helper", "file": "exercises/x.py", "line": 8}]
    assert feedback.missing_from_stub(tests[2:], stub) == []
    assert feedback.missing_from_stub(tests, None) == []


def test_a_stub_that_does_not_parse_points_nowhere(tmp_path: Path):
    (tmp_path / "stub.py").write_text("def (:\n")
    stub = feedback.Stub("exercises/x.py", tmp_path / "stub.py")
    assert feedback.missing_from_stub([failing("name 'helper' is not defined")], stub) == []
