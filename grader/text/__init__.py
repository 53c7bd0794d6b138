"""Text every stage shares: the student-facing strings in every language (strings.py,
templates/i18n.yml), untrusted names, text and numbers as they are shown (shown.py), and
how the grader reads its own YAML (yamlread.py).

In: templates/i18n.yml. Out: strings. Imports nothing of the grader but the package's
own location (strings.TEMPLATES); every stage but inside/ imports it.
"""
