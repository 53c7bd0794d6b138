"""Delivery: what leaves the grader for an LMS or a student. export/ (scores.json into
each LMS's import files), upload/ (`grader upload`, LTI scores), the Gradescope
autograder zip (autograder_zip.py), the student bundle (bundle.py, bundle_install.py).

In: an OUT's scores.json and pages, or a lesson's files. Out: files to import or hand
out, and requests to an LMS. May import run, pages, judge and below; author and cli
import it. The bundle, the zip and the upload share no code (pyproject.toml's
import-linter contracts).
"""
