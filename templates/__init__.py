"""Jinja2 templates for every text alignbot writes, shipped as ``alignbot.checks.templates``.

The folder stays at the repository's top level; ``pyproject.toml`` maps the package
``alignbot.checks.templates`` onto it, so an editable install and a wheel find it the same way
(``alignbot.checks.report.templates_dir``)."""
