"""The layout is the architecture: each part of the repository imports only what it may.

`ALLOWED` is the rule the subpackages' docstrings state; a module that imports a part it must
not (at the top or inside a function) fails here with the file, the line and the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tts_bench"

# Modules directly under tts_bench/ that anything may import (the container too).
LEAVES = frozenset({"errors", "telemetry", "engine_modes", "deployment", "strict"})
TOP_LEVEL_MODULES = LEAVES | {"__init__", "__main__"}

_EVERYTHING = frozenset(
    {
        "leaves",
        "artifacts",
        "planning",
        "serving",
        "measure",
        "aws",
        "infra",
        "local_cloud",
        "simulate",
        "custody",
        "rehearse",
        "report",
        "jobs",
    }
)
# part -> the parts of tts_bench it may import (itself always included).
ALLOWED: dict[str, frozenset[str]] = {
    "leaves": frozenset({"leaves"}),
    "artifacts": frozenset({"leaves"}),
    "planning": frozenset({"artifacts", "leaves"}),
    "serving": frozenset({"artifacts", "leaves"}),
    "aws": frozenset({"artifacts", "planning", "leaves"}),
    "infra": frozenset({"artifacts", "planning", "aws", "leaves"}),
    "measure": frozenset({"artifacts", "planning", "aws", "serving", "leaves"}),
    "simulate": frozenset({"artifacts", "planning", "leaves"}),
    # Recomputes with the code that measured: the ladder's statistics, the stage builder.
    "custody": frozenset({"artifacts", "planning", "measure", "leaves"}),
    # Drives an endpoint as the measuring code does and replays in the simulator.
    "rehearse": frozenset({"artifacts", "planning", "aws", "measure", "simulate", "leaves"}),
    # The report page reads every artifact and draws the measurement plots; it measures nothing.
    "report": frozenset({"artifacts", "planning", "measure", "leaves"}),
    # Never `measure`: the emulator does not depend on what measures it (the launcher both use
    # lives in `serving`).
    "local_cloud": frozenset({"artifacts", "planning", "aws", "infra", "serving", "leaves"}),
    "jobs": _EVERYTHING,
    "cli": _EVERYTHING | {"cli"},
    "__main__": frozenset({"cli"}),
    # Outside the package: the container ships alone with the leaves; the Pulumi program and
    # the pack read plans and config; the Locust file and benchmarks drive measurements.
    "container": frozenset({"leaves"}),
    "program": frozenset({"artifacts", "planning", "custody", "infra", "leaves"}),
    "loadtest": frozenset({"artifacts", "measure", "serving", "leaves"}),
    # (`aws` for the service clock a compressed local cloud's timestamps are read in: the soak)
    "benchmarks": frozenset(
        {"artifacts", "planning", "serving", "measure", "simulate", "local_cloud", "rehearse"}
        | {"aws", "leaves"}
    ),
}
OUTSIDE = {
    "container": REPO / "container",
    "program": REPO / "components",
    "loadtest": REPO / "loadtest",
    "benchmarks": REPO / "benchmarks",
}


def part_of_module(dotted: str) -> str:
    """The part a `tts_bench...` name belongs to (names in `tts_bench/__init__` are leaves)."""
    pieces = dotted.split(".")
    if len(pieces) > 1 and pieces[1] == "__main__":
        return "__main__"
    if len(pieces) > 1 and (PACKAGE / pieces[1]).is_dir():
        return pieces[1]
    return "leaves"


def part_of_file(path: Path) -> str:
    for part, root in OUTSIDE.items():
        if root in path.parents:
            return part
    if path in (REPO / "__main__.py",) or (REPO / "policies") in path.parents:
        return "program"
    rel = path.relative_to(PACKAGE)
    if len(rel.parts) == 1:
        return "__main__" if rel.stem == "__main__" else "leaves"
    return rel.parts[0]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every tts_bench import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from tts_bench import cli` imports the module tts_bench.cli
            found += [
                (node.lineno, f"{base}.{a.name}" if base == "tts_bench" else base)
                for a in node.names
            ]
    return [(line, name) for line, name in found if name.split(".")[0] == "tts_bench"]


def violations(paths: list[Path]) -> list[str]:
    problems = []
    for path in paths:
        importer = part_of_file(path)
        if importer not in ALLOWED:
            problems.append(f"{path.relative_to(REPO)}: part {importer!r} has no rule in ALLOWED")
            continue
        for line, name in imported_modules(path):
            imported = part_of_module(name)
            if imported != importer and imported not in ALLOWED[importer]:
                problems.append(
                    f"{path.relative_to(REPO)}:{line}: {importer} imports {name} "
                    f"({imported}); {importer} may import only {sorted(ALLOWED[importer])}"
                )
    return problems


def python_files() -> list[Path]:
    roots = [PACKAGE, *OUTSIDE.values(), REPO / "policies"]
    files = [p for root in roots for p in root.rglob("*.py") if "venv" not in p.parts]
    return sorted([*files, REPO / "__main__.py"])


def test_no_part_imports_what_it_must_not() -> None:
    assert violations(python_files()) == []


CLI = PACKAGE / "cli"


def is_subcommand(path: Path) -> bool:
    """A `cli` module that registers a subcommand (option helpers such as `aws_options` do not)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in tree.body)


