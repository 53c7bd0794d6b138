"""Text every stage shares: the student-facing strings in every language (strings.py,
templates/i18n.yml), untrusted names, text and numbers as they are shown (shown.py), and
how the grader reads its own YAML (yamlread.py).

In: templates/i18n.yml. Out: strings. Imports nothing of the grader but the package's
own location (strings.TEMPLATES); every stage but inside/ imports it.
"""
from __future__ import annotations

from typing import Literal, get_args

# The languages the pages, the check and the LMS comments are written in: one key per
# language in templates/i18n.yml (strings.py refuses a file that has other ones), the
# choices of every command's --language and of course.yml's `language`.
Language = Literal["en", "zh"]
LANGUAGES: tuple[str, ...] = get_args(Language)
