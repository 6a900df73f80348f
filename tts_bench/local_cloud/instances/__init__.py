"""The instances behind the endpoint: real server processes, or curves that serve as one did.

What it holds: the `fleet` of real `python -m tts_server` instance processes; instances that
run any container command keeping SageMaker's contract (`container_command`); curve instances
(`curve_model`, `curve_instance`, `curve_fleet`), which serve at a ladder's measured curve
instead of synthesising; and the digest of the image they stand for (`image_digest`). One curve
instance of constant throughput on its own (`serial_curve`) is a known truth a ladder is checked
against (`--curve-check`): its true Q_max follows by arithmetic (`curve_truth`).

May import: the shared modules at the top of `local_cloud` (never `cloud`), `cloudwatch`,
`control_plane.deploy` (a curve fleet marks the deployment it serves), and what `local_cloud`
may import.
"""