def subcommand_imports(paths: list[Path]) -> list[str]:
    """Every import of one subcommand module by another module of `cli` (the dispatcher in
    `cli/__init__` aside): what two subcommands share belongs in a helper or the library."""
    subcommands = {
        ".".join(p.relative_to(REPO).with_suffix("").parts)
        for p in CLI.rglob("*.py")
        if is_subcommand(p)
    }
    problems = []
    for path in paths:
        if CLI not in path.parents or path.stem == "__init__":
            continue
        for line, name in imported_modules(path):
            own = ".".join(path.relative_to(REPO).with_suffix("").parts)
            if name in subcommands and name != own:
                problems.append(
                    f"{path.relative_to(REPO)}:{line}: the subcommand module imports "
                    f"{name}, another subcommand; move what both need into a helper module"
                )
    return problems


def test_no_subcommand_module_imports_another() -> None:
    assert subcommand_imports(python_files()) == []


def test_a_subcommand_importing_another_is_caught(tmp_path: Path) -> None:
    copy = CLI / "local" / "weights.py"
    shadow = tmp_path / "shadow.py"
    shadow.write_text(
        copy.read_text(encoding="utf-8") + "\n\nfrom tts_bench.cli.local.synth import run\n",
        encoding="utf-8",
    )
    real_reader = Path.read_text

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        return real_reader(shadow if self == copy else self, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "read_text", read_text)
        found = subcommand_imports([copy])
    assert len(found) == 1 and "tts_bench.cli.local.synth, another subcommand" in found[0], found


def test_the_top_level_holds_only_shared_leaves_and_documented_subpackages() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules <= TOP_LEVEL_MODULES, (
        f"move {sorted(modules - TOP_LEVEL_MODULES)} into a subpackage"
    )
    for sub in (p for p in PACKAGE.iterdir() if (p / "__init__.py").exists()):
        doc = ast.get_docstring(ast.parse((sub / "__init__.py").read_text(encoding="utf-8")))
        assert doc and "import" in doc, (
            f"{sub.name}/__init__.py must say what it holds and may import"
        )
        assert sub.name in ALLOWED, f"tts_bench/{sub.name} has no rule in ALLOWED"


@pytest.mark.parametrize(
    ("where", "planted", "expected"),
    [
        ("planning/plan.py", "from tts_bench.aws.session import AwsClients", "planning imports"),
        ("artifacts/qmax.py", "import tts_bench.measure.ladder.statistics", "artifacts imports"),
        ("aws/drift.py", "from tts_bench.cli import main", "aws imports"),
        ("measure/ladder/statistics.py", "from ...infra import preview", "measure imports"),
        (
            "local_cloud/instances/fleet.py",
            "from tts_bench.measure.ladder import statistics",
            "local_cloud imports",
        ),
        ("serving/local_server.py", "import tts_bench.measure.samples", "serving imports"),
    ],
)
def test_a_planted_illegal_import_is_caught(
    tmp_path: Path, where: str, planted: str, expected: str
) -> None:
    # The same check over a copy of one real module with one bad line added.
    copy = PACKAGE / where
    text = copy.read_text(encoding="utf-8") + f"\n\ndef _planted() -> None:\n    {planted}\n"
    shadow = tmp_path / "shadow.py"
    shadow.write_text(text, encoding="utf-8")
    real_reader = Path.read_text

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        return real_reader(shadow if self == copy else self, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "read_text", read_text)
        found = violations([copy])
    assert len(found) == 1 and expected in found[0], found


def documented_packages(package: str) -> list[Path]:
    """The package's folder and every subpackage below it."""
    return sorted(init.parent for init in (PACKAGE / package).rglob("__init__.py"))


@pytest.mark.parametrize("package", ["measure", "local_cloud", "serving", "jobs"])
def test_a_package_docstring_names_every_module_it_holds(package: str) -> None:
    for folder in documented_packages(package):
        init = folder / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        modules = {p.stem for p in folder.glob("*.py")} - {"__init__"}
        modules |= {p.parent.name for p in folder.glob("*/__init__.py")}
        missing = sorted(m for m in modules if f"`{m}`" not in doc)
        assert missing == [], f"{init.relative_to(REPO)} does not name {missing}"
        assert "import" in doc, f"{init.relative_to(REPO)} must say what it may import"


