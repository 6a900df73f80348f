"""Artifacts: the JSON records the chain writes and reads, and what identifies a build.

Holds the pydantic schemas with loading and atomic writing (`schema`), fingerprints, slugs and
file names (`fingerprint`), the one atomic file write (`atomic_file`), the files that travel
with an artifact (`companions`) and the import of the published reference run (`reference`).

May import: the top-level leaves only (`errors`, `telemetry`, `engine_modes`, `deployment`).
Everything else in `tts_bench` builds on this package.
"""
