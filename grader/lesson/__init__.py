"""A lesson's own files, as the grader reads them: what a hidden test file's name says
(testfile.py), the student stub from the solution's markers (release.py), the mutants
of the solution (operators.py, mutants.py) and the lesson's equivalent ones
(equivalents.py).

In: a lesson's solution and hidden tests folder. Out: names, stubs, mutants. Imports
nothing of the grader but itself; config, the judge and the author's tools import it.
"""
