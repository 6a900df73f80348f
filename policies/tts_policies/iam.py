"""IAM least privilege: no wildcard actions, and `Resource: "*"` only for actions that cannot
be scoped (`tts_bench.infra.iam_documents.UNSCOPABLE_ACTIONS`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from tts_bench.infra.iam_documents import UNSCOPABLE_ACTIONS
from tts_policies.preview_values import read, unknowns_reported
from tts_policies.resource_types import (
    IAM_GROUP_POLICY,
    IAM_POLICY,
    IAM_ROLE,
    IAM_ROLE_POLICY,
    IAM_USER_POLICY,
)

Statement = Mapping[str, Any]


def _as_list(value: Any) -> list[Any]:
    return [value] if isinstance(value, str | Mapping) else list(value or [])


def documents(args: ResourceValidationArgs) -> Iterator[tuple[str, Any]]:
    """(where, policy document) of every document the resource carries; unknowns raise."""
    if args.resource_type == IAM_ROLE:
        yield "assumeRolePolicy", read(args.props, "assumeRolePolicy", default=None)
        for index, inline in enumerate(read(args.props, "inlinePolicies", default=[])):
            yield f"inlinePolicies.{index}.policy", read(inline, "policy", default=None)
    elif args.resource_type in (IAM_ROLE_POLICY, IAM_POLICY, IAM_USER_POLICY, IAM_GROUP_POLICY):
        yield "policy", read(args.props, "policy", default=None)


def _statements(document: Any) -> list[Statement] | str:
    """The statements, or why the document cannot be read."""
    if document is None:
        return []
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except json.JSONDecodeError as exc:
            return f"not JSON ({exc.msg})"
    if not isinstance(document, Mapping):
        return "not a JSON object"
    return [s for s in _as_list(document.get("Statement")) if isinstance(s, Mapping)]


def wildcard_action_problems(statement: Statement) -> list[str]:
    if statement.get("Effect") != "Allow":
        return []
    if "NotAction" in statement:
        return ["Allow with NotAction grants every other action"]
    return [
        f"action {a!r} is a wildcard"
        for a in _as_list(statement.get("Action"))
        if a == "*" or str(a).endswith(":*")
    ]


def resource_star_problems(statement: Statement) -> list[str]:
    if statement.get("Effect") != "Allow" or "*" not in _as_list(statement.get("Resource")):
        return []
    scopable = sorted(set(map(str, _as_list(statement.get("Action")))) - UNSCOPABLE_ACTIONS)
    return (
        [f"Resource '*' for actions that can be scoped: {', '.join(scopable)}"] if scopable else []
    )


def statement_policy(
    name: str, description: str, check: Callable[[Statement], list[str]]
) -> ResourceValidationPolicy:
    """A rule applying `check` to every statement of every IAM document."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        with unknowns_reported(report_violation, f"{args.resource_type} {args.name}"):
            for where, document in documents(args):
                statements = _statements(document)
                if isinstance(statements, str):
                    report_violation(f"{where}: {statements}")
                    continue
                for index, statement in enumerate(statements):
                    for problem in check(statement):
                        report_violation(f"{where} statement {index}: {problem}")

    return ResourceValidationPolicy(
        name=name,
        description=description,
        enforcement_level=EnforcementLevel.MANDATORY,
        validate=validate,
    )


NO_WILDCARD_ACTIONS = statement_policy(
    "iam-no-wildcard-actions",
    "Prohibits wildcard IAM actions ('*', 'service:*') and Allow with NotAction.",
    wildcard_action_problems,
)
RESOURCE_STAR_ONLY_UNSCOPABLE = statement_policy(
    "iam-resource-star-only-unscopable",
    "Prohibits Resource '*' except for actions that cannot be scoped to a resource.",
    resource_star_problems,
)
