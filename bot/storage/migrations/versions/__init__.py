"""The revisions, oldest first; each module names its ``revision`` and ``down_revision``."""
