"""Tasks: one package each (``text``, ``qa``, ``passages``), plus ``common`` for what several share.

Importing this package imports each task package, and each registers itself with ``uda.task`` (the
registry the core owns) under its name(s), with its config sections; ``configs/<name>.yaml`` holds a
task's defaults. A task package's factory imports its task module only when a task is made, so
listing tasks and parsing options stay cheap. Adding a task: docs/adding_a_task.md.
"""

import augment  # noqa: F401 (registers the "augment" config section every task has)
from tasks import passages, qa, text  # noqa: F401 (each registers its task)
from uda.task import get_task, register_task  # noqa: F401 (re-exported: tasks.get_task)
