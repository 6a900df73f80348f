"""The local cloud: a SageMaker endpoint on this machine (SPEC §11). May import artifacts,
planning, measure, aws, infra and the leaves."""
