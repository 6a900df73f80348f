"""AWS's scaling engine as the plan is judged under it: Application Auto Scaling's and
CloudWatch's rules for a SageMaker variant (`scaling`), when a scheduled action runs and what
it does to a target (`scheduled`), and the named readings of what AWS leaves open (`semantics`:
the variant sets `documented` and `pessimistic`).

The simulator, the local cloud, `rehearse` and the fleet rule all apply these two modules, so
they cannot disagree about what AWS does with a deployed policy.

May import: `planning.rounding` and the top-level leaves, nothing else of `planning`; the rest
of `planning` may import this.
"""
