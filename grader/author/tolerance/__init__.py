"""`grader tolerance --lesson KEY`: tolerances from measurements, not trial.

The lesson's graded tests run in-process, through the grading path's own `Checks`,
once with each correct variant in the student's place (a folder of them, and ones
generated from the solution, `variants.GENERATED`) and once with each known mistake.
Every numeric comparison is kept as a summary of its per-element errors. Per check
(test × check name) it prints the largest difference among the correct variants, the
smallest among the mistakes, a suggested atol and rtol halfway between them on a log
scale (the margin on each side), drift that grows along an axis (the position, in
RoPE's tables) or with the case's size, and the current tolerance's verdict: too
tight for a correct variant, or unsafe, letting a mistake through.
"""
from grader.author.tolerance.advise import Advice, advise

__all__ = ["Advice", "advise"]
