"""The ladder's flags are one set: `tts-bench qmax` and `locust -f loadtest/qmax.py` expose each
with the same default, type and help."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tts_bench.cli.chain import qmax as qmax_command
from tts_bench.errors import TtsBenchError
from tts_bench.measure.ladder.flags import (
    LADDER_FLAGS,
    add_ladder_arguments,
    ladder_arguments,
    ladder_options,
)

from .conftest import LOCUSTFILE

# In a child process: Locust monkey-patches the standard library when imported.
DUMP_LOCUST_FLAGS = """
import locust
import importlib.util, json, sys
from pathlib import Path
from locust.argument_parser import get_parser
path = Path(sys.argv[1])
sys.path.insert(0, str(path.parent))  # as Locust does while it loads the file
spec = importlib.util.spec_from_file_location("qmax_flags", path)
spec.loader.exec_module(importlib.util.module_from_spec(spec))
actions = {a.option_strings[0]: a for a in get_parser()._actions if a.option_strings}
print(json.dumps({
    flag: {"help": a.help, "default": a.default, "type": getattr(a.type, "__name__", None),
           "choices": a.choices, "nargs": a.nargs, "const": a.const}
    for flag, a in actions.items() if flag in json.loads(sys.argv[2])
}))
"""


def described(actions: list[argparse.Action], flags: list[str]) -> dict[str, dict]:
    by_flag = {a.option_strings[0]: a for a in actions if a.option_strings}
    return {
        flag: {
            "help": a.help,
            "default": a.default,
            "type": getattr(a.type, "__name__", None),
            "choices": a.choices,
            "nargs": a.nargs,
            "const": a.const,
        }
        for flag, a in by_flag.items()
        if flag in flags
    }


@pytest.fixture(scope="module")
def cli_flags() -> dict[str, dict]:
    parser = argparse.ArgumentParser()
    qmax_command.register(parser.add_subparsers())
    (command,) = parser._subparsers._group_actions[0].choices.values()  # type: ignore[union-attr]
    return described(command._actions, [flag for flag, _ in LADDER_FLAGS])


def test_the_cli_and_the_locustfile_expose_the_same_ladder_flags(cli_flags, child_env):
    flags = [flag for flag, _ in LADDER_FLAGS]
    done = subprocess.run(
        [sys.executable, "-c", DUMP_LOCUST_FLAGS, str(LOCUSTFILE), json.dumps(flags)],
        capture_output=True, text=True, env=child_env, timeout=120, check=True,
    )  # fmt: skip
    locust_flags = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(cli_flags) == sorted(locust_flags) == sorted(flags)
    # Through JSON on both sides: Locust's parsed options travel to workers as msgpack.
    assert json.loads(json.dumps(cli_flags)) == locust_flags
    assert all(entry["help"] for entry in locust_flags.values())


def test_every_ladder_flag_keeps_a_plain_value_workers_can_receive():
    parser = argparse.ArgumentParser()
    add_ladder_arguments(parser)
    values = vars(parser.parse_args([]))
    assert json.loads(json.dumps(values)) == values


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--rungs", "1,2,4", "--slo-ms", "500"], None),
        (["--rungs", "4,2"], "strictly ascending"),
        (["--slo-ms", "0"], "--slo-ms 0"),
        (["--refine", "0"], "--refine"),
        (["--underrun-slo", "2"], "--underrun-slo 2"),
        (["--measure-s", "300"], "exceeds --hold-s"),
    ],
)
def test_the_flags_are_checked_the_same_way_for_both(args, expected):
    parser = argparse.ArgumentParser()
    add_ladder_arguments(parser)
    options = parser.parse_args(args)
    if expected is None:
        read = ladder_options(options)
        assert read.schedule.rungs == (1, 2, 4) and read.slo_ms == 500
        assert read.corpus.name == "en.txt" and read.out == Path("measurements")
    else:
        with pytest.raises(TtsBenchError, match=expected):  # a one-line refusal
            ladder_options(options)


def test_no_help_holds_a_percent_sign():
    # argparse expands %-templates in help; Locust's web UI shows the help as given.
    assert [flag for flag, keywords in LADDER_FLAGS if "%" in keywords["help"]] == []


def web_form(**values: str) -> argparse.Namespace:
    """The parsed options after Locust's start form: the defaults, then text where it sent any."""
    parser = argparse.ArgumentParser()
    add_ladder_arguments(parser)
    return argparse.Namespace(**{**vars(parser.parse_args([])), **values})


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"hold_s": "14", "measure_s": "8", "rungs": " 1,2 ", "refine": "", "endpoint": ""}, None),
        ({"hold_s": "abc"}, "--hold-s 'abc': not a number"),
        ({"hold_s": ""}, "--hold-s is blank"),
        ({"slo_ms": "nan"}, "--slo-ms nan"),
        ({"refine": "150"}, "--refine 150.0"),
        ({"transport": "carrier-pigeon"}, "--transport 'carrier-pigeon': one of local-http"),
        ({"out": " "}, "--out is blank"),
        ({"q_max_basis": "pointy"}, "--q-max-basis 'pointy': give conservative or point"),
    ],
)
def test_the_web_forms_text_is_read_as_the_command_line_is(values, expected):
    options = web_form(**values)
    if expected is None:
        read = ladder_options(options)
        assert read.schedule.rungs == (1, 2) and read.schedule.hold_s == 14.0
        assert read.refine_pct is None and read.endpoint is None
    else:
        with pytest.raises(TtsBenchError, match=re.escape(expected)):
            ladder_options(options)


@settings(max_examples=80, deadline=None)
@given(
    rungs=st.lists(st.integers(1, 500), min_size=1, max_size=8, unique=True).map(sorted),
    hold_s=st.floats(1, 3600),
    share=st.floats(0.01, 1.0),
    idle_s=st.floats(0, 600),
    refine=st.none() | st.floats(0.5, 50),
    underrun=st.none() | st.floats(0.001, 1),
    endpoint=st.none() | st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
)
def test_the_recorded_command_repeats_the_options(
    rungs, hold_s, share, idle_s, refine, underrun, endpoint
):
    parser = argparse.ArgumentParser()
    add_ladder_arguments(parser)
    given_args = ["--rungs", ",".join(map(str, rungs)), "--hold-s", repr(hold_s),
                  "--measure-s", repr(hold_s * share), "--idle-s", repr(idle_s)]  # fmt: skip
    given_args += [] if refine is None else ["--refine", repr(refine)]
    given_args += [] if underrun is None else ["--underrun-slo", repr(underrun)]
    given_args += [] if endpoint is None else ["--endpoint", endpoint]
    first = ladder_options(parser.parse_args(given_args))
    again = ladder_options(parser.parse_args(ladder_arguments(first)))
    assert again == first
