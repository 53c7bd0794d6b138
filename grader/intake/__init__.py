"""Intake: what a class hands in, read without trusting it. A class folder or an LMS
download into submissions (submissions.py), files read within caps and never through a
link (capped.py), notebooks (notebook.py), the roster and a Moodle grading worksheet
(roster.py).

In: a class's folder, course.yml's roster. Out: submissions copied into OUT/intake, and
notes on what was left out; nothing after intake reads the class's folder. May import
config, store, record, lesson, text; never pages (pyproject.toml's contracts).
"""
