# ruff: noqa: I001  (locust must be imported before anything else)
"""Load `loadtest/qmax.py` under Locust (in its own process) and print the shape's tick() answers.

Usage: python shape_probe.py LOCUSTFILE '{"rungs": [1, 5], "hold_s": 10, ...}' T1 T2 ...
Prints one JSON list: for each run time, null or [users, spawn_rate, user class name or null].
The settings are the schedule's fields (rungs, hold_s, measure_s, idle_s, final_drain_s,
max_hold_s, extended_s) and the snapshot's (held_open, coarse_end_s, probes, refining), plus
user_class.
"""

import locust  # noqa: F401  (first: it monkey-patches the standard library)

import importlib.util
import json
import sys
from pathlib import Path

from tts_bench.measure.ladder.schedule import LadderSchedule, Phase
from tts_bench.measure.ladder.state import ShapeSnapshot

SCHEDULE_FIELDS = ("rungs", "hold_s", "measure_s", "idle_s", "final_drain_s", "max_hold_s")


def snapshot_of(settings: dict) -> ShapeSnapshot:
    schedule = {key: settings[key] for key in SCHEDULE_FIELDS if key in settings}
    if "rungs" in schedule:
        schedule["rungs"] = tuple(schedule["rungs"])
    extended = tuple(settings.get("extended_s", ()))
    held = settings.get(
        "held_open"
    )  # the phase awaiting its stability verdict: [users, start_s, end_s]
    return ShapeSnapshot(
        schedule=LadderSchedule(**schedule, extended_s=extended),
        held_open=None if held is None else Phase(held[0], held[1], held[2], held[0]),
        coarse_end_s=settings.get("coarse_end_s"),
        # refinement probes: [users, start_s, end_s] each
        probes=tuple(Phase(u, a, b, u) for u, a, b in settings.get("probes", ())),
        refining=settings.get("refining", False),
    )


def main() -> None:
    path, settings, *times = sys.argv[1:]
    sys.path.insert(0, str(Path(path).parent))  # as Locust does while it loads the file
    spec = importlib.util.spec_from_file_location("qmax_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as Locust loads it (dataclasses look it up)
    spec.loader.exec_module(module)

    class FrozenClock(module.QmaxLadderShape):
        now = 0.0

        def get_run_time(self) -> float:
            return self.now

    shape = FrozenClock()
    given = json.loads(settings)
    shape.state = snapshot_of(given)
    class_name = given.get("user_class")
    shape.user_class = getattr(module, class_name) if class_name else None
    answers = []
    for t in times:
        shape.now = float(t)
        tick = shape.tick()
        if tick is None:
            answers.append(None)
        else:
            users, rate, *classes = tick
            name = classes[0][0].__name__ if classes else None
            answers.append([users, rate, name])
    print(json.dumps(answers))


if __name__ == "__main__":
    main()
