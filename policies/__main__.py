"""The CrossGuard policy pack: `pulumi preview --policy-pack policies` runs this."""

from pulumi_policy import EnforcementLevel, PolicyPack
from tts_policies import POLICIES

PolicyPack(
    name="tts-bench-speech",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=POLICIES,
)
