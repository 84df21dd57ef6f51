"""Workflows: chains, groups and chords, run as a sequence of batches.

A flow is a list of *stages*, each one batch: a single step (a chain's link)
or a group of steps run side by side. When a stage's batch ends, its
``on_complete`` callback, the built-in job ``cogworker.flow_step``, starts the
next stage with the previous one's result as each step's first argument (a
group's results as a list, in order: a chord). The failure policy of the
edge into a stage (``if_failed``) says what happens when the stage before it
did not all succeed: ``fail`` (the default: the stage's jobs, and every later
stage's, end as failed with ``DependencyFailed``), ``drop`` (the flow ends
there) or ``run`` (it runs anyway; a failed step's result is ``None``).
"""

from cogworker_async.workflows.canvas import Chain, Group, Step, chain, chord, group, step
from cogworker_async.workflows.results import batch_results
from cogworker_async.workflows.runner import FLOW_STEP

__all__ = [
    "FLOW_STEP",
    "Chain",
    "Group",
    "Step",
    "batch_results",
    "chain",
    "chord",
    "group",
    "step",
]
