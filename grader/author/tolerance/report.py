"""`grader tolerance`'s text: one block per check, then what the current tolerances
let through or refuse. Plain text: names and messages are printed as they are."""
from __future__ import annotations

from grader.author.tolerance.advise import Advice, Row, Worst


def _at(w: Worst) -> str:
    if w.value == 0:
        return "0  (every variant gives the reference's bits)"
    return f"{w.value:.3g}  ({w.who}{', ' + w.case if w.case else ''})"


def _above(row: Row, suggest: tuple[float, float, float]) -> str:
    """What the suggestion's margin is measured from: the largest correct difference
    left once rtol·|ref| is allowed or, when that is less (0 for variants that give the
    reference's bits), one ulp at the reference's scale, as a margin over 0 can't be."""
    atol, rtol, margin = suggest
    if atol / margin > row.floor * (1 + 1e-9):  # above the floor, up to rounding
        return f"×{margin:.3g} above the largest correct"
    why = ("the correct variants give the reference's bits" if row.correct.value == 0
           else f"rtol {rtol:g} covers every correct difference")
    return f"×{margin:.3g} above {row.floor:.2g}, one ulp at the reference's scale: {why}"


def _block(row: Row) -> list[str]:
    lines = [f"{row.test} · {row.check}   [{row.key}: atol {row.atol:g}, rtol {row.rtol:g}]",
             f"  largest correct   {_at(row.correct)}"]
    if row.mistake is not None:
        lines.append(f"  smallest mistake  {_at(row.mistake)}")
    elif not row.noise:
        lines.append("  smallest mistake  none: no known mistake changes this check "
                     "(or only its shape)")
    if row.noise:
        lines.append(f"  within correct noise here: {', '.join(row.noise)}")
    if row.suggest is not None:
        atol, rtol, margin = row.suggest
        lines.append(f"  suggest           atol {atol:.2g}, rtol {rtol:g}  ({_above(row, row.suggest)}, "
                     f"×{margin:.3g} below the smallest mistake)")
    elif row.mistake is not None:
        lines.append("  suggest           no tolerance separates them here")
    for note in (row.drift, row.size):
        if note:
            lines.append(f"  {note}")
    for w in row.too_tight:
        lines.append(f"  TOO TIGHT: correct {w.who} ({w.case}) needs atol >= {w.value:.3g} "
                     f"at rtol {row.rtol:g}" + (" (or the suggestion above)"
                                                 if row.suggest is not None else ""))
    for w in row.unsafe:
        lines.append(f"  UNSAFE: mistake {w.who} differs by up to {w.value:.3g} and passes "
                     f"atol {row.atol:g}, rtol {row.rtol:g}")
    return lines


def render(advice: Advice) -> str:
    out = [f"lesson {advice.lesson}: {len(advice.correct)} correct variants, "
           f"{advice.mistakes} known mistakes"]
    out += [f"  {name}: {about}" for name, about in advice.correct]
    out += [f"  note: {n}" for n in advice.notes]
    out.append("")
    for row in sorted(advice.rows, key=lambda r: (r.test, r.check, r.key)):
        out += _block(row) + [""]
    for name, tests in advice.broken.items():
        for test, exc in tests.items():
            out.append(f"correct variant {name} breaks {test}: {exc}")
    if advice.escaping:
        out.append("mistakes that fail none of these tests at the current tolerances: "
                   + ", ".join(advice.escaping))
    verdicts = sum(len(r.too_tight) + len(r.unsafe) for r in advice.rows)
    out.append(f"{verdicts} problem(s) with the current tolerances"
               if verdicts else "the current tolerances accept every correct variant and "
               "catch every mistake they can tell apart")
    return "\n".join(out)
