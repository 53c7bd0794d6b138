# The two commands a new user needs: `make grade` and `make test`.
.PHONY: setup grade lint test test-fast test-py310 test-rootless release-check

setup:
	@scripts/setup.sh

# Grade the bundled sample class of lesson 13 (examples/13 -> out/13).
grade: setup
	.venv/bin/grader run --lesson 13

# ruff with the rules pyproject.toml chooses (pyflakes, syntax errors, bugbear),
# import-linter with its contracts: the stages' layers, no circles, pages without torch,
# and mypy over grader/ with its settings in pyproject.toml ([tool.mypy]).
lint: setup
	.venv/bin/ruff check grader tests scripts
	.venv/bin/lint-imports
	.venv/bin/python -m mypy grader

# The project's whole test suite (unit, end-to-end, adversarial, browser), after lint,
# its files spread over XDIST workers (pytest-xdist; a file's tests on one worker, but
# for the few files tests/conftest.py deals per lesson or per test). Many tests wait on
# a child or a limit, so more workers than cores.
XDIST = -n 3 --dist loadgroup
test: lint
	.venv/bin/python -m pytest -q $(XDIST)

# The lane to run while changing code, chosen by marker (pyproject.toml registers them;
# tests/conftest.py marks each test by its folder): every test that is neither slow,
# end-to-end, adversarial nor fuzz (the unit tests), and the `fast_lane` ones (the
# sample class graded end to end once; no autograder zip, no bundle). CPU-bound: two
# workers, one per core, and no hypothesis plugin (only tests/fuzz uses it).
FAST = fast_lane or not (slow or e2e or adversarial or fuzz)
test-fast: lint
	.venv/bin/python -m pytest -q -n 2 --dist loadgroup -p no:hypothesispytest -m "$(FAST)"

# The unit suite on Python 3.10 as well, the oldest Python supported, and the autograder
# zip run as Gradescope runs it on 3.10 (no CAP_SYS_ADMIN, 768 MB): scripts/test-py310.sh.
test-py310:
	@scripts/test-py310.sh

# The sandbox's adversarial tests again as an unprivileged user the script creates:
# the rootless mode (user namespaces) must give the guarantees root mode gives; and a
# student bundle's check, which runs whole inside bwrap, as a student would run it.
ROOTLESS = tests/adversarial/test_escape.py tests/adversarial/test_isolation.py \
           tests/adversarial/test_limits.py tests/adversarial/test_small_limits.py \
           tests/adversarial/test_memory_sum.py tests/adversarial/test_memory_alone.py \
           tests/adversarial/test_received.py \
           tests/adversarial/test_reply_binding.py tests/adversarial/test_no_reach.py \
           tests/adversarial/test_syscalls.py tests/adversarial/test_leftovers.py \
           tests/e2e/test_bundle.py
test-rootless: setup
	.venv/bin/python tests/adversarial/rootless.py $(ROOTLESS)

release-check: setup
	.venv/bin/grader release --lesson 13 --check
