"""The surge: open-loop Poisson arrivals at one instance bounded at Q_max.

What it holds: the runs, locally or on a frozen endpoint (`run`), and their figures beside the
birth-death model's prediction (`figures`).

May import: the shared modules at the top of `measure` (the open-loop sender among them) and
`measure.transport`, and what `measure` may import; never `measure.ladder` or `measure.ttotal`.
"""
