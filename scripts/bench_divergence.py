"""What naming the line of divergence costs per failing part (target: under 200 ms).

For each lesson, a few single-line mistakes of the corpus (tests/fixtures/divergence)
are loaded in a sandboxed child as a graded submission is, and each failing part is
traced (`divergence.where`, the call the grading run makes): its wall time is the
extra a failing part costs. The first part of a run also pays for tracing the
reference and its correct variants once (printed apart: a run pays it once, not
per student).

    .venv/bin/python scripts/bench_divergence.py [--per-lesson N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import config  # noqa: E402
from grader.judge import divergence  # noqa: E402
from grader.judge.context import LessonContext  # noqa: E402
from grader.inside import protocol  # noqa: E402
from grader.sandbox import bwrap  # noqa: E402
from grader.sandbox import slot as slots  # noqa: E402
from grader.sandbox.session import Session  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-lesson", type=int, default=8)
    parser.add_argument("--lessons", default="10,11,12,13")
    parser.add_argument("-v", action="store_true", help="each mistake's time")
    parser.add_argument("--backward", action="store_true",
                        help="the gradient-only mistakes only (`backward` in the corpus)")
    options = parser.parse_args()
    n = options.per_lesson
    course = config.load(ROOT / "course.yml")
    every = []
    for lesson in options.lessons.split(","):
        ctx = LessonContext(course, lesson)
        info = course.lesson(lesson)
        started = time.monotonic()
        lessons = divergence.lesson_traces(ctx)
        for part in info.parts:
            lessons.references(part)
        once = time.monotonic() - started
        entries = yaml.safe_load((ROOT / "tests/fixtures/divergence" / f"{lesson}.yml")
                                 .read_text(encoding="utf-8"))
        if options.backward:
            entries = [e for e in entries if e.get("backward")]
            if not entries:
                continue
        entries = entries[::max(len(entries) // n, 1)][:n]
        slot = slots.open_slot(course.path(info.probes), bwrap.probe().reason is None,
                               tuple(info.preload))
        times = []
        try:
            for entry in entries:
                lines = ctx.refs.source.splitlines()
                lines[entry["line"] - 1] = entry["new"]
                source = "\n".join(lines) + "\n"
                session = Session(slot, source, info.exercise, info.provides,
                                  course.limits(lesson))
                try:
                    def call(probe, args, session=session):
                        frame = protocol.dumps({"probe": probe, "args": args, "trace": True})
                        return session.call(probe, args, "tracing", frame=frame)
                    # a graded run traces a child its tests have started: start it first
                    session.restarts += 1
                    session._start("bench")
                    t0 = time.monotonic()
                    divergence.where(call, lessons, entry["part"], source)
                    times.append(time.monotonic() - t0)
                    if options.v:
                        print(f"  {entry['id']:24} {entry['part']:9} {times[-1] * 1000:.0f} ms")
                finally:
                    session.close()
        finally:
            slot.close()
        every += times
        print(f"lesson {lesson}: once per run {once * 1000:.0f} ms (reference and variants "
              f"traced); per failing part median {statistics.median(times) * 1000:.0f} ms, "
              f"max {max(times) * 1000:.0f} ms over {len(times)} parts")
    print(f"all lessons: per failing part median {statistics.median(every) * 1000:.0f} ms, "
          f"max {max(every) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
