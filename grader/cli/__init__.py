"""The commands: options in, messages out.

In: a TA's, an instructor's or a student's command line. Out: what the commands print
(`console`), and the exit status. `staff` holds the staff's `grader` (the console
script `grader.cli:main`, and `python -m grader.cli`); `student` the command group a
student bundle installs as `grader` (`grader check`), kept apart so a check imports
little; `options` the options they share, each declared once. May import every other
stage; nothing imports this package.
"""
from __future__ import annotations


def main() -> None:
    """The staff's `grader`, imported when called: importing `grader.cli.student`
    (a student's check) runs this file, and must not import every staff command."""
    from grader.cli.staff import main as staff

    staff()
