"""A run: a class graded (grading.py: the sandbox, the plan, the workers of pool.py or
cluster.py, scores.json and the class report), one file checked (`grader check`:
practice_run.py, practice_output.py), the class compared for similarity
(compare_class.py, similarity.py), and Ctrl-C held where torch would drop it.

In: course.yml, a class's folder (through intake) or one file. Out: OUT (results,
pages, scores.json) and the run's events and summary. May import pages, judge and
below; deliver, author and cli import it.
"""
