"""ECR image references: parse them, and refuse any that is not pinned by digest.

A tag can be moved to another image; a digest cannot. The plan gate matches plans by digest, so
the stack config, the program and `tts-bench image push` accept only
`<account>.dkr.ecr.<region>.amazonaws.com/<repository>@sha256:<64 hex>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tts_bench.errors import TtsBenchError

_REGISTRY = r"(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com"
_REPOSITORY = r"(?P<repository>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
_DIGEST = r"(?P<digest>sha256:[0-9a-f]{64})"
_PINNED = re.compile(rf"^{_REGISTRY}/{_REPOSITORY}@{_DIGEST}$")
_ANY = re.compile(rf"^{_REGISTRY}/{_REPOSITORY}(?::(?P<tag>[\w][\w.-]{{0,127}}))?(?:@{_DIGEST})?$")


class ImageReferenceError(TtsBenchError):
    """An image reference is malformed or not pinned by digest."""


@dataclass(frozen=True)
class EcrRepository:
    """An ECR repository: where images are pushed and pulled."""

    account: str
    region: str
    repository: str

    @property
    def registry(self) -> str:
        return f"{self.account}.dkr.ecr.{self.region}.amazonaws.com"

    @property
    def repository_uri(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def repository_arn(self) -> str:
        return f"arn:aws:ecr:{self.region}:{self.account}:repository/{self.repository}"


@dataclass(frozen=True)
class EcrImage(EcrRepository):
    """A digest-pinned ECR image."""

    digest: str

    @property
    def reference(self) -> str:
        return f"{self.repository_uri}@{self.digest}"

    def __str__(self) -> str:
        return self.reference


def parse_pinned(reference: str) -> EcrImage:
    """The pinned image `reference` names; a tag-only or foreign reference is refused."""
    match = _PINNED.match(reference.strip())
    if match:
        return EcrImage(
            account=match["account"],
            region=match["region"],
            repository=match["repository"],
            digest=match["digest"],
        )
    loose = _ANY.match(reference.strip())
    if loose and loose["tag"] and not loose["digest"]:
        raise ImageReferenceError(
            f"image {reference!r} is pinned only by tag ({loose['tag']}); a tag can move, so use "
            "the digest: run `tts-bench image push --stack <stack>` or write <repository>@sha256:<digest>"
        )
    if loose and loose["tag"] and loose["digest"]:
        raise ImageReferenceError(
            f"image {reference!r} carries both a tag and a digest; keep only @{loose['digest']}"
        )
    raise ImageReferenceError(
        f"image {reference!r} is not an ECR reference pinned by digest; expected "
        "<account>.dkr.ecr.<region>.amazonaws.com/<repository>@sha256:<64 hex>"
    )


def parse_repository(reference: str) -> EcrRepository:
    """The repository of any ECR reference, pinned, tagged or bare (for pushing to it)."""
    match = _ANY.match(reference.strip())
    if not match:
        raise ImageReferenceError(
            f"image {reference!r} is not an ECR reference; expected "
            "<account>.dkr.ecr.<region>.amazonaws.com/<repository>[@sha256:<digest>]"
        )
    return EcrRepository(
        account=match["account"], region=match["region"], repository=match["repository"]
    )


def is_tag_only(reference: str) -> bool:
    match = _ANY.match(reference.strip())
    return bool(match and match["tag"] and not match["digest"])
