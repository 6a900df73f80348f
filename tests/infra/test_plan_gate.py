"""The gate rule shared by the program and the pack, image references and the stack file."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.infra.conftest import OTHER_DIGEST, REFERENCE_DIGEST, REGISTRY_REPO
from tts_bench.artifacts.plan import PlanArtifact
from tts_bench.custody.gate import evaluate
from tts_bench.deployment import (
    OperatorBounds,
    is_local_image,
    is_local_package,
    local_image_reference,
    local_package_arn,
)
from tts_bench.infra.image_ref import ImageReferenceError, parse_pinned, parse_repository
from tts_bench.infra.stack_config import StackConfigError, set_stack_value, stack_values
from tts_bench.planning.gate import GateCondition, GateQuery, performance_env_of, select_plan


def query(**changes: Any) -> GateQuery:
    base: dict[str, Any] = {
        "model": "kokoro-82m",
        "instance_type": "ml.g5.xlarge",
        "image_digest": REFERENCE_DIGEST,
        "bounds": OperatorBounds(min_instances=1, max_instances=20),
        "rule": "published",
    }
    return GateQuery(**{**base, **changes})


@pytest.mark.parametrize(
    ("changes", "condition", "reason"),
    [
        ({}, GateCondition.ENABLED, "deploying min 1 / max 20 instances"),
        (
            {"bounds": OperatorBounds(min_instances=2, max_instances=2)},
            GateCondition.SCALING_DISABLED,
            "equals minInstances (2)",
        ),
        ({"model": "kokoro-1b"}, GateCondition.NO_PLAN, "is for model kokoro-1b on ml.g5.xlarge"),
        ({"instance_type": "ml.g6.xlarge"}, GateCondition.NO_PLAN, "on ml.g6.xlarge"),
        (
            {"image_digest": OTHER_DIGEST},
            GateCondition.DIGEST_MISMATCH,
            "measured on image(s) 8b1b96bc",
        ),
        (
            {"performance_env": {"ENGINE_MODE": "batch"}},
            GateCondition.ENV_MISMATCH,
            "another performance env",
        ),
        (
            {"surge_ratio": 1.2},
            GateCondition.INPUTS_MISMATCH,
            "surge ratio of 1.25, the stack asks 1.2",
        ),
        ({"slo_ms": 3000.0, "surge_ratio": 1.25}, GateCondition.ENABLED, "matches and is feasible"),
    ],
)
def test_gate_conditions(
    reference_plan_path: Path, changes: dict[str, Any], condition: GateCondition, reason: str
) -> None:
    result = evaluate(reference_plan_path.parent, query(**changes))
    assert result.condition is condition
    assert reason in result.reason
    assert result.enabled == (condition is GateCondition.ENABLED)


@pytest.mark.parametrize(
    ("with_measured", "image_is_local", "condition"),
    [
        (False, False, GateCondition.EMULATED_PLAN),
        (False, True, GateCondition.ENABLED),
        (True, False, GateCondition.ENABLED),  # the measured plan gates; the emulated one never
    ],
)
def test_an_emulated_plan_gates_only_a_local_image(
    with_measured: bool,
    image_is_local: bool,
    condition: GateCondition,
    emulated_plan: PlanArtifact,
    reference_plan: PlanArtifact,
    plans_dir: Callable[..., Path],
) -> None:
    plans = [reference_plan, emulated_plan] if with_measured else [emulated_plan]
    result = evaluate(plans_dir(*plans), query(image_is_local=image_is_local))
    assert result.condition is condition, result.reason
    if result.plan is not None:
        assert (result.plan.provenance.kind == "emulated") == image_is_local
    if condition is GateCondition.EMULATED_PLAN:
        assert "plan-test-0.json" in result.reason and "measure the real endpoint" in result.reason


@pytest.mark.parametrize(
    ("image_is_local", "condition"),
    [(False, GateCondition.POINT_Q_MAX), (True, GateCondition.ENABLED)],
)
def test_a_plan_on_a_point_q_max_gates_only_a_local_image(
    image_is_local: bool,
    condition: GateCondition,
    make_plan: Callable[..., PlanArtifact],
    plans_dir: Callable[..., Path],
):
    point = make_plan()
    point = point.model_copy(
        update={"inputs": point.inputs.model_copy(update={"q_max_basis": "point"})}
    )
    result = select_plan(plans_dir(point), query(image_is_local=image_is_local))
    assert result.condition is condition, result.reason
    if not image_is_local:
        assert "plan-test-0.json" in result.reason and "--q-max-basis point" in result.reason
        assert "re-measure with the default --q-max-basis conservative" in result.reason
    # beside a plan whose basis is not the point one, a real image gets that plan
    both = select_plan(plans_dir(make_plan(), point, name="both"), query())
    assert both.enabled and both.plan.inputs.q_max_basis is None, both.reason


@pytest.mark.parametrize(
    ("reference", "local"),
    [
        (local_image_reference(REFERENCE_DIGEST), True),
        (f"{REGISTRY_REPO}@{REFERENCE_DIGEST}", False),
        (f"local/tts-server:{REFERENCE_DIGEST[7:]}", False),
        ("local/tts-server@sha256:abc", False),
    ],
)
def test_a_local_image_is_told_from_a_registry_image(reference: str, local: bool) -> None:
    assert is_local_image(reference) is local


@pytest.mark.parametrize("held", [False, True], ids=["sellers", "local-clouds"])
def test_an_emulated_package_plan_gates_only_a_package_the_local_cloud_holds(
    held: bool, make_plan: Callable[..., PlanArtifact], plans_dir: Callable[..., Path]
) -> None:
    """As a local digest is in no registry, the local cloud's package is in no seller's account
    (the all-zero one): a plan measured on it never gates a seller's package."""
    package = local_package_arn(SONIC3_PACKAGE) if held else SONIC3_PACKAGE
    assert is_local_package(package) is held and not is_local_package(local_image_reference(""))
    provenance = make_plan().provenance.model_dump(mode="json") | {"kind": "emulated"}
    emulated = make_plan(fingerprint={"model_package": package}, provenance=provenance)
    result = select_plan(
        plans_dir(emulated),
        query(image_digest=None, model_package=package, image_is_local=is_local_package(package)),
    )
    assert result.condition is (GateCondition.ENABLED if held else GateCondition.EMULATED_PLAN)
    assert held or "nor one whose model package is not the local cloud's" in result.reason


