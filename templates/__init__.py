"""Jinja2 templates for every text alignbot writes, shipped as ``checks.templates``.

The folder stays at the repository's top level; ``pyproject.toml`` maps the package
``checks.templates`` onto it, so an editable install and a wheel find it the same way
(``checks.report.templates_dir``)."""
