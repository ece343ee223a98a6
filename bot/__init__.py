"""alignbot's GitHub App: webhooks in, alignment checks on pull requests, one sticky comment out.

Module map (one concern each; none of the feature modules knows about HTTP, and no feature —
alignment, trust, commands, reminders, status — imports another: ``tests/test_layers.py``):

- ``settings.py``   environment settings (pydantic-settings), one clear error per bad value
- ``settings_doc.py`` docs/operations.md's settings table, rendered from the settings model
- ``startup.py``    what ``serve`` and ``worker`` check as they start: the key signs, GitHub
                    takes it, the database answers (waited for); each problem one line
- ``health.py``     a worker's health file and ``alignbot worker --check-health``
- ``storage/``      the database: every table (one module per concern), engines,
                    the upsert helper, and Alembic migrations run at start-up
- ``queue.py``      the durable job queue behind a small interface (SQL now, Celery later)
- ``jobs.py``       the kinds of job, named once (features queue each other's jobs by kind)
- ``webhooks.py``   HMAC verification, delivery de-duplication, routing, enqueue, 2xx at once
- ``app.py``        the FastAPI application (``POST /webhook``, ``GET /healthz``,
                    ``GET /metrics``, the features' pages)
- ``metrics.py``    Prometheus metrics, a registry per App; the queue read at scrape time
- ``logs.py``       JSON or text log lines with the delivery, job and repository ids
- ``api_routes.py`` the GitHub routes the App calls and the permission each needs
- ``manifest.py``   ``alignbot app-manifest``: the GitHub App manifest, from the code
- ``worker.py``     the embedded worker that claims jobs and runs their handlers
- ``errors.py``     the error taxonomy every job shares: transient or not, retry when
- ``github.py``     GitHub App access through PyGithub: JWT, cached installation tokens,
                    bounded retries, configurable API base URL
- ``config/``       ``.github/alignbot.yml``: the per-repository configuration: ``globs``,
                    ``model`` (the sections, the schema), ``loading`` (errors with lines)
- ``sandbox/``      runs untrusted pull-request code (setup + engine) with no secrets,
                    resource limits, a timeout and no network: ``plan`` (limits, mode,
                    uid), ``paths`` (what it may see), ``child`` (the trampoline and init,
                    run as a script), ``runner`` (one command, deadlines, output),
                    ``workspace`` (work folders, the report, stale cleanup)
- ``engine_report.py`` the strict model of the engine's report as it comes out of the sandbox,
                    and the one builder of prefilled upstream links
- ``markers.py``    the bot's own comments, found by author and a marker at the start
- ``alignment.py``  the feature: pull request → job → sandboxed check → check run + comment
- ``sharding.py``   the same feature's sharded checks: ``align-shard`` jobs any worker runs,
                    merged by the last one into the one check run and comment
- ``shard_groups.py`` the shard jobs of a split check, their reports, its one end
- ``check_run.py``  the check run of one head as one job sees it (``CheckRunLifecycle``: none →
                    open → completed or handed over), shared by whole and sharded checks
- ``output.py``     check-run and sticky-comment rendering from templates/, within GitHub's limits
- ``policy.py``     who is trusted: ``/ok-to-test`` records and the head each one binds to,
                    author associations, the base branch's config (read by trust and
                    commands alike)
- ``tenancy.py``    the one rule for every repository a piece of work names: whose token,
                    which writes, what a tenant may be shown
- ``trust.py``      the ``/ok-to-test`` gate for pull requests from outside contributors
- ``commands/``     slash-commands in PR comments and reviews: the parser, the webhook entry,
                    the job (replies, rate limits) and one handler per command
- ``reminders/``    weekly reminders on stale pull requests and the upstream watch digest:
                    one ``reminder-sweep`` job per repository (schedule, facts, CODEOWNERS,
                    the sweep, its store, the job and the pass that queues the jobs)
- ``status/``       the default branch's status: a push → the whole check → results stored
                    per op × dtype × kind (``push``, ``store``); the pages, sign-in with
                    GitHub and who may see what (``pages``, ``view``, ``oauth``, ``access``)
- ``lease.py``      named leases in the database (the upstream digest is written under one)
- ``periodic.py``   a function run every few seconds in a thread (the reminder pass)
- ``workdir.py``    each worker process's own work folder, locked while it lives, and the
                    sweep of the folders of dead ones
- ``serve.py``      ``alignbot serve``: service, worker and the reminder pass in one process
- ``demo.py``       ``alignbot demo``: the whole flow against the GitHub test server
- ``testing/github/`` the GitHub test server: GitHub's REST API over real HTTP on loopback,
                    for the tests, the demo and anyone testing a deployment or a config
- ``cli.py``        ``alignbot``: the engine's commands and the App's, whose modules (and
                    dependencies, the ``app`` extra) are imported only when one runs
"""
