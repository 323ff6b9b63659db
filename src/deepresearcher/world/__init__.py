"""The synthetic web: a seeded, offline web of invented entities, its pages and question tasks.

No pretrained model has seen these names, so an agent can only answer by searching and reading.
"""

from deepresearcher.world.build import GENERATOR_VERSION, build_world, iter_pages, load_manifest, load_tasks
from deepresearcher.world.tasks import TASK_TYPES, UNANSWERABLE_ANSWER, Hop, Task

__all__ = ["GENERATOR_VERSION", "TASK_TYPES", "UNANSWERABLE_ANSWER", "Hop", "Task", "build_world",
           "iter_pages", "load_manifest", "load_tasks"]
