"""The second lesson (RMSNorm) proves the harness is lesson-agnostic: it is only
course.yml entries, a solution with markers, probes, hidden tests and mistakes. Its
contract (solution full, stub zero, mistakes named) is tests/e2e/test_contract.py."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_grader_package_names_no_lesson():
    """Nothing under grader/ knows lesson 13's parts or API."""
    words = re.compile(r"\b(13_moe|MOEFeedForward|FeedForward|route|dispatch|"
                       r"load_balancing_loss|aux_loss|RMSNorm)\b")
    for path in (ROOT / "grader").rglob("*.py"):
        code = path.read_text(encoding="utf-8")
        hits = [line for line in code.splitlines()
                if words.search(line) and "e.g." not in line]
        assert not hits, (path, hits)
