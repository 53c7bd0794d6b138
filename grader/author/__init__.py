"""The instructor's tools for writing a lesson: `grader selftest` (selftest/), `grader
audit` (audit/, mutation testing of the hidden tests), `grader tolerance` (tolerance/)
and `grader new-lesson` (newlesson/).

In: a lesson's solution, hidden tests and course.yml entry. Out: findings, advice and
reports for its author, and a new lesson's skeleton; nothing a student sees. May
import every stage below it (deliver, run, pages, judge, ...); only cli imports it.
"""
