"""``manage.py djwork <verb>``: the dashboard's reads and actions from a terminal or a script (docs/cli.md).

Every verb is built on ``djwork.api``, as the dashboard is: the CLI formats
and asks for confirmation, it never reaches Redis itself. One module per verb
family; each has ``register(verbs)``, which adds its sub-commands and points
each at the function that runs it (``run(ctx) -> exit code``).
"""
