"""Simulation: a plan replayed on traffic at fleet scale, policies side by side (SPEC §12).

Holds `service` (per-instance curves from the qmax artifact), `deploy_shape` (the deployed
scaling settings, read from the plan and `deployment` in one place), `policies` (plan, naive,
fixed:N, plan+burst), `traffic` (traces and synthetic generators), `controller` (SageMaker's
scaling semantics, shared by both models), `fleet` (the fast model: per-instance occupancies
as a histogram, an exact event loop compiled with numba), `requests` (the request-level
reference model), `replay` (one policy over one traffic, either model), `outcome`, `plot`
and `from_files` (load, check, run, write the artifact and the PNG).

May import: `artifacts`, `planning` and the top-level leaves only.
"""
