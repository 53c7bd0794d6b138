"""The sentence that names where a failing part's values first leave the reference's
(a `record.Where`, found by judge/divergence/), for the page and `grader check`, in
the page's language: plain text (`boxes`, `sentence`) or escaped HTML (`boxes_html`).
"""
from __future__ import annotations

from collections.abc import Sequence

import re

from markupsafe import Markup, escape

from grader.record import Where
from grader.text.cells import at


def _shown_name(name: str, t: dict[str, str]) -> str:
    if name == "return":
        return t["where_return"]
    m = re.fullmatch(r"return\[(\d)\]", name)
    if m:
        return t["where_return_n"].format(n=int(m.group(1)) + 1)
    return f"`{name}`"


def _backward_sentence(w: Where, t: dict[str, str], cells: Sequence[Sequence[int]]) -> str:
    """A "cut" or "added" finding's sentence, naming the leaves the value's gradient
    misses (`w.ref`) or adds (`w.got`) where the reference's trace named them."""
    def leaves(text: str) -> str:
        return ", ".join(f"`{n.strip()}`" for n in text.split(","))

    name = _shown_name(w.name, t)
    if w.kind == "cut":
        tail = (t["where_backward_cut"].format(name=name, leaves=leaves(w.ref)) if w.ref
                else t["where_backward_less"].format(name=name))
    else:
        tail = (t["where_backward_more"].format(name=name, leaves=leaves(w.got)) if w.got
                else t["where_backward_other"].format(name=name))
    return t["where_backward"].format(line=at(w.line, cells, t, start=True), code=w.code) + tail + t["where_fresh"]


def boxes(found: object, t: dict[str, str], cells: Sequence[Sequence[int]] = ()
          ) -> list[tuple[str, str]]:
    """The page's (and `grader check`'s) boxes for a part's `Where`, each (its heading,
    its text) in the language of `t`, its lines a notebook's cell and line where
    `cells` (the record's) say: where the values first differ, then the line that
    raised, where one did; [] when there is none. Plain text: the page escapes it."""
    w = Where.from_json(found)
    if w is None:
        return []
    said = [] if w.kind == "raised" else [(t["where_head"], _first(w, t, cells))]
    if w.raise_line:
        said.append((t["where_raised_head"], t["where_raised"].format(
            line=at(w.raise_line, cells, t, start=True), error=w.raise_error,
            code=w.raise_code)))
    return said


def sentence(found: object, t: dict[str, str], cells: Sequence[Sequence[int]] = ()) -> str:
    """`boxes`' texts as one, a blank line between boxes (`grader check` prints it)."""
    return "\n\n".join(text for _, text in boxes(found, t, cells))


def _first(w: Where, t: dict[str, str], cells: Sequence[Sequence[int]]) -> str:
    """The box for where the values first differ."""
    if w.kind == "upstream":
        return t["where_upstream"].format(name=w.name, part=w.part, code=w.code,
                                          line=at(w.line, cells, t))
    if w.kind == "default":
        return t["where_default"].format(line=at(w.line, cells, t, start=True), code=w.code,
                                         name=w.name, got=w.got, ref=w.ref) + t["where_fresh"]
    if w.kind == "gradient":
        return t["where_gradient"]
    if w.kind in ("cut", "added"):
        return _backward_sentence(w, t, cells)
    matched = (t["where_matched"].format(names=", ".join(f"`{n}`" for n in w.matched))
               if w.matched else "")
    head = t["where_line_head"].format(line=at(w.line, cells, t, start=True), code=w.code, matched=matched)
    if w.kind == "path":
        return head + t["where_path"] + t["where_fresh"]
    if w.kind == "skip":
        return head + t["where_skip"].format(names=", ".join(
            f"`{n.strip()}`" for n in w.name.split(",")))
    if w.kind == "extra":
        return t["where_extra"].format(line=at(w.line, cells, t, start=True), code=w.code, name=w.name)
    name = _shown_name(w.name, t)
    got = w.got + _placed(w.got_shape, w.got_at, t)
    here = (t["where_ref"].format(name=name, got=got,
                                  ref=w.ref + _placed(w.ref_shape, w.ref_at, t)) if w.ref
            else t["where_noref"].format(name=name, got=got))
    return head + here + t["where_fresh"]


def _placed(shape: list[int], at: list[int], t: dict[str, str]) -> str:
    """" (from index [0, 2], shape [2, 3])" in the page's language: where the quoted
    values start (when not at the first element) and the value's shape."""
    if at:
        return t["where_from_shape"].format(at=at, shape=shape)
    return t["where_shape"].format(shape=shape) if shape else ""


def boxes_html(found: object, t: dict[str, str],
               cells: Sequence[Sequence[int]] = ()) -> list[dict[str, str]]:
    """The boxes for a page ({"head", "text"}): the text escaped, with each `quoted`
    piece set as code."""
    return [{"head": head,
             "text": Markup(re.sub(r"`([^`]*)`", r"<code>\1</code>", str(escape(text))))}
            for head, text in boxes(found, t, cells)]
