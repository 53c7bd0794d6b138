"""The smallest failing example (issue 26): found for every known mistake of lessons 10
to 13 and 13b on a fresh input, as small as the candidates go, and its snippet, run against the
reference and against the mistaken code, prints exactly the numbers it shows. Correct
code (the solution, the equivalent mutants, the correct fixtures) gets none: an example
there would be a false sentence. Each single-line mistake of the divergence corpus
gets one for its part."""
from __future__ import annotations

import shutil
import sys
import tempfile
import types
from pathlib import Path

import pytest
import torch
import yaml

from grader.judge import smallest
from grader.judge.context import LessonContext
from grader.judge.divergence import correct_variants
from grader.judge.reference import Caller, load_module

ROOT = Path(__file__).resolve().parents[2]
# Mistaken and correct code runs here in the test's process, where pytest makes a
# warning an error; a student's runs in the sandbox, where a warning is only printed.
# One of lesson 13's equivalent mutants transposes a 3-d tensor with .T (deprecated).
pytestmark = pytest.mark.filterwarnings("ignore:The use of `x.T`:UserWarning")
LESSONS = ["10", "11", "12", "13", "13b"]
# Known mistakes without an example, each with why (none: every one differs in its
# forward outputs on a small float64, float16 or bfloat16 input)
NO_EXAMPLE: dict[str, str] = {}
# Entries of the divergence corpus (tests/fixtures/divergence) without an example:
# what they change, no forward output of the part shows on the inputs tried
CORPUS_NO_EXAMPLE: dict[str, dict[str, str]] = {}  # id -> why, where one must go without


def _lesson(course, key: str) -> tuple[LessonContext, types.ModuleType]:
    ctx = LessonContext(course, key)
    return ctx, smallest.load(ctx.tests)


def _run(snippet: str, name: str, module: types.ModuleType) -> list:
    """The snippet as a student runs it, next to `module` as their file `name`.py; what
    it prints, as objects."""
    printed: list = []
    sys.modules[name] = module
    try:
        exec(compile(snippet, "snippet.py", "exec"),
             {"print": lambda *a: printed.extend(a), "__name__": "__main__"})
    finally:
        del sys.modules[name]
    return printed


def _run_beside(snippet: str, lesson: types.ModuleType, source: str) -> list:
    """An assembly lesson's snippet as a student runs it: in a folder with their file
    (`source`) and their lessons 10-13 files (here the solutions), of which it makes
    `model_parts` (examples.py's PRELUDE); what it prints, as objects. The modules it
    imports are put back as they were (the probes' `model_parts` among them)."""
    printed: list = []
    names = [lesson.MODULE, "model_parts", *(file for file, _ in lesson.PIECES)]
    before = {name: sys.modules.pop(name, None) for name in names}
    with tempfile.TemporaryDirectory() as folder:
        for file, _ in lesson.PIECES:
            shutil.copy(ROOT / "solutions" / f"{file}.py", folder)
        Path(folder, f"{lesson.MODULE}.py").write_text(source, encoding="utf-8")
        sys.path.insert(0, folder)
        try:
            exec(compile(snippet, "snippet.py", "exec"),
                 {"print": lambda *a: printed.extend(a), "__name__": "__main__"})
        finally:
            sys.path.remove(folder)
            for name, module in before.items():
                sys.modules.pop(name, None)
                if module is not None:
                    sys.modules[name] = module
    return printed


def _as_shown(lesson: types.ModuleType, outputs: list[str], printed: list) -> list:
    """What the snippet printed, one value per output compared (a tuple printed whole,
    as route's, spread over its outputs), made canonical as the example's are."""
    if len(printed) == 1 and isinstance(printed[0], tuple) and len(outputs) > 1:
        printed = list(printed[0])
    assert len(printed) == len(outputs), (outputs, printed)
    canonical = getattr(lesson, "canonical", lambda out: out)
    out = canonical(dict(zip(outputs, printed)))
    return [out[o] for o in outputs]


