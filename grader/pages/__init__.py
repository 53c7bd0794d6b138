"""Pages: what people read. A student's page and its top for Gradescope (feedback.py),
the class and similarity reports (report.py), their SVG (charts.py), and the sentences
for contrast, structure, composite parts (explain.py) and the first divergence
(where.py). The templates themselves are the top-level templates/.

In: records (record.py) and the class's counts (judge/tally.py). Out: HTML. May import
judge's torch-free modules and below, never torch (tests/unit/test_torch_free.py) nor
intake; run, deliver, author and cli import it.
"""