# Inside a package split into subpackages: sub-part -> the sub-parts it may import, "" being the
# shared modules at the package's top (a sub-part may always import itself). A sub-part is a
# subpackage or one module ("cloud", "control_plane.deploy"); a module belongs to the deepest one
# that holds it. A package's own `__init__` re-exports its front door and is not checked. Each
# subpackage's docstring states its line.
_LOCAL_CLOUD_BELOW_CLOUD = frozenset(
    {"", "cloudwatch", "instances", "instances.curve_model", "control_plane"}
    | {"control_plane.deploy", "data_plane"}
)
INNER: dict[str, dict[str, frozenset[str]]] = {
    # AWS's engine needs only the rounding; the plan, the fleet rule and the deploy shapes use it.
    "planning": {
        "": frozenset({"aws", "rounding"}),
        "rounding": frozenset(),
        "aws": frozenset({"rounding"}),
        # The schedule reads the plan's findings and id, and which periods AWS's crons hold;
        # nothing at the top imports it.
        "schedule": frozenset({"", "aws", "rounding"}),
    },
    "measure": {
        "": frozenset({"transport"}),
        "transport": frozenset(),
        "ladder": frozenset({"", "transport"}),
        "ladder.live": frozenset({"ladder", "", "transport"}),
        "ttotal": frozenset({"", "transport"}),
        "surge": frozenset({"", "transport"}),
    },
    "local_cloud": {
        # The settings name the curve model's service law.
        "": frozenset({"instances.curve_model"}),
        "instances.curve_model": frozenset(),
        "cloudwatch": frozenset({""}),
        # A curve fleet marks the deployment it serves.
        "instances": frozenset({"", "cloudwatch", "instances.curve_model", "control_plane.deploy"}),
        "control_plane.deploy": frozenset({""}),
        "control_plane": frozenset(
            {"", "cloudwatch", "instances", "instances.curve_model", "control_plane.deploy"}
        ),
        "data_plane": _LOCAL_CLOUD_BELOW_CLOUD - {"data_plane"},
        "cloud": _LOCAL_CLOUD_BELOW_CLOUD,
    },
}


def inner_part(package: str, pieces: tuple[str, ...]) -> str:
    """The deepest sub-part of `package` holding the module or package `pieces` (below it)."""
    parts = INNER[package]
    for depth in range(len(pieces), 0, -1):
        if ".".join(pieces[:depth]) in parts:
            return ".".join(pieces[:depth])
    return ""


def inner_violations(paths: list[Path]) -> list[str]:
    problems = []
    for path in paths:
        if PACKAGE not in path.parents:
            continue
        rel = path.relative_to(PACKAGE).with_suffix("").parts
        package = rel[0]
        if package not in INNER or rel[1:] == ("__init__",):
            continue
        importer = inner_part(package, rel[1:])
        for line, name in imported_modules(path):
            pieces = tuple(name.split("."))
            if pieces[:2] != ("tts_bench", package):
                continue
            imported = inner_part(package, pieces[2:])
            allowed = INNER[package][importer]
            if imported != importer and imported not in allowed:
                problems.append(
                    f"{path.relative_to(REPO)}:{line}: {package}.{importer or '(top)'} imports "
                    f"{name} ({package}.{imported or '(top)'}); it may import only "
                    f"{sorted(a or '(top)' for a in allowed)}"
                )
    return problems


def test_no_subpackage_imports_a_sibling_it_must_not() -> None:
    assert inner_violations(python_files()) == []


@pytest.mark.parametrize(
    ("where", "planted", "expected"),
    [
        (
            "measure/surge/figures.py",
            "from tts_bench.measure.ladder.statistics import rung_statistics",
            "measure.surge imports",
        ),
        ("measure/transport/bidi_stream.py", "import tts_bench.measure.samples", "transport"),
        ("measure/samples.py", "from tts_bench.measure.ttotal import probe", "(top) imports"),
        (
            "measure/ladder/run.py",
            "from tts_bench.measure.ladder.live.verification import verification_levels",
            "measure.ladder imports",
        ),
        (
            "planning/aws/scaling.py",
            "from tts_bench.planning.curve import interpolate",
            "planning.aws imports",
        ),
        (
            "local_cloud/cloudwatch/logs.py",
            "from tts_bench.local_cloud.control_plane.moto_host import MotoHost",
            "local_cloud.cloudwatch imports",
        ),
        (
            "local_cloud/settings.py",
            "from tts_bench.local_cloud.cloud import LocalCloud",
            "local_cloud.(top) imports",
        ),
        (
            "local_cloud/control_plane/endpoint.py",
            "from tts_bench.local_cloud.data_plane import runtime",
            "local_cloud.control_plane imports",
        ),
    ],
)
def test_a_planted_sibling_import_is_caught(
    tmp_path: Path, where: str, planted: str, expected: str
) -> None:
    copy = PACKAGE / where
    text = copy.read_text(encoding="utf-8") + f"\n\ndef _planted() -> None:\n    {planted}\n"
    shadow = tmp_path / "shadow.py"
    shadow.write_text(text, encoding="utf-8")
    real_reader = Path.read_text

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        return real_reader(shadow if self == copy else self, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "read_text", read_text)
        found = inner_violations([copy])
    assert len(found) == 1 and expected in found[0], found