def _in_float64(ex: smallest.Example) -> bool:
    """The inputs are float64 but where the example's sizes ask for float16 or bfloat16
    (`half`, `bf16`), and RoPE's cos and sin tables, float32 by the lesson's contract."""
    if ex.sizes.get("half") or ex.sizes.get("bf16"):
        return True
    return all(t.dtype == torch.float64 for name, t in ex.args.items()
               if isinstance(t, torch.Tensor) and t.is_floating_point()
               and name not in ("cos", "sin"))


def _same(got: object, want: object) -> bool:
    if isinstance(want, torch.Tensor):
        return (isinstance(got, torch.Tensor) and got.dtype == want.dtype
                and got.shape == want.shape
                and torch.allclose(got.detach(), want, rtol=0, atol=0, equal_nan=True))
    return got == want


def _snippet_prints_what_it_shows(lesson: types.ModuleType, ex: smallest.Example,
                                  solution: types.ModuleType, mistaken: types.ModuleType,
                                  name: str, sources: tuple[str, str] | None = None) -> None:
    """The snippet, run next to the solution and next to the mistaken code, prints the
    numbers its comments show as the reference's and as the student's. `sources`: the
    two as text, for an assembly lesson's snippet (`_run_beside`)."""
    assert _in_float64(ex), (name, ex.args)
    text = smallest.snippet(lesson, ex)
    for i, (module, want) in enumerate(((solution, ex.reference), (mistaken, ex.student))):
        if "error" in want:
            assert want["error"] in text
            continue
        printed = (_run_beside(text, lesson, sources[i]) if sources is not None
                   else _run(text, lesson.MODULE, module))
        got = _as_shown(lesson, ex.outputs, printed)
        for o, g in zip(ex.outputs, got):
            assert _same(g, want[o]), (name, o, g, want[o])
            # the numbers the snippet's comments show are these
            shown = smallest.label(lesson, ex.part, o)
            assert f"#   {shown} = {smallest._shown(want[o])}" in text, (name, o)


def _sources(lesson: types.ModuleType, solution: str, mistaken: str) -> tuple[str, str] | None:
    """The two texts an assembly lesson's snippet is run beside (its PRELUDE imports
    files); None for another lesson's."""
    return (solution, mistaken) if hasattr(lesson, "PRELUDE") else None


@pytest.mark.parametrize("key", LESSONS)
def test_every_known_mistake_gets_a_smallest_example_whose_snippet_runs(course, key):
    ctx, lesson = _lesson(course, key)
    refs = ctx.refs
    solution = load_module(f"_smallest_solution_{key}", refs.source, "solution")
    found = 0
    for v in refs.variants:
        ex = smallest.smallest(lesson, v.mistake.part, v.caller, refs.reference)
        if v.mistake.id in NO_EXAMPLE:
            assert ex is None, (v.mistake.id, "has an example now: drop it from the list")
            continue
        assert ex is not None, v.mistake.id
        _snippet_prints_what_it_shows(lesson, ex, solution, v.caller.module, v.mistake.id,
                                      _sources(lesson, refs.source,
                                               v.mistake.apply(refs.source)))
        found += 1
    assert found == len([v for v in refs.variants if v.mistake.id not in NO_EXAMPLE]) > 0


def test_nothing_smaller_tells_them_apart(course):
    """The example is the first candidate that differs: every smaller one agrees."""
    ctx, lesson = _lesson(course, "13")
    refs = ctx.refs
    v = next(v for v in refs.variants if v.mistake.id == "overwrite")
    ex = smallest.smallest(lesson, "dispatch", v.caller, refs.reference)
    assert ex.sizes["K"] == 2 and ex.sizes["N"] == 1 and ex.sizes["H"] == 1
    probe, names, make, outputs = lesson.PARTS["dispatch"]
    for sizes in smallest.candidates(names, lesson.ONE, lesson.HIGH):
        if sizes == ex.sizes:
            break
        args = make(sizes)
        if args is not None:
            got, ref = v.caller.call(probe, **args), refs.reference.call(probe, **args)
            assert not smallest.differs(got["y"], ref["y"]), sizes


def _corpus_entry(key: str, mistake_id: str) -> dict:
    """One entry of a lesson's divergence corpus (tests/fixtures/divergence)."""
    entries = yaml.safe_load((ROOT / "tests" / "fixtures" / "divergence" / f"{key}.yml")
                             .read_text(encoding="utf-8"))
    return next(e for e in entries if e["id"] == mistake_id)


