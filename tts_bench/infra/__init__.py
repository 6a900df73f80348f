"""Infra: the infrastructure side of the tool, around the Pulumi program and its pack.

Holds the local preview under Pulumi's mocks and the pack (`preview`, `preview_recorder`), the
typed stack config (`stack_config`), image references and pushing (`image_ref`, `image_push`)
and the IAM policy documents the program deploys (`iam_documents`).

May import: `artifacts`, `planning`, `aws` and the top-level leaves. Never `measure`,
`local_cloud`, `simulate`, `jobs` or `cli`.
"""