def test_the_bound_is_no_performance_setting() -> None:
    assert performance_env_of({"MAX_QUEUE_DEPTH": "50", "ENGINE_MODE": "serial"}) == {
        "ENGINE_MODE": "serial"
    }


@pytest.mark.parametrize(
    ("rule", "name"),
    [
        ("fleet", "plan-kokoro-82m-fleet-g5xlarge-8b1b96bc.json"),
        ("published", "plan-kokoro-82m-g5xlarge-8b1b96bc.json"),
    ],
)
def test_the_gate_deploys_the_plan_of_the_stacks_rule(
    reference_plan_path: Path, rule: str, name: str
) -> None:
    result = evaluate(reference_plan_path.parent, query(rule=rule))
    assert result.enabled and result.plan is not None, result.reason
    assert Path(result.plan_path or "").name == name and result.plan.rule == rule


def test_no_plan_of_the_stacks_rule_and_two_of_it_are_refused_in_one_line(
    reference_plan: PlanArtifact, plans_dir: Callable[..., Path]
) -> None:
    only_published = evaluate(plans_dir(reference_plan), query(rule="fleet"))
    assert only_published.condition is GateCondition.RULE_MISMATCH
    assert "no fleet plan for this image" in only_published.reason
    assert "--rule fleet" in only_published.reason and "\n" not in only_published.reason
    twice = evaluate(plans_dir(reference_plan, reference_plan), query())
    assert twice.condition is GateCondition.AMBIGUOUS and twice.plan is None
    assert "2 published plans match this image (plan-test-0.json, plan-test-1.json)" in (
        twice.reason
    )


def test_the_stack_config_says_which_rule_it_deploys() -> None:
    from tts_bench.infra.stack_config import StackConfig

    base = {
        "model": "kokoro-82m", "instanceType": "ml.g5.xlarge",
        "image": f"{REGISTRY_REPO}@{REFERENCE_DIGEST}", "minInstances": 1, "maxInstances": 20,
        "sloMs": 3000, "surgeRatio": 1.25, "region": "us-east-1", "modelRevision": "a" * 40,
    }  # fmt: skip
    assert StackConfig.parse(base).plan_rule == "fleet"
    assert StackConfig.parse({**base, "planRule": "published"}).plan_rule == "published"
    with pytest.raises(StackConfigError, match="planRule"):
        StackConfig.parse({**base, "planRule": "guess"})


def test_infeasible_and_unreadable_plans(
    infeasible_plan: PlanArtifact, plans_dir: Callable[..., Path]
) -> None:
    folder = plans_dir(infeasible_plan)
    (folder / "plan-broken.json").write_text("{")
    result = evaluate(folder, query())
    assert result.condition is GateCondition.INFEASIBLE
    assert "stop: slo_ceiling" in result.reason
    assert len(result.unreadable) == 1 and "plan-broken.json" in result.unreadable[0]


