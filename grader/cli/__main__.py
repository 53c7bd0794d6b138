"""`python -m grader.cli`: the staff's `grader`."""
from grader.cli import main

main()
