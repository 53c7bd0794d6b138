"""`make test`'s xdist groups (tests/conftest.py): a file's tests run on one worker,
so its module fixtures are made once. Under pytest 9, pytest-xdist's own `loadgroup`
dealt every test alone, and test_escape's module fixture graded its class on each of
three workers."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BY_TEST, BY_TEST_BUT, OUTSIDE_BWRAP_LOCK, outside_bwrap, xdist_group

ROOT = Path(__file__).resolve().parents[2]


def test_a_file_is_a_group_and_a_lesson_file_one_per_lesson():
    assert xdist_group("tests/unit/test_x.py::test_a[1-2]") == "tests/unit/test_x.py"
    assert xdist_group("tests/unit/test_x.py::test_b") == "tests/unit/test_x.py"
    claims = "tests/e2e/test_claims.py"
    assert xdist_group(f"{claims}::test_no_claim_on_a_correct_variant[13]") == f"{claims}[13]"
    assert xdist_group(f"{claims}::test_top_k_of_the_smallest_reads_as_k_equals_e") == claims
    check = "tests/e2e/test_student_check.py"
    assert xdist_group(f"{check}::test_three_checks_agree[13-alice]") == f"{check}[13]"
    layout = "tests/e2e/test_gradescope_layout.py"
    assert layout in BY_TEST_BUT
    assert xdist_group(f"{layout}::test_container_mode_x") == layout
    assert xdist_group(f"{layout}::test_container_mode_y") == layout
    assert xdist_group(f"{layout}::test_stub[py]") == f"{layout}::test_stub[py]"
    assert xdist_group(f"{BY_TEST[0]}::test_x[12]") == f"{BY_TEST[0]}::test_x[12]"
    contract = "tests/e2e/test_contract.py"  # one selftest per lesson: on one worker
    assert xdist_group(f"{contract}::test_lesson_keeps_its_contract[13-todos]") == \
        xdist_group(f"{contract}::test_every_mistake_and_variant_was_graded[13]") == \
        f"{contract}[13]"


@pytest.mark.slow  # runs pytest-xdist on two workers in a subprocess
def test_two_workers_each_run_a_whole_file(tmp_path):
    """Two files of four tests on two workers: each file's tests on one worker (dealt
    test by test, as pytest-xdist's loadgroup did here, they were spread)."""
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / name).write_text(
            "import os\nimport pytest\n\n\n@pytest.mark.parametrize('i', range(4))\n"
            "def test_here(i):\n"
            "    with open(os.environ['WHERE'], 'a') as f:\n"
            "        f.write(f\"{__name__} {os.environ['PYTEST_XDIST_WORKER']}\\n\")\n")
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_xdist_make_scheduler  # noqa: F401\n")
    where = tmp_path / "where.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WHERE": str(where)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-n", "2", "--dist", "loadgroup", "test_a.py", "test_b.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [line.split() for line in where.read_text().splitlines()]
    assert len(ran) == 8
    workers = {module: {w for m, w in ran if m == module} for module, _ in ran}
    assert all(len(w) == 1 for w in workers.values()), ran


def test_container_mode_runs_overlap_and_the_leftover_check_waits_for_them():
    """`outside_bwrap`: while one test holds it shared, another may too, and the test
    that counts leftover processes (it takes it alone) waits."""
    probe = ("import fcntl, os, sys\n"
             "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
             "try:\n"
             "    fcntl.flock(fd, getattr(fcntl, sys.argv[2]) | fcntl.LOCK_NB)\n"
             "    print('got')\n"
             "except BlockingIOError:\n"
             "    print('waits')\n")

    def other(how: str) -> str:
        return subprocess.run([sys.executable, "-c", probe, str(OUTSIDE_BWRAP_LOCK), how],
                              capture_output=True, text=True, timeout=60).stdout.strip()

    with outside_bwrap(shared=True):
        assert other("LOCK_SH") == "got"
        assert other("LOCK_EX") == "waits"
    assert other("LOCK_EX") == "got"