def test_a_missing_folder_is_no_plan(tmp_path: Path) -> None:
    result = evaluate(tmp_path / "absent", query())
    assert result.condition is GateCondition.NO_PLAN and "does not exist" in result.reason


@given(
    account=st.from_regex(r"\d{12}", fullmatch=True),
    repository=st.from_regex(r"[a-z0-9]{1,8}(/[a-z0-9]{1,8})?", fullmatch=True),
    digest=st.from_regex(r"[0-9a-f]{64}", fullmatch=True),
)
def test_pinned_references_round_trip(account: str, repository: str, digest: str) -> None:
    reference = f"{account}.dkr.ecr.eu-west-1.amazonaws.com/{repository}@sha256:{digest}"
    image = parse_pinned(reference)
    assert (image.account, image.region, image.repository, image.reference) == (
        account,
        "eu-west-1",
        repository,
        reference,
    )
    assert parse_repository(reference).repository == repository


@pytest.mark.parametrize(
    ("reference", "expected_error"),
    [
        (f"{REGISTRY_REPO}:v1", "pinned only by tag (v1)"),
        (f"{REGISTRY_REPO}:v1@{REFERENCE_DIGEST}", "carries both a tag and a digest"),
        (f"docker.io/library/nginx@{REFERENCE_DIGEST}", "not an ECR reference pinned by digest"),
        (f"{REGISTRY_REPO}@sha256:abc", "not an ECR reference pinned by digest"),
    ],
)
def test_unpinned_references_are_refused(reference: str, expected_error: str) -> None:
    with pytest.raises(ImageReferenceError, match=re.escape(expected_error)):
        parse_pinned(reference)


