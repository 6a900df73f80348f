"""Artifacts: the JSON records the chain writes and reads, and what identifies a build.

One module per artifact kind: `qmax` (with its rungs and their verdicts in `rungs`), `ttotal`,
`plan` (with its deploy shape), `simulation` (with the reading of AWS it ran under), `surge`
and `rehearsal`. The pieces they share have their own: what every artifact carries
(`provenance`), CloudWatch's statistics and a threshold's units (`cloudwatch`), fingerprints,
slugs and file names (`fingerprint`), artifacts as files: loading by kind, the one atomic
write, where a command may write (`files`), the files that travel with a plan (`companions`)
and the import of the published reference run (`reference`). The strict base every model
builds on is the top-level leaf `strict`.

May import: the top-level leaves only (`errors`, `telemetry`, `engine_modes`, `deployment`,
`strict`). Everything else in `tts_bench` builds on this package.
"""
