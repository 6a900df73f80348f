"""Measure: taking the figures a plan is built from, and drawing them.

Subpackages, one per measurement, and the client side of the transports:
- `ladder` (Q_max): the closed-loop ladder, its control and statistics; `ladder.live` runs it
  on an endpoint;
- `ttotal` (T_total): one probe, one stage builder, locally or on an endpoint;
- `surge`: open-loop runs at one instance bounded at Q_max and their figures;
- `transport`: the one reader of the server's stream events, the endpoint contracts it reads
  them by, and the client side of response-stream and bidi-stream.

Shared by all of them, at the top: raw samples with their percentiles (`samples`), the request
corpus (`corpus`), what a listener hears (`playback`), the endpoint's build and variant read
from SageMaker (`sagemaker_target`), the open-loop sender (`open_loop`), the plots (`plots`) and
the GPU benchmark summary (`gpu_summary`).

May import: `artifacts`, `planning`, `aws` (a live ladder freezes scaling), `serving` (a local
server to measure) and the top-level leaves. Never `infra`, `local_cloud`, `simulate`, `jobs`
or `cli`. Inside: the shared modules import only `transport`; `ladder`, `ttotal` and `surge`
import the shared modules and `transport`, never each other; `transport` imports nothing else
of `measure` (tests/core/test_layering.py holds the rule).
"""
