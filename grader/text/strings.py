"""The student-facing strings (templates/i18n.yml), and text said in every language at
once: intake's notes and the grader's own check messages are made long before the
page's language is known (a record is rendered again by `grader report`, in either
language), so they carry each language's text with them."""
from __future__ import annotations

from pathlib import Path

import yaml

import grader
from grader.text import LANGUAGES
from grader.text.shown import clean
from grader.text.yamlread import LOADER


def _templates_folder() -> Path:
    """The pages' templates and strings: package data (grader/templates) in an installed
    grader (a wheel: pyproject.toml ships templates/ there), else the templates/ folder
    beside the package (the project's checkout, a student bundle, the autograder zip)."""
    package = Path(grader.__file__).parent
    shipped = package / "templates"
    return shipped if shipped.is_dir() else package.parent / "templates"


TEMPLATES = _templates_folder()
Text = str | dict  # one text for every language, or {language: text}


def _load_strings(path: Path) -> dict[str, dict[str, str]]:
    """templates/i18n.yml (key -> {en, zh}) turned into language -> key -> text."""
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=LOADER)
    languages = {lang for entry in data.values() for lang in entry}
    missing = [f"{k}.{lang}" for k, entry in data.items()
               for lang in languages if lang not in entry]
    if missing:
        raise ValueError(f"{path}: missing translations: {', '.join(missing)}")
    return {lang: {k: entry[lang] for k, entry in data.items()} for lang in sorted(languages)}


STRINGS = _load_strings(TEMPLATES / "i18n.yml")
if tuple(STRINGS) != tuple(sorted(LANGUAGES)):
    raise ValueError(f"templates/i18n.yml's languages are {', '.join(STRINGS)}; "
                     f"grader.text.LANGUAGES names {', '.join(LANGUAGES)}")


class Said(str):
    """Text in every language: as a str it is the English one (what scores.json, the
    exports, the run's summary and fingerprints read), `texts` holds each language's."""
    texts: dict[str, str]

    def __new__(cls, texts: dict[str, str]) -> Said:
        said = super().__new__(cls, texts["en"])
        said.texts = dict(texts)
        return said

    # pickled to workers whole: pickle hands these to __new__, which takes the texts
    # rather than str's one string (so the signature differs from str's on purpose)
    def __getnewargs__(self) -> tuple[dict[str, str]]:  # type: ignore[override]
        return (self.texts,)


def say(key: str, **args: object) -> Said:
    """i18n.yml's `key` in every language, filled in with `args`; an argument that is
    itself Said (a reason inside a note) is filled in in the same language."""
    return Said({lang: strings[key].format(**{k: in_language(v, lang) for k, v in args.items()})
                 for lang, strings in STRINGS.items()})


def in_language(value: object, language: str) -> str:
    """`value`'s text in `language`: Said and {language: text} dicts give theirs (else
    the English), anything else is one text for every language."""
    texts = value.texts if isinstance(value, Said) else value
    if isinstance(texts, dict):
        return str(texts.get(language) or texts.get("en") or next(iter(texts.values()), ""))
    return "" if value is None else str(value)


def message_fields(message: str) -> dict[str, object]:
    """A record's `message` as JSON keeps it: in English, and, where it was said in
    every language (a Said), each language's as `message_texts` (read by `message_in`)."""
    texts = getattr(message, "texts", None)
    return {"message": str(message), **({"message_texts": dict(texts)} if texts else {})}


def check_label(name: str, t: dict[str, str]) -> str:
    """A check's name (a lesson's `check.grad("input gradient", ...)`) in the language
    of `t` where i18n.yml has it (label_*); any other name, an identifier, as it is."""
    import re

    found = re.fullmatch(r"(parameter|expert) gradient\[(.+)\]", name)
    if found:
        return t[f"label_{found.group(1)}_gradient"].format(name=found.group(2))
    return t.get("label_" + name.replace(" ", "_"), name)


def message_in(record: dict, language: str) -> str:
    """A check's or an error's message (`message_fields`) in `language`."""
    return in_language(record.get("message_texts") or record.get("message"), language)


def stored(value: object) -> object:
    """How a Said is kept in JSON: its texts (read back by `restored`)."""
    return value.texts if isinstance(value, Said) else value


def restored(value: object) -> str:
    """A stored text back: {language: text} with an English one is Said again (anything
    else that is not a text, as its str: a record read back holds texts only)."""
    if isinstance(value, dict) and isinstance(value.get("en"), str):
        return Said(value)
    return value if isinstance(value, str) else str(value)


def local_text(value: object, language: str) -> str:
    """A text shown on a page (a diagnosis title or hint, a note): cleaned."""
    return clean(in_language(value, language))
