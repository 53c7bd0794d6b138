"""What an audit found: each mutant's verdict, counts per operator, the kill rate and
the speed; written to audit.json and shown as a table with every survivor's diff."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from grader.lesson.equivalents import Equivalent
from grader.lesson.mutants import Mutant
from grader.record import GradeRecord
from grader.store import write_atomic

STATUSES = ("killed", "survived", "equivalent", "stale")


@dataclass
class Verdict:
    mutant: Mutant
    status: str              # one of STATUSES
    score: float
    max_score: float
    failed: list[str]        # the tests that caught it
    passed: list[str]        # the tests it got through
    checks: list[str]        # the checks inside those passed tests
    reason: str = ""         # why the instructor calls it equivalent


def verdict(mutant: Mutant, record: GradeRecord, equivalent: Equivalent | None) -> Verdict:
    """Killed when it scores below full marks; a listed equivalent that is killed is
    stale (the listing is wrong, or the tests grew stronger)."""
    survived = record.score >= record.max_score
    status = ("equivalent" if survived else "stale") if equivalent else \
        ("survived" if survived else "killed")
    passed = [t for t in record.tests if t.passed]
    checks = list(dict.fromkeys(c["name"] for t in passed for c in t.checks))
    failed = [t.name for t in record.tests if not t.passed]
    if not record.tests and record.problem:
        failed = [record.problem]
    return Verdict(mutant, status, record.score, record.max_score, failed,
                   [t.name for t in passed], checks,
                   equivalent.reason if equivalent else "")


@dataclass
class Audit:
    lesson: str
    solution_name: str       # the solution's path, relative to the course
    solution: str            # its text, for the diffs
    verdicts: list[Verdict]
    generated: int           # mutants made (before any sample)
    uncompilable: int
    duplicates: int
    operators: list[str]
    sample: int | None
    seconds_total: float = 0.0    # the whole command: generation, start-up, grading
    seconds_grading: float = 0.0  # first mutant started to last one finished
    unmatched: list[str] = field(default_factory=list)  # listed ids no operator makes

    def counts(self, operator: str | None = None) -> Counter:
        return Counter(v.status for v in self.verdicts
                       if operator is None or v.mutant.operator == operator)

    @property
    def kill_rate(self) -> float:
        """Killed over non-equivalent (a stale listing was killed: it counts as such)."""
        c = self.counts()
        judged = c["killed"] + c["stale"] + c["survived"]
        return (c["killed"] + c["stale"]) / judged if judged else 1.0

    def per_minute(self) -> dict[str, float]:
        n = len(self.verdicts)
        return {"grading": round(60 * n / self.seconds_grading, 1) if self.seconds_grading
                else 0.0,
                "with_startup": round(60 * n / self.seconds_total, 1) if self.seconds_total
                else 0.0}

    def to_json(self) -> dict:
        return {
            "lesson": self.lesson, "solution": self.solution_name,
            "operators": self.operators, "sample": self.sample,
            "generated": self.generated, "graded": len(self.verdicts),
            "uncompilable": self.uncompilable, "duplicates": self.duplicates,
            "counts": {s: self.counts()[s] for s in STATUSES},
            "per_operator": {op: {s: self.counts(op)[s] for s in STATUSES}
                             for op in self.operators_seen()},
            "kill_rate": round(self.kill_rate, 4),
            "mutants_per_minute": self.per_minute(),
            "seconds": {"total": round(self.seconds_total, 2),
                        "grading": round(self.seconds_grading, 2)},
            "unmatched_equivalents": self.unmatched,
            "mutants": [self._mutant_json(v) for v in self.verdicts],
        }

    def operators_seen(self) -> list[str]:
        return list(dict.fromkeys(v.mutant.operator for v in self.verdicts))

    def _mutant_json(self, v: Verdict) -> dict:
        m = v.mutant
        return {"id": m.id, "operator": m.operator, "line": m.line, "col": m.col,
                "status": v.status, "score": v.score, "max_score": v.max_score,
                "change": m.change(self.solution),
                "diff": m.diff(self.solution, self.solution_name),
                "failed_tests": v.failed, "passed_tests": v.passed,
                "passed_checks": v.checks, "reason": v.reason}


def write(audit: Audit, out: Path) -> Path:
    path = out / "audit.json"
    write_atomic(path, json.dumps(audit.to_json(), indent=1, ensure_ascii=False) + "\n")
    return path


def _grouped(names: list[str]) -> str:
    """test_output[a], test_output[b], test_x -> "test_output ×2, test_x" (and so for
    checks named per parameter): a survivor's summary stays a line or two."""
    counts = Counter(name.split("[", 1)[0] for name in names)
    return ", ".join(f"{n} ×{c}" if c > 1 else n for n, c in counts.items()) or "none"


def show(audit: Audit, console: Console, min_kill: float) -> None:
    """The table of counts, the rate against the target, the speed, every survivor."""
    table = Table(title=f"mutation audit of lesson {audit.lesson}")
    for column in ("operator", "mutants", *STATUSES, "kill rate"):
        table.add_column(column, justify="left" if column == "operator" else "right")
    for op in audit.operators_seen():
        table.add_row(op, *_row(audit.counts(op)))
    table.add_row("[bold]all[/]", *_row(audit.counts()), end_section=True)
    console.print(table)
    console.print(f"{audit.generated} mutants made, {len(audit.verdicts)} graded"
                  f"{f' (sample of {audit.sample})' if audit.sample else ''}; "
                  f"{audit.uncompilable} did not compile and {audit.duplicates} repeated "
                  "another (both skipped)")
    speed = audit.per_minute()
    console.print(f"speed: {speed['grading']} mutants/min grading, "
                  f"{speed['with_startup']} mutants/min including start-up "
                  f"({audit.seconds_total:.1f} s in all)")
    for v in audit.verdicts:
        if v.status in ("survived", "stale"):
            _show_one(audit, v, console)
    for mutant_id in audit.unmatched:
        console.print(f"[yellow]note:[/] {escape(mutant_id)} is listed as equivalent but no "
                      "operator makes it now (the solution changed?)")
    ok = audit.kill_rate >= min_kill
    console.print(f"[{'green' if ok else 'red'}]kill rate {audit.kill_rate:.1%}[/] of "
                  f"{sum(audit.counts()[s] for s in ('killed', 'stale', 'survived'))} "
                  f"non-equivalent mutants (target {min_kill:.0%})")


def _row(c: Counter) -> list[str]:
    judged = c["killed"] + c["stale"] + c["survived"]
    rate = f"{(c['killed'] + c['stale']) / judged:.0%}" if judged else "-"
    return [str(sum(c.values())), *(str(c[s]) for s in STATUSES), rate]


def _show_one(audit: Audit, v: Verdict, console: Console) -> None:
    m = v.mutant
    if v.status == "stale":
        console.print(f"\n[yellow]stale equivalent[/] {escape(m.id)}: listed as equivalent "
                      f"but killed by {escape(_grouped(v.failed))}")
        return
    console.print(f"\n[red]survived[/] {escape(m.id)} ({escape(m.operator)}, line {m.line}): "
                  f"{v.score}/{v.max_score}")
    console.print(Syntax(m.diff(audit.solution, audit.solution_name), "diff",
                         theme="ansi_dark", background_color="default", word_wrap=True))
    console.print(f"  passed {len(v.passed)} tests: {_grouped(v.passed)}", markup=False)
    console.print(f"  checks passed: {_grouped(v.checks)}", markup=False)
