"""The default branch's status: a push to it runs the whole configured check and stores what
it found per op × dtype × kind (``push.py``, ``store.py``); the App's pages show it
(``pages.py``, ``view.py``), to anyone for a public repository and to those who may read a
private one once they signed in with GitHub (``oauth.py``, ``access.py``)."""

from .access import GitHubViewers
from .oauth import GitHubOAuth, Sessions
from .pages import StatusPages, router
from .push import JOB_KIND, Checker, StatusJob, register
from .store import KnownLookup, KnownMatch, record_run, results_at

__all__ = ["JOB_KIND", "Checker", "GitHubOAuth", "GitHubViewers", "KnownLookup", "KnownMatch",
           "Sessions", "StatusJob", "StatusPages", "record_run", "register", "results_at",
           "router"]
