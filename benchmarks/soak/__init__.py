"""A soak of the local cloud and the server (issue 40): `scripts/soak --duration-s 1800`.

`settings` (the flags), `targets` (the soaked things, each a child process: a local cloud of
curve instances with a plan, one of a real process instance, a plain `tts_server`), `traffic`
(the open-loop mix of good and hostile clients), `probe` (one resource sample of a process),
`judge` (the bounds over the samples: pure), `report` (the table and the PNG) and `run`
(the phases). docs/soak.md says what it measures and what it found.
"""
