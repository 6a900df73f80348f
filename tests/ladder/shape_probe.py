# ruff: noqa: I001  (locust must be imported before anything else)
"""Load `loadtest/qmax.py` under Locust (in its own process) and print the shape's tick() answers.

Usage: python shape_probe.py LOCUSTFILE '{"rungs": [1, 5], "hold_s": 10, ...}' T1 T2 ...
Prints one JSON list: for each run time, null or [users, spawn_rate, user class name or null].
"""

import locust  # noqa: F401  (first: it monkey-patches the standard library)

import importlib.util
import json
import sys


def main() -> None:
    path, settings, *times = sys.argv[1:]
    spec = importlib.util.spec_from_file_location("qmax_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as Locust loads it (dataclasses look it up)
    spec.loader.exec_module(module)

    class FrozenClock(module.QmaxLadderShape):
        now = 0.0

        def get_run_time(self) -> float:
            return self.now

    shape = FrozenClock()
    for key, value in json.loads(settings).items():
        if key == "user_class":
            value = getattr(module, value) if value else None
        if key == "probes":  # refinement probes: [users, start_s, end_s] each
            value = tuple(module.Phase(u, a, b, u) for u, a, b in value)
        if key == "held_open":  # the phase awaiting its stability verdict: [users, start_s, end_s]
            value = module.Phase(value[0], value[1], value[2], value[0])
        if key == "extended_s":
            value = tuple(value)
        setattr(shape, key, tuple(value) if key == "rungs" else value)
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
