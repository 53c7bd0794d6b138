"""What the CLI prints for TAs and instructors: the run's summary, where the pages
are, what intake left out, selftest's findings, an upload's outcome. Student text
(ids, names, messages) is printed as plain text, never as rich markup."""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.table import Table

from grader import config
from grader.judge.plan import Summary
from grader.record import ERROR_STATUSES, TIMEOUT
from grader.store import Store, safe_name
from grader.judge.tally import Line

# Into a file or a pipe, a line is never wrapped mid-phrase (rich would wrap at 80
# columns): whatever reads it gets each message whole.
console = Console(stderr=True, highlight=False, soft_wrap=not sys.stderr.isatty())


class RunConsole:
    """A run's events (`grading.Events`) as the TA sees them: notes, the warning when
    unsandboxed, and a progress bar with the rate while grading."""

    def note(self, text: str) -> None:
        console.print(f"[yellow]note:[/] {escape(text)}")

    def warn(self, text: str) -> None:
        console.print(f"[bold yellow]warning:[/] {escape(text)}")

    def unsandboxed(self) -> None:
        console.print("[bold red]WARNING: grading WITHOUT the sandbox[/] (--unsandboxed): "
                      "student code runs with this user's rights. Every score record says so.")

    @contextmanager
    def grading(self, total: int) -> Iterator[Callable[[str, dict], None]]:
        with Progress(TextColumn("[bold]grading[/]"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                      TextColumn("eta"), TimeRemainingColumn(), console=console,
                      transient=False) as bar:
            task = bar.add_task("grade", total=total, rate="")
            started = time.monotonic()

            def progress(kind: str, info: dict) -> None:
                if kind == "done":
                    done = bar.tasks[0].completed + 1
                    rate = done / max(time.monotonic() - started, 1e-9)
                    bar.update(task, completed=done, rate=f"{rate:.1f}/s")

            yield progress


def stopped(graded: int, total: int) -> None:
    """Ctrl-C while grading: how far it got, and how to resume."""
    click.echo(f"stopped (Ctrl-C) with {graded} of {total} graded; their results are "
               "kept: rerun the same command to resume.", err=True)


def worker_failures(failures: list[str]) -> None:
    """The workers' failures (not the students'), in red, after the summary."""
    for failure in failures:
        console.print(f"[red]{escape(failure)}[/]")


def left_out(skipped: list[str], absent: Sequence[str] = ()) -> None:
    """Name everything intake left out (links, oversized or escaping entries, broken
    notebooks, files no student's), and the roster's students it found nothing of, so
    the TA sees them without opening each page. Printed as plain text: the names are
    the class's, not rich markup."""
    if skipped:
        console.print(f"[yellow]left out by intake ({len(skipped)}):[/]")
    for line in skipped:
        console.print(f"  {line}", markup=False, highlight=False)
    if absent:
        console.print(f"[yellow]missing: on the roster, nothing handed in ({len(absent)}):[/]")
        console.print(f"  {', '.join(absent)}", markup=False, highlight=False)


def summary_table(summary: Summary, students: list[Line], out: Path) -> None:
    """This run's work, and the class as it now stands (scores.json): the errors and
    timeouts that remain are counted and named whether graded now or before."""
    errors = [f"{s.student_id} ({s.status})" for s in students if s.status in ERROR_STATUSES]
    timeouts = [s.student_id for s in students if s.status == TIMEOUT]
    table = Table(title="summary", show_header=False)
    table.add_row("students", str(len(students)))
    table.add_row("graded now", str(summary.graded))
    table.add_row("unchanged (skipped)", str(summary.skipped))
    table.add_row("errors (missing, unreadable, import)", str(len(errors)))
    table.add_row("timeouts", str(len(timeouts)))
    table.add_row("time", f"{summary.seconds:.1f} s")
    console.print(table)
    for title, names in (("errors", errors), ("timeouts", timeouts)):
        if names:
            console.print(f"{title}: {', '.join(names)}", markup=False, highlight=False)
    store = Store(out)
    console.print(f"scores:   {store.scores_path}", markup=False)
    pages([s.student_id for s in students], out)
    console.print(f"report:   {store.report_path}", markup=False)


def pages(student_ids: list[str], out: Path) -> None:
    """Where the students' pages are, under the names they really have: a page is
    `<student_id>.html` unless the id is no plain file name, and those are listed."""
    from grader.pages.feedback import clean

    store = Store(out)
    console.print(f"pages:    {store.pages_path}/<student_id>.html, one per student "
                  "(scores.json's \"page\" names each)", markup=False, soft_wrap=True)
    for sid in student_ids:
        if safe_name(sid) != sid:
            console.print(f"  {clean(sid, 200)}: {store.feedback_path(sid)}", markup=False,
                          highlight=False, soft_wrap=True)


def print_findings(found, lesson_key: str, out: Console | None = None) -> None:
    """One line per finding; the messages quote the lesson's text: never markup."""
    from collections import Counter

    out = out or Console(highlight=False, soft_wrap=not sys.stdout.isatty())
    colour = {"ok": "green", "failed": "bold red", "skipped": "dim"}
    for f in found:
        out.print(f"[{colour.get(f.status, 'yellow')}]{f.status:17}[/] {f.check:9} ", end="")
        out.print(f"{f.subject}: {f.message}" if f.subject else f.message, markup=False)
    counts = Counter(f.status for f in found)
    out.print(f"lesson {lesson_key}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
              markup=False)


def print_upload(done, course: config.Course, lesson_key: str, dry_run: bool) -> None:
    """What was (or would be) sent, and who was not; names print as plain text."""
    from grader.deliver.upload import keys, lti

    if dry_run:
        click.echo(f"would find or create the line item {lti.label(course, lesson_key)!r} "
                   f"(resourceId {lti.resource_id(course, lesson_key)!r}) in "
                   f"{keys.lti_config(course).lineitems_url}")
        for body in done.planned:
            click.echo(json.dumps(body, ensure_ascii=False))
        click.echo(f"would send {len(done.planned)}; unchanged {len(done.unchanged)}")
    else:
        if done.lineitem:
            click.echo(f"line item: {done.lineitem}")
        click.echo(f"sent {len(done.sent)}; unchanged {len(done.unchanged)}; "
                   f"refused {len(done.refused)}")
    for title, rows in (("refused by the platform", done.refused),
                        ("not sent (no LTI user id)", done.skipped)):
        if rows:
            click.echo(f"{title} ({len(rows)}):", err=True)
        for sid, why in rows:
            click.echo(f"  {sid}: {why}", err=True)
