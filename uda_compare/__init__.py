"""``uda-compare``, a tool over the tasks: supervised training, UDA, SetFit and all labels compared over
labelled-set sizes and seeds, for one task, on your data.

- ``cli``: the command (its options, its help and ``main``);
- ``methods``: what the sweep knows of each task (metrics, defaults) and what each method lays over a run;
- ``runs``: the plan of a sweep and its runs, one after another; ``parallel``: several at once;
- ``summary`` and ``plots``: the tables (summary.md / .csv / .json) and the figures;
- ``setfit_data`` and ``setfit_baseline``: the SetFit baseline on the labelled examples of one run.

It imports uda/, augment/ and tasks/; nothing of those imports it.
"""
