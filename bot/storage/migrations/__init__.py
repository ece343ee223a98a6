"""Alembic's migration environment for alignbot's database, configured in code (no
``alembic.ini``): ``alignbot.bot.storage.migrate`` runs it with a connection of its own transaction.

- ``env.py``: hands that connection to Alembic; ``target_metadata`` is ``Base.metadata``.
- ``versions/``: one module per revision, oldest first. A revision holds what it needs frozen
  (never imports the live table classes), so it builds the same schema forever.
- ``script.py.mako``: the template of a new revision.

A schema change: edit the table in ``bot/storage/``, then write the revision, e.g.
``alignbot.bot.storage.migrate.new_revision(engine, "add jobs.priority")`` against a database at
head
(it compares ``Base.metadata`` with that database and drafts the operations), review it, and
add a test that upgrades a database of the previous revision with rows in it.
"""