def test_setting_a_stack_value_keeps_the_rest_of_the_file(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: p\nruntime: python\n")
    text = "# keep me\nconfig:\n  aws:region: us-east-1 # and me\n  p:image: old\n"
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    set_stack_value(tmp_path, "dev", "image", "a: b")
    assert (tmp_path / "Pulumi.dev.yaml").read_text() == text.replace(
        "p:image: old", 'p:image: "a: b"'
    )
    set_stack_value(tmp_path, "dev", "sloMs", "3000")
    assert stack_values(tmp_path, "dev") == {
        "aws:region": "us-east-1",
        "p:image": "a: b",
        "p:sloMs": "3000",
    }
    with pytest.raises(StackConfigError, match="no such file"):
        stack_values(tmp_path, "prod")


SONIC3_REF = {"name": "sonic3", "sha256": "e" * 64}


def test_a_plan_gates_only_a_stack_of_its_contract(
    make_plan: Callable[..., PlanArtifact],
    reference_plan: PlanArtifact,
    plans_dir: Callable[..., Path],
) -> None:
    """Issue 39: a Kokoro plan never gates a Sonic-3 stack, nor a Sonic-3 plan a Kokoro one."""
    sonic3 = make_plan(fingerprint={"contract": SONIC3_REF})
    kokoro_only, sonic3_only = plans_dir(reference_plan, name="k"), plans_dir(sonic3, name="s")
    refused = select_plan(kokoro_only, query(contract="sonic3"))
    assert refused.condition is GateCondition.CONTRACT_MISMATCH and not refused.enabled
    assert "measured under contract(s) kokoro, not sonic3" in refused.reason
    reverse = select_plan(sonic3_only, query())
    assert reverse.condition is GateCondition.CONTRACT_MISMATCH
    assert "measured under contract(s) sonic3, not kokoro" in reverse.reason
    assert select_plan(sonic3_only, query(contract="sonic3")).enabled


def test_the_stack_config_names_its_contract() -> None:
    from tts_bench.infra.stack_config import StackConfig

    base = {
        "model": "sonic-3", "instanceType": "ml.g6e.xlarge",
        "image": f"{REGISTRY_REPO}@{REFERENCE_DIGEST}", "minInstances": 1, "maxInstances": 20,
        "sloMs": 3000, "surgeRatio": 1.25, "region": "us-east-1", "modelRevision": "a" * 40,
    }  # fmt: skip
    assert StackConfig.parse(base).contract == "kokoro"
    assert StackConfig.parse({**base, "contract": "sonic3"}).contract == "sonic3"
    with pytest.raises(StackConfigError, match="contract"):
        StackConfig.parse({**base, "contract": "Sonic 3"})


SONIC3_PACKAGE = "arn:aws:sagemaker:us-east-1:865070037744:model-package/sonic-3-standin/2"


def test_a_package_plan_gates_only_that_package_version(
    make_plan: Callable[..., PlanArtifact],
    reference_plan: PlanArtifact,
    plans_dir: Callable[..., Path],
) -> None:
    """Issue 39: a plan measured on a model package never gates an image, another package or
    another version of it; an image plan never gates a package (even one of the same digest)."""
    package_plan = make_plan(fingerprint={"model_package": SONIC3_PACKAGE})
    assert package_plan.fingerprint.image_digest == reference_plan.fingerprint.image_digest
    packages, images = plans_dir(package_plan, name="p"), plans_dir(reference_plan, name="i")
    assert select_plan(packages, query(image_digest=None, model_package=SONIC3_PACKAGE)).enabled
    image_stack = select_plan(packages, query())
    assert image_stack.condition is GateCondition.DIGEST_MISMATCH
    assert f"measured on model package(s) {SONIC3_PACKAGE}, not {REFERENCE_DIGEST}" in (
        image_stack.reason
    )
    next_version = select_plan(
        packages, query(image_digest=None, model_package=SONIC3_PACKAGE[:-1] + "3")
    )
    assert next_version.condition is GateCondition.DIGEST_MISMATCH
    package_stack = select_plan(images, query(image_digest=None, model_package=SONIC3_PACKAGE))
    assert package_stack.condition is GateCondition.DIGEST_MISMATCH
    assert "no plan for this model package" in package_stack.reason
    assert "measured on image(s) " in package_stack.reason


def test_a_package_plans_file_names_its_package(
    make_plan: Callable[..., PlanArtifact], reference_plan: PlanArtifact
) -> None:
    package_fp = make_plan(fingerprint={"model_package": SONIC3_PACKAGE}).fingerprint
    assert package_fp.slug.startswith(reference_plan.fingerprint.slug + "-pkg")
    assert not package_fp.same_build(reference_plan.fingerprint)
    assert "model_package: " + SONIC3_PACKAGE + " != (an image)" in package_fp.differences(
        reference_plan.fingerprint
    )
    # An image's fingerprint writes no model_package key: its artifacts keep their bytes.
    assert "model_package" not in reference_plan.fingerprint.model_dump(mode="json")


def _stack(**changes: Any) -> dict[str, Any]:
    base = {
        "model": "sonic-3", "instanceType": "ml.g6e.xlarge",
        "image": f"{REGISTRY_REPO}@{REFERENCE_DIGEST}", "minInstances": 1, "maxInstances": 20,
        "sloMs": 3000, "surgeRatio": 1.25, "region": "us-east-1", "modelRevision": "a" * 40,
    }  # fmt: skip
    return {k: v for k, v in {**base, **changes}.items() if v is not None}


def test_the_stack_config_deploys_an_image_or_a_model_package() -> None:
    from tts_bench.infra.stack_config import StackConfig

    package_stack = _stack(  # a package has no weights of ours to cache: no modelRevision
        image=None, modelPackageArn=SONIC3_PACKAGE, account="111122223333", modelRevision=None
    )
    package = StackConfig.parse(package_stack).model_package
    assert package is not None
    assert (package.name, package.version, package.account) == (
        "sonic-3-standin",
        2,
        "865070037744",
    )
    assert StackConfig.parse(_stack()).model_package is None


@pytest.mark.parametrize(
    ("changes", "expected_error"),
    [
        (
            {"modelPackageArn": SONIC3_PACKAGE},
            "set exactly one of image (an image digest) and modelPackageArn",
        ),
        ({"image": None}, "set exactly one of image (an image digest) and modelPackageArn"),
        (
            {"image": None, "modelPackageArn": SONIC3_PACKAGE.rsplit("/", 1)[0]},
            "names no version; append it (/<version>)",
        ),
        (
            {"image": None, "modelPackageArn": SONIC3_PACKAGE.replace("model-package", "model")},
            "is not a model package ARN (arn:aws:sagemaker:<region>:<12-digit account>:",
        ),
        (
            {"image": None, "modelPackageArn": SONIC3_PACKAGE.replace("865070037744", "86507")},
            "is not a model package ARN",
        ),
        ({"image": None, "modelPackageArn": SONIC3_PACKAGE[:-1] + "0"}, "is not a model package"),
        (
            {"image": None, "modelPackageArn": SONIC3_PACKAGE, "account": None},
            "a modelPackageArn stack needs account (your 12-digit AWS account",
        ),
        ({"account": "111122223333"}, "account is for a modelPackageArn stack"),
        ({"modelRevision": None}, "an image stack needs modelRevision"),
    ],
)
def test_a_stack_config_with_both_or_neither_or_a_bad_arn_is_refused_in_one_line(
    changes: dict[str, Any], expected_error: str
) -> None:
    from tts_bench.infra.stack_config import StackConfig

    if changes.get("image", "") is None:
        changes = {"account": "111122223333", **changes}
    with pytest.raises(StackConfigError, match=re.escape(expected_error)) as caught:
        StackConfig.parse(_stack(**changes))
    assert "\n" not in str(caught.value)
