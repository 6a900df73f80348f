"""tts-bench: measure a TTS endpoint, derive its autoscaling plan, and gate deployment on it.

The library is the single source of truth for the artifact schemas, fingerprints and plan
feasibility; the Pulumi program, the policy pack, the Locust ladder and the serving container
import from here rather than re-implementing any of it.
"""

__version__ = "0.1.0"