def _edited(source: str, entry: dict) -> str:
    lines = source.splitlines()
    assert lines[entry["line"] - 1] == entry["old"], entry["id"]
    lines[entry["line"] - 1] = entry["new"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("mistake_id", ["hand-26", "hand-27"])
def test_dispatch_mixing_tokens_at_k_2_gets_an_example_with_k_2(course, mistake_id):
    """Issue 54: weights and tokens paired in different orders (slot by slot against
    token by token) show only with two tokens, K >= 2 and an expert sitting in
    different slots for them. Lesson 13's dispatch candidates now reach such a routing
    (a declined candidate is not counted against MAX_TRIES, and a routing where every
    expert sits in one slot is drawn again), so the example has them, and its snippet
    prints what it shows."""
    ctx, lesson = _lesson(course, "13")
    refs = ctx.refs
    entry = _corpus_entry("13", mistake_id)
    module = load_module(f"_smallest_mixing_{mistake_id}", _edited(refs.source, entry),
                         "solution")
    ex = smallest.smallest(lesson, "dispatch", Caller(module, refs.probes), refs.reference)
    assert ex is not None, mistake_id
    assert ex.sizes["K"] >= 2 and ex.sizes["N"] >= 2, ex.sizes
    assert "error" not in ex.student  # the tokens mixed up, not a crash
    solution = load_module("_smallest_mixing_solution", refs.source, "solution")
    _snippet_prints_what_it_shows(lesson, ex, solution, module, mistake_id)


def test_the_student_is_called_at_most_max_tries_times_and_declined_sizes_cost_none(course):
    """MAX_TRIES bounds the student's extra calls: a candidate the maker declines (K > E)
    is no call, so it does not use up a try."""
    ctx, lesson = _lesson(course, "13")

    class Counting:
        calls = 0

        def call(self, probe, **args):
            Counting.calls += 1
            return ctx.refs.reference.call(probe, **args)

    assert smallest.smallest(lesson, "dispatch", Counting(), ctx.refs.reference) is None
    assert Counting.calls == smallest.MAX_TRIES


# A gradient-only mistake of the corpus -> its part, the gradient its code leaves
# None, and the snippet's backward call
GRADIENT_ONLY = {"hand-23": ("aux_loss", "scores_grad", "aux.backward()"),
                 "hand-21": ("dispatch", "weight_grad", "(y * gy).sum().backward()"),
                 "hand-22": ("dispatch", "x_grad", "(y * gy).sum().backward()")}


@pytest.mark.parametrize("mistake_id", list(GRADIENT_ONLY))
def test_a_gradient_only_mistake_gets_an_example_that_shows_grad(course, mistake_id):
    """Issue 54: a `.detach()` (on the loss's scores, on dispatch's weight or on an
    expert's input) leaves every output right and cuts a gradient. The example calls
    backward and prints each gradient (`scores.grad`, `topk_weight.grad`): None for the
    mistaken code's cut one, the reference's in the comments; the outputs, the same on
    both sides, come first. Run, the snippet prints exactly these."""
    part, cut, call = GRADIENT_ONLY[mistake_id]
    ctx, lesson = _lesson(course, "13")
    refs = ctx.refs
    entry = _corpus_entry("13", mistake_id)
    assert entry.get("backward") and ".detach()" in entry["new"] and entry["part"] == part
    module = load_module(f"_smallest_detached_{mistake_id}", _edited(refs.source, entry),
                         "solution")
    ex = smallest.smallest(lesson, part, Caller(module, refs.probes), refs.reference)
    assert ex is not None
    outputs = lesson.PARTS[part][3]
    assert ex.outputs == [*outputs, *smallest.gradients(lesson, part)]
    assert not any(smallest.differs(ex.student[o], ex.reference[o]) for o in outputs)
    assert ex.student[cut] is None and ex.reference[cut] is not None
    least = getattr(lesson, "GRADIENTS_FROM", {}).get(part, {})
    assert all(ex.sizes[n] >= v for n, v in least.items()), ex.sizes  # the loss: E >= 2
    text = smallest.snippet(lesson, ex)
    head = text.split("\n\n")[0].splitlines()  # the results first
    assert head[0] == "# yours gives:" and head[1].startswith(f"#   {outputs[0]} = ")
    assert f"#   {smallest.label(lesson, part, cut)} = None" in head
    assert call in text and f"print({smallest.label(lesson, part, cut)})" in text
    solution = load_module("_smallest_detached_solution", refs.source, "solution")
    _snippet_prints_what_it_shows(lesson, ex, solution, module, mistake_id)


def _correct(ctx: LessonContext) -> dict[str, Caller]:
    """The lesson's correct code: the solution in a student's seat, its equivalent
    mutants and the correct fixtures written in other styles."""
    refs = ctx.refs
    out = {"solution": refs.reference.twin()}
    for i, v in enumerate(correct_variants(refs.source, ctx.tests)):
        module = load_module(f"_smallest_equivalent_{ctx.key}_{i}", v.source, "solution")
        out[f"equivalent {i}"] = Caller(module, refs.probes)
    for path in sorted((ROOT / "tests" / "fixtures" / f"lesson{ctx.key}" / "correct")
                       .glob("*.py")):
        module = load_module(f"_smallest_fixture_{ctx.key}_{path.stem}",
                             path.read_text(encoding="utf-8"), str(path))
        out[path.name] = Caller(module, refs.probes)
    return out


@pytest.mark.slow  # every correct variant searched for an example: ~8 CPU-s a lesson
@pytest.mark.parametrize("key", LESSONS)
def test_correct_code_has_no_example(course, key):
    ctx, lesson = _lesson(course, key)
    correct = _correct(ctx)
    assert len(correct) > 1 or key == "10", correct  # lesson 10 has neither
    for name, caller in correct.items():
        for part in lesson.PARTS:
            ex = smallest.smallest(lesson, part, caller, ctx.refs.reference)
            assert ex is None, (name, part, ex and ex.sizes, ex and ex.reference,
                                ex and ex.student)


@pytest.mark.slow  # every corpus case of a lesson traced and its example made
@pytest.mark.parametrize("key", LESSONS)
def test_each_mistake_of_the_divergence_corpus_gets_an_example(course, key):
    """The corpus of single-line mistakes (audit mutants and hand-written ones) that
    change the part's results: every one gets an example but those listed with why,
    and its snippet prints the numbers it shows.
    A gradient-only mistake (`backward: true`: every forward value matches) is asked
    for one where the lesson's example shows its part's gradients (`GRADIENTS`); in
    the other parts its page names the line instead (tests/e2e/test_divergence.py)."""
    ctx, lesson = _lesson(course, key)
    refs = ctx.refs
    entries = yaml.safe_load((ROOT / "tests" / "fixtures" / "divergence" / f"{key}.yml")
                             .read_text(encoding="utf-8"))
    listed = CORPUS_NO_EXAMPLE.get(key, {})
    solution = load_module(f"_smallest_corpus_solution_{key}", refs.source, "solution")
    missing = []
    for entry in (e for e in entries
                  if not e.get("backward") or smallest.gradients(lesson, e["part"])):
        lines = refs.source.splitlines()
        assert lines[entry["line"] - 1] == entry["old"], entry["id"]
        lines[entry["line"] - 1] = entry["new"]
        text = "\n".join(lines) + "\n"
        module = load_module(f"_smallest_corpus_{key}_{entry['id']}", text, "solution")
        ex = smallest.smallest(lesson, entry["part"], Caller(module, refs.probes),
                               refs.reference)
        if ex is None:
            missing.append(entry["id"])
        else:
            _snippet_prints_what_it_shows(lesson, ex, solution, module, entry["id"],
                                          _sources(lesson, refs.source, text))
    assert sorted(missing) == sorted(listed), missing
    assert len(missing) <= 0.1 * len(entries)


def test_the_lessons_tolerances_are_the_ones_their_tests_use(course):
    """An examples.py that loosens a comparison uses the tolerance the lesson's tests
    use there (course.yml's, or test_norm.py's for float16): an example is then shown
    for what the tests fail, never for what they accept."""
    def pair(key: str, name: str) -> tuple[float, float]:
        t = course.tolerances(key)[name]
        return (t.atol, t.rtol)

    lessons = {key: _lesson(course, key)[1] for key in LESSONS}
    assert lessons["11"].TOLERANCES == {("attention", "y"): {"float64": pair("11", "attention")}}
    assert lessons["12"].TOLERANCES == {
        (part, o): tol for part, outputs, tol in (
            ("freqs", ("cos", "sin"), {"float32": pair("12", "float32")}),
            ("apply", ("q", "k"), {"bfloat16": pair("12", "bfloat16")}))
        for o in outputs}
    assert lessons["13"].TOLERANCES == {
        (part, o): {"float64": pair("13", "aux")}
        for part, o in (("aux_loss", "aux"), ("aux_loss", "scores_grad"), ("moe", "aux"))}
    assert lessons["13b"].TOLERANCES == {(part, o): {"float64": pair("13b", "float64")}
                                         for part, outputs in lessons["13b"].OUTPUTS.items()
                                         for o in outputs}
    norm = load_module("_smallest_test_norm",
                       (ROOT / "hidden_tests" / "10_rmsnorm" / "test_norm.py").read_text(),
                       "test_norm.py")
    assert lessons["10"].TOLERANCES == {("norm", "y"): {"float16": (norm.HALF_ATOL,
                                                                    norm.HALF_RTOL)}}


def test_an_error_the_grader_said_is_in_the_pages_language(course):
    """Issue 51: where the student's call ends in an error the grader says (a timeout,
    a crash), the example's "yours gives" line is that sentence in the page's language,
    kept through the record's JSON; Python's own errors stay as Python said them."""
    from grader.pages.feedback import example_in
    from grader.record import GradeRecord
    from grader.sandbox.limits import StudentError
    from grader.text.strings import STRINGS, say

    ctx, lesson = _lesson(course, "13")

    class TimesOut:
        def call(self, probe, **args):
            raise StudentError("timeout", say("err_timeout", s="2", where="moe"))

    ex = smallest.smallest(lesson, "ffn", TimesOut(), ctx.refs.reference)
    assert ex is not None
    text = smallest.snippet(lesson, ex)
    record = GradeRecord.from_json(GradeRecord(
        student_id="s", lesson="13", status="graded", score=0.0, max_score=10.0, parts={},
        tests=[], examples={"ffn": text}).to_json())
    zh, en = (example_in(record.examples["ffn"], lang) for lang in ("zh", "en"))
    assert "#   moe超时（超过 2 秒）" in zh and "timed out" not in zh
    assert STRINGS["zh"]["ex_yours_gives"] in zh
    assert "#   timed out after 2 s moe" in en

    class Raises:
        def call(self, probe, **args):
            raise StudentError("error", "shape '[2, 3]' is invalid", type_="RuntimeError")

    ex = smallest.smallest(lesson, "ffn", Raises(), ctx.refs.reference)
    assert "#   shape '[2, 3]' is invalid" in example_in(smallest.snippet(lesson, ex), "zh")


def test_the_assembly_snippet_makes_model_parts_of_the_earlier_lessons_files(course):
    """Lesson 13b's snippet imports each piece its stub takes from `model_parts` out of
    the student's own file of the lesson course.yml's `builds_on` names for it, and
    says so in a comment the page translates (as it says what the grader stood in for
    the student's Attention and blocks)."""
    from grader.pages.feedback import STRINGS

    lesson = _lesson(course, "13b")[1]
    builds_on = course.lesson("13b").builds_on
    assert lesson.PIECES == [(Path(course.lesson(key).exercise).stem, list(names))
                             for key, names in builds_on.items()]
    shown = [STRINGS["en"][k] for k in ("ex_model_parts", "ex_own_attention", "ex_own_blocks")]
    assert shown[0] in lesson.PRELUDE
    said = {line.strip() for part in lesson.PARTS for line in
            lesson.lines(smallest.Example(part, "", lesson.PARTS[part][2](
                {**lesson.ONE, "L": 1}) or {}, {}, []))
            if line.strip().startswith("#")}
    assert said == set(shown[1:]), said
