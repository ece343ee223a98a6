"""bot/commands/ and bot/trust.py: slash-commands parsed from comments and reviews, acted on
by the ``command`` job against the GitHub test server, and the ``/ok-to-test`` gate in front
of the ``align`` job."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from alignbot.bot import commands
from alignbot.bot.alignment import AlignmentJob, on_pull_request
from alignbot.bot.commands import (
    CommandJob,
    RateLimit,
    on_issue_comment,
    on_review,
    reminder_settings,
    upstream_item,
)
from alignbot.bot.demo import (
    INSTALLATION,
    NUMBER,
    OWNER,
    REPO,
    SECRET,
    deliver,
    free_port,
    settings_for,
)
from alignbot.bot.demo import running as running_service
from alignbot.bot.demo import seed as demo_seed
from alignbot.bot.demo import wait_for as wait_until
from alignbot.bot.github import ApiOptions, GitHubApp
from alignbot.bot.policy import SEEN_AT
from alignbot.bot.queue import JobRecord, JobRequest, JobState, SqlJobQueue
from alignbot.bot.sandbox import SandboxResult
from alignbot.bot.storage import UPSTREAM, make_engine, migrate, utcnow
from alignbot.bot.testing.github import GitHubServer
from alignbot.bot.trust import WAITING_MARKER, TrustGate, is_ok
from alignbot.bot.webhooks import Event

ROOT = Path(__file__).resolve().parent.parent

CONFIG = (ROOT / "examples" / "fastops" / ".github" / "alignbot.yml").read_text()
FASTOPS = (ROOT / "examples" / "fastops" / "fastops.py").read_text()
AUTHOR = "contributor"
BOT = "alignbot[bot]"
ROLES = {"admin": "ada", "write": "wes", "read": "rita", "none": "nora"}
CANDIDATE_BUG, REFERENCE_SUSPECT = "a1b2c3d4e5f6", "0f9e8d7c6b5a"
FINDING_BASE = {"count": 1, "observation": "output", "node": "v1", "program": {}}
REPORT = {
    "report_version": 1, "candidate": "fastops", "specs": ["activations.softplus",
                                                           "special.erf"],
    "specs_run": 2, "programs_run": 24, "seed": 1, "reference": "2.5.0",
    "findings": [
        {**FINDING_BASE, "fingerprint": CANDIDATE_BUG, "kind": "grad-mismatch",
         "spec": "activations.softplus",
         "op": "torch.nn.functional.softplus", "message": "gradient differs",
         "verdict": "candidate-bug", "verdict_reason": "the candidate is off",
         "repro": "import torch\nprint('softplus repro')\n", "repro_verified": True,
         "upstream_draft": None, "upstream_title": None, "upstream_url": None},
        {**FINDING_BASE, "fingerprint": REFERENCE_SUSPECT, "kind": "value-mismatch",
         "spec": "special.erf",
         "op": "torch.erf", "message": "values differ", "verdict": "reference-suspect",
         "verdict_reason": "float64 sides with the candidate",
         "repro": "import torch\nprint('erf repro')\n", "repro_verified": True,
         "upstream_title": "torch.erf is inaccurate for float32 inputs near 3",
         "upstream_draft": "### 🐛 Describe the bug\n\n`torch.erf` is off by 2 ulp @here.\n",
         "upstream_url": "https://github.com/pytorch/pytorch/issues/new?title=erf"},
    ],
}


def sha(label: str) -> str:
    return hashlib.sha1(label.encode()).hexdigest()


@dataclass
class Clock:
    """The GitHub test server's clock in these tests: it moves only when told, a minute at a
    time, so that pushes and comments are in order (GitHub's times have whole seconds)."""

    now: datetime = field(default_factory=lambda: utcnow().replace(microsecond=0)
                          - timedelta(days=1))

    def __call__(self) -> datetime:
        return self.now

    def tick(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


@dataclass
class Env:
    """The GitHub test server with one pull request, a database and the two job handlers."""

    github: GitHubServer
    queue: SqlJobQueue
    job: CommandJob
    align: AlignmentJob
    head: str
    clock: Clock

    def comment(self, body: str, user: str, number: int = NUMBER) -> dict[str, Any]:
        """``user`` comments ``body`` a minute after whatever happened last; the webhook's job
        runs; returns its result."""
        self.clock.tick()
        comment = self.github.add_comment(OWNER, REPO, number, body, user)
        payload = self.github.webhook("issue_comment.created", OWNER, REPO,
                                      comment_id=comment.id)
        requests = on_issue_comment(Event("issue_comment", "created", f"d-{comment.id}",
                                          payload))
        return self.run(requests)[0] if requests else {}

    def run(self, requests: list[JobRequest]) -> list[dict[str, Any]]:
        return [self.job(record(request)) or {} for request in requests]

    def replies(self, number: int = NUMBER) -> list[str]:
        return [c.body for c in self.github.comments_on(OWNER, REPO, number)
                if c.user.login == BOT]

    def reactions(self, comment_id: int) -> list[str]:
        return [r.content for r in self.github.comments[comment_id].reactions]

    def align_jobs(self) -> list[JobRecord]:
        """The ``align`` jobs queued by commands (not by ``pull_request`` webhooks)."""
        return [job for job in self.queue.list(kind="align") if SEEN_AT not in job.payload]

    def run_align(self) -> dict[str, Any] | None:
        """Claim the next queued ``align`` job and run it (with the fake sandbox)."""
        job = self.queue.claim("test")
        assert job is not None and job.kind == "align"
        result = self.align(job)
        self.queue.complete(job.id, result)
        return result

    def finish_check(self, report: dict[str, Any] = REPORT) -> None:
        """A completed ``align`` job with ``report``, as /repro and /upstream read it."""
        job_id = self.queue.enqueue(JobRequest("align", f"{OWNER}/{REPO}#{NUMBER}",
                                               {"head_sha": self.head}))
        assert self.queue.claim("test") is not None
        self.queue.complete(job_id, {"report": report})


def record(request: JobRequest) -> JobRecord:
    now = utcnow()
    return JobRecord(0, request.kind, request.key, request.payload, JobState.RUNNING, 1, None,
                     None, now, now, now, "test")


def fake_sandbox(*args: Any, **kwargs: Any) -> SandboxResult:
    report = {**REPORT, "findings": []}
    return SandboxResult(report, 0, None, "", "", 0.1)


def seed(github: GitHubServer, config: str = CONFIG, association: str = "CONTRIBUTOR",
         head_config: str | None = None) -> str:
    """demo-org/fastops with ``config`` on main and pull request #1 by ``contributor``."""
    base = {".github/alignbot.yml": config, "fastops.py": FASTOPS}
    head = {**base, "fastops.py": FASTOPS + "\n# faster\n"}
    if head_config is not None:
        head[".github/alignbot.yml"] = head_config
    base_sha, head_sha = sha(str(base)), sha(str(head))
    github.add_installation(INSTALLATION, OWNER)
    github.add_repo(OWNER, REPO, INSTALLATION, files_by_ref={base_sha: base})
    github.add_pull(OWNER, REPO, NUMBER, head_sha, base_sha, "Faster softplus", AUTHOR,
                    head_tree=head, author_association=association,
                    files=[{"filename": "fastops.py", "patch": "@@ -1,1 +1,2 @@\n a\n+b"}])
    for role, login in ROLES.items():
        github.set_permission(OWNER, REPO, login, role)
    return head_sha


def make_env(github: GitHubServer, tmp_path: Path, **seeding: Any) -> Env:
    clock = Clock()
    github.clock = clock
    head = seed(github, **seeding)
    engine = make_engine(f"sqlite:///{tmp_path / 'bot.db'}")
    migrate(engine)
    queue = SqlJobQueue(engine)
    app = GitHubApp(github.app_id, github.private_key_pem, ApiOptions(
        base_url=github.url, seconds_between_writes=0, retries=0))
    env = Env(github, queue, CommandJob(app, queue, engine),
              AlignmentJob(app, queue, sandbox=fake_sandbox, gate=TrustGate(engine, app)),
              head, clock)
    opened(env)
    return env


def opened(env: Env) -> None:
    """The ``pull_request.opened`` webhook's job, queued and done: the App saw the head."""
    open_pull_request(env)
    job = env.queue.claim("test")
    assert job is not None and SEEN_AT in job.payload
    env.queue.complete(job.id, {"skipped": "not run here"})


@pytest.fixture()
def env(github_server: GitHubServer, tmp_path: Path) -> Iterator[Env]:
    made = make_env(github_server, tmp_path)
    yield made
    made.queue.engine.dispose()


# -- webhook handlers ----------------------------------------------------------------------


def test_handlers_make_one_job_per_comment_and_ignore_bots(env: Env) -> None:
    github = env.github
    comment = github.add_comment(OWNER, REPO, NUMBER, "/help\n/remind off", "rita")
    payload = github.webhook("issue_comment.created", OWNER, REPO, comment_id=comment.id)
    (request,) = on_issue_comment(Event("issue_comment", "created", "d-1", payload))
    assert request.kind == "command" and not request.supersede
    assert request.key == f"{OWNER}/{REPO}#{NUMBER}/comment/{comment.id}"
    assert request.payload["commands"] == ["/help", "/remind off"]
    assert request.payload["actor"] == "rita"

    github.user("renovate", "Bot")
    for login in (BOT, "renovate"):
        own = github.add_comment(OWNER, REPO, NUMBER, "/align", login)
        payload = github.webhook("issue_comment.created", OWNER, REPO, comment_id=own.id)
        assert on_issue_comment(Event("issue_comment", "created", "d-2", payload)) == []

    review = github.add_review(OWNER, REPO, NUMBER, "wes", "COMMENTED", "Looks good\n/align")
    payload = github.webhook("pull_request_review.submitted", OWNER, REPO, number=NUMBER,
                             review_id=review.id)
    (request,) = on_review(Event("pull_request_review", "submitted", "d-3", payload))
    assert request.payload["source"] == "review" and request.payload["commands"] == ["/align"]


def test_an_edited_comment_acts_only_on_its_new_lines(env: Env) -> None:
    first = env.comment("/remind off", AUTHOR)
    assert first["commands"][0]["accepted"]
    comment = env.github.comments_on(OWNER, REPO, NUMBER)[0]
    comment.body = "/remind off\n/help"
    payload = env.github.webhook("issue_comment.edited", OWNER, REPO, comment_id=comment.id,
                                 changes={"body": {"from": "/remind off"}})
    (request,) = on_issue_comment(Event("issue_comment", "edited", "d-edit", payload))
    assert request.payload["commands"] == ["/help"]
    env.run([request])
    (reply,) = env.replies()
    assert "alignbot answers these commands" in reply
    assert env.reactions(comment.id).count("+1") == 1  # the /remind off is not repeated
    title_only = env.github.webhook("issue_comment.edited", OWNER, REPO, comment_id=comment.id,
                                    changes={"title": {"from": "x"}})
    assert on_issue_comment(Event("issue_comment", "edited", "d-t", title_only)) == []


def test_commands_in_a_review_are_answered_by_a_reply(env: Env) -> None:
    review = env.github.add_review(OWNER, REPO, NUMBER, "wes", "COMMENTED",
                                   "Looks right.\n/align\n/remind snooze 2d")
    payload = env.github.webhook("pull_request_review.submitted", OWNER, REPO, number=NUMBER,
                                 review_id=review.id)
    requests = on_review(Event("pull_request_review", "submitted", "d-r", payload))
    env.run(requests)
    env.run(requests)
    assert len(env.align_jobs()) == 1
    (reply,) = env.replies()  # GitHub has no reactions on reviews: one reply answers both
    assert reply.startswith(f"<!-- alignbot:command review:{review.id} -->")
    assert "the alignment check is queued" in reply
    assert "no reminders on this pull request before" in reply


# -- each command --------------------------------------------------------------------------


def test_align_queues_the_check_with_overrides(env: Env) -> None:
    result = env.comment("/align activations.softplus --n 5 --seed 9", "wes")
    assert result["commands"][0]["accepted"]
    (job,) = env.align_jobs()
    assert job.payload["ops"] == ["activations.softplus"] and job.payload["n"] == 5
    assert job.payload["seed"] == 9 and job.payload["head_sha"] == env.head
    assert job.payload["approved_by"] == "wes" and not job.payload["all_ops"]
    comment = env.github.comments_on(OWNER, REPO, NUMBER)[0]
    assert env.reactions(comment.id) == ["eyes"] and env.replies() == []
    env.comment("/align", "ada")
    assert env.align_jobs()[-1].payload["all_ops"] is True


def test_align_is_rate_limited_per_person(env: Env) -> None:
    for _ in range(3):
        assert env.comment("/align", "wes")["commands"][0]["accepted"]
    refused = env.comment("/align", "wes")["commands"][0]
    assert not refused["accepted"]
    assert "at most 3" in env.replies()[-1] and "UTC" in env.replies()[-1]
    assert env.comment("/align", "ada")["commands"][0]["accepted"]
    assert len(env.align_jobs()) == 4
    later = CommandJob(env.job.app, env.queue, env.job.engine, RateLimit(3),
                       clock=lambda: datetime.now(UTC) + timedelta(hours=1, minutes=1))
    env.job = later
    assert env.comment("/align", "wes")["commands"][0]["accepted"]


def test_repro_replies_with_the_script(env: Env) -> None:
    assert not env.comment(f"/repro {CANDIDATE_BUG}", "nora")["commands"][0]["accepted"]
    assert "no alignment check has finished" in env.replies()[-1]
    env.finish_check()
    assert env.comment(f"/repro {CANDIDATE_BUG}", "nora")["commands"][0]["accepted"]
    reply = env.replies()[-1]
    assert "print('softplus repro')" in reply and "python repro.py" in reply
    assert env.head[:12] in reply
    env.comment("/repro 000000000000", "nora")
    assert CANDIDATE_BUG in env.replies()[-1] and "has no finding" in env.replies()[-1]


def test_upstream_replies_with_the_draft_escaped(env: Env) -> None:
    env.finish_check()
    env.comment(f"/upstream {REFERENCE_SUSPECT}", "rita")
    reply = env.replies()[-1]
    assert "torch.erf is inaccurate" in reply and "```markdown" in reply
    assert "\n@here" not in reply and " @here" in reply  # inside the code block: no ping
    env.comment(f"/upstream {CANDIDATE_BUG}", "rita")
    assert "only findings where PyTorch looks wrong" in env.replies()[-1]


def test_upstream_file_refuses_without_a_tracking_repo(env: Env) -> None:
    env.finish_check()
    result = env.comment(f"/upstream {REFERENCE_SUSPECT} file", "wes")
    assert not result["commands"][0]["accepted"]
    assert "upstream.tracking_repo" in env.replies()[-1]


def test_upstream_file_opens_one_issue_and_links_it_back(github_server: GitHubServer,
                                                         tmp_path: Path) -> None:
    config = CONFIG.replace("  tracker: pytorch/pytorch",
                            "  tracker: pytorch/pytorch\n  tracking_repo: demo-org/tracking")
    env = make_env(github_server, tmp_path, config=config)
    github_server.add_repo(OWNER, "tracking", INSTALLATION)
    env.finish_check()
    assert not env.comment(f"/upstream {REFERENCE_SUSPECT} file", "rita")["commands"][0][
        "accepted"]
    assert "write access" in env.replies()[-1]
    assert env.comment(f"/upstream {REFERENCE_SUSPECT} file", "wes")["commands"][0]["accepted"]
    (issue,) = github_server.created_issues(OWNER, "tracking")
    assert issue.title == "torch.erf is inaccurate for float32 inputs near 3"
    assert f"{OWNER}/{REPO}#{NUMBER}" in (issue.body or "")
    assert "Describe the bug" in (issue.body or "")
    assert f"[{OWNER}/tracking#{issue.number}](" in env.replies()[-1]
    watched = _watched(env)
    assert [(w["url"], w["repo"], w["number"], w["kind"], w["registered_by"], w["pr_repo"],
             w["pr_number"], w["tracking_repo"]) for w in watched] == [
        (f"https://github.com/{OWNER}/tracking/issues/{issue.number}", f"{OWNER}/tracking",
         issue.number, "issue", "wes", f"{OWNER}/{REPO}", NUMBER, f"{OWNER}/tracking")]
    env.comment(f"/upstream {REFERENCE_SUSPECT} file", "ada")
    assert len(github_server.created_issues(OWNER, "tracking")) == 1
    assert "already filed" in env.replies()[-1]
    assert github_server.created_issues(OWNER, REPO) == []  # nothing in the PR's repository
    assert _watched(env) == watched  # registered once, whoever asks again


def _watched(env: Env) -> list[dict[str, Any]]:
    with env.job.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(UPSTREAM).order_by(UPSTREAM.c.id))]


UPSTREAM_PR = "https://github.com/pytorch/pytorch/pull/4242"


def test_track_registers_an_upstream_item_once(env: Env) -> None:
    result = env.comment(f"/track {UPSTREAM_PR}", "wes")
    assert result["commands"][0] == {"line": f"/track {UPSTREAM_PR}", "command": "track",
                                     "accepted": True, "reply_id": None}
    comment = env.github.comments_on(OWNER, REPO, NUMBER)[-1]
    assert env.reactions(comment.id) == ["+1"] and env.replies() == []
    (item,) = _watched(env)
    assert (item["url"], item["repo"], item["number"], item["kind"], item["registered_by"],
            item["pr_repo"], item["pr_number"], item["state"]) == (
        UPSTREAM_PR, "pytorch/pytorch", 4242, "pr", "wes", f"{OWNER}/{REPO}", NUMBER, "open")
    # the same URL again (a trailing slash is the same item): answered, not registered twice
    result = env.comment(f"/alignbot track {UPSTREAM_PR}/", "ada")
    assert result["commands"][0]["accepted"]
    assert "is already tracked" in env.replies()[-1] and "by wes" in env.replies()[-1]
    assert len(_watched(env)) == 1
    row = upstream_item(env.job.engine, UPSTREAM_PR, f"{OWNER}/{REPO}")
    assert row is not None and row.registered_by == "wes"
    env.comment("/track https://github.com/pytorch/pytorch/issues/7", "ada")
    assert [(w["kind"], w["number"]) for w in _watched(env)] == [("pr", 4242), ("issue", 7)]


def test_track_rejects_what_is_not_an_issue_or_pull_request_url(env: Env) -> None:
    for url in ("https://github.com/pytorch/pytorch/commit/abc123",
                "https://gitlab.com/pytorch/pytorch/pull/1"):
        result = env.comment(f"/track {url}", "wes")
        assert not result["commands"][0]["accepted"]
        reply = env.replies()[-1]
        assert "is not a GitHub issue or pull request URL" in reply
        assert "Usage: `/track URL`" in reply
    assert _watched(env) == []


@pytest.mark.parametrize("login", ["rita", "nora", AUTHOR, "stranger"])
def test_track_needs_write_access(env: Env, login: str) -> None:
    assert not env.comment(f"/track {UPSTREAM_PR}", login)["commands"][0]["accepted"]
    assert "write access" in env.replies()[-1]
    assert _watched(env) == []


def test_upstream_file_never_goes_to_someone_elses_repository(github_server: GitHubServer,
                                                              tmp_path: Path) -> None:
    config = CONFIG.replace("  tracker: pytorch/pytorch",
                            "  tracker: pytorch/pytorch\n  tracking_repo: pytorch/pytorch")
    env = make_env(github_server, tmp_path, config=config)
    env.finish_check()
    env.comment(f"/upstream {REFERENCE_SUSPECT} file", "ada")
    assert "only opens issues in the project's own repositories" in env.replies()[-1]
    assert github_server.count("POST", r"/issues$") == 0


def test_remind_changes_this_pull_requests_settings(env: Env) -> None:
    engine = env.job.engine
    assert env.comment("/remind snooze 3d", AUTHOR)["commands"][0]["accepted"]
    row = reminder_settings(engine, f"{OWNER}/{REPO}", NUMBER)
    assert row is not None and not row.disabled and row.updated_by == AUTHOR
    assert timedelta(days=2, hours=23) < row.snoozed_until - datetime.now(UTC) <= timedelta(3)
    env.comment("/remind off", "wes")
    row = reminder_settings(engine, f"{OWNER}/{REPO}", NUMBER)
    assert row is not None and row.disabled and row.snoozed_until is None
    assert not env.comment("/remind on", "rita")["commands"][0]["accepted"]
    assert "only the pull request's author" in env.replies()[-1]
    env.comment("/remind on", AUTHOR)
    row = reminder_settings(engine, f"{OWNER}/{REPO}", NUMBER)
    assert row is not None and not row.disabled
    assert env.replies() == [env.replies()[0]]  # accepted /remind: a reaction, no reply


def test_help_and_malformed_commands_reply_with_usage(env: Env) -> None:
    env.comment("/help", "nora")
    help_text = env.replies()[-1]
    assert "/upstream FINGERPRINT [file]" in help_text and "/ok-to-test" in help_text
    assert "`/track URL`" in help_text and "`/track` need write access" in help_text
    assert "after a maintainer's `/ok-to-test`" in help_text
    env.comment("/align --n lots", "wes")
    reply = env.replies()[-1]
    assert "`--n lots`" in reply and "Usage: `/align [OPS…]" in reply
    env.comment("/alignbot @everyone", "nora")
    reply = env.replies()[-1]
    assert "`@everyone` is not an alignbot command" in reply and "/remind snooze" in reply


def test_several_commands_in_one_comment(env: Env) -> None:
    env.finish_check()
    result = env.comment(f"Let's see.\n/align\n/repro {CANDIDATE_BUG}\n/remind off\n/help",
                         "wes")
    assert [c["command"] for c in result["commands"]] == ["align", "repro", "remind", "help"]
    assert all(c["accepted"] for c in result["commands"])
    assert len(env.align_jobs()) == 2  # the finished check and this /align
    (reply,) = env.replies()  # one reply answers /repro and /help
    comment = env.github.comments_on(OWNER, REPO, NUMBER)[0]
    assert reply.startswith(f"<!-- alignbot:command comment:{comment.id} -->\n")
    assert reply.index("print('softplus repro')") < reply.index("alignbot answers these")
    assert sorted(env.reactions(comment.id)) == ["+1", "eyes"]  # each kind once


# -- permissions ---------------------------------------------------------------------------


@pytest.mark.parametrize(("login", "accepted"), [
    ("ada", True), ("wes", True), ("rita", False), ("nora", False), ("stranger", False),
])
def test_align_and_ok_to_test_need_write_access(env: Env, login: str, accepted: bool) -> None:
    for line in ("/align", "/ok-to-test"):
        assert env.comment(line, login)["commands"][0]["accepted"] is accepted
    if not accepted:
        assert all("needs write access" in reply for reply in env.replies())


def test_the_author_may_align_only_a_trusted_pull_request(github_server: GitHubServer,
                                                          tmp_path: Path) -> None:
    outside = make_env(github_server, tmp_path)
    assert not outside.comment("/align", AUTHOR)["commands"][0]["accepted"]
    assert "waits for a maintainer's `/ok-to-test`" in outside.replies()[-1]
    assert not outside.comment("/ok-to-test", AUTHOR)["commands"][0]["accepted"]
    outside.comment("/ok-to-test", "wes")
    assert outside.comment("/align", AUTHOR)["commands"][0]["accepted"]
    assert "approved_by" not in outside.align_jobs()[-1].payload  # the gate still applies


def test_a_members_pull_request_may_be_aligned_by_its_author(github_server: GitHubServer,
                                                             tmp_path: Path) -> None:
    env = make_env(github_server, tmp_path, association="MEMBER")
    assert env.comment("/align", AUTHOR)["commands"][0]["accepted"]
    assert env.comment("/ok-to-test", "wes")["commands"][0]["accepted"]
    assert len(env.align_jobs()) == 1  # a member's pull request needs no go-ahead


# -- idempotency ---------------------------------------------------------------------------


def test_a_rerun_job_neither_acts_nor_replies_twice(env: Env) -> None:
    env.clock.tick()
    comment = env.github.add_comment(OWNER, REPO, NUMBER, "/align\n/help\n/align --n 0", "wes")
    payload = env.github.webhook("issue_comment.created", OWNER, REPO, comment_id=comment.id)
    (request,) = on_issue_comment(Event("issue_comment", "created", "d-1", payload))
    env.github.fail_next(r"/issues/\d+/comments$", status=500, method="POST")
    with pytest.raises(Exception, match="500"):
        env.run([request])  # /align was decided and queued; its reply was not posted
    for _ in range(2):
        env.run([request])
    assert len(env.align_jobs()) == 1
    (reply,) = env.replies()  # /help and the malformed /align, once, in one reply
    assert "alignbot answers these" in reply and "`--n 0`" in reply
    assert env.reactions(comment.id) == ["eyes", "+1"]


def test_a_reply_posted_before_a_crash_is_found_again(env: Env) -> None:
    comment = env.github.add_comment(OWNER, REPO, NUMBER, "/help", "nora")
    payload = env.github.webhook("issue_comment.created", OWNER, REPO, comment_id=comment.id)
    (request,) = on_issue_comment(Event("issue_comment", "created", "d-1", payload))
    env.run([request])
    with env.job.engine.begin() as conn:  # as if the job died before recording the reply id
        conn.execute(commands.REPLIES.update().values(reply_id=None))
    env.run([request])
    assert len(env.replies()) == 1


def test_over_http_a_redelivery_changes_nothing(github_server: GitHubServer,
                                                tmp_path: Path) -> None:
    """The whole service: POST /webhook, the worker, the command job, GitHub."""
    github = github_server
    demo_seed(github, ROOT / "examples" / "pull-request" / "fastops.py")
    port = free_port()
    with running_service(settings_for(github, tmp_path, port)):
        comment = github.add_comment(OWNER, REPO, NUMBER, "/help\n/remind snooze 2w",
                                     "contributor")
        payload = github.webhook("issue_comment.created", OWNER, REPO, comment_id=comment.id)
        headers, body = github.delivery("issue_comment", payload, SECRET)
        url = f"http://127.0.0.1:{port}/webhook"
        first = httpx.post(url, content=body, headers=headers, timeout=30)
        assert first.status_code == 202 and first.json()["jobs"] == 1
        wait_until(lambda: bool(github.comments[comment.id].reactions), 30, "the reaction")
        again = httpx.post(url, content=body, headers=headers, timeout=30)
        assert again.json()["status"] == "duplicate"
        bot = github.user(BOT, "Bot")
        github.comments[comment.id].user = bot
        own = github.webhook("issue_comment.created", OWNER, REPO, comment_id=comment.id)
        assert deliver(github, port, "issue_comment", own).json()["status"] == "ignored"
    replies = [c for c in github.comments_on(OWNER, REPO, NUMBER) if c.user.login == BOT
               and c.id != comment.id]
    assert len(replies) == 1 and "alignbot answers these commands" in replies[0].body
    assert [r.content for r in github.comments[comment.id].reactions] == ["+1"]


# -- the /ok-to-test gate ------------------------------------------------------------------


def open_pull_request(env: Env, action: str = "opened") -> None:
    payload = env.github.webhook(f"pull_request.{action}", OWNER, REPO, number=NUMBER)
    for request in on_pull_request(Event("pull_request", action, f"d-{action}", payload)):
        env.queue.enqueue(request)


def push(env: Env) -> str:
    issue = env.github.pull(OWNER, REPO, NUMBER)
    assert issue.pull is not None
    new = sha(f"push {len(issue.pull.commits)}")
    env.clock.tick()
    env.github.push(OWNER, REPO, NUMBER, new)
    env.head = new
    open_pull_request(env, "synchronize")
    return new


def waiting_comments(env: Env) -> list[str]:
    return [body for body in env.replies() if WAITING_MARKER in body]


def test_an_outside_pull_request_waits_for_ok_to_test(env: Env) -> None:
    open_pull_request(env)
    assert env.run_align() == {"skipped": "waiting for a maintainer's /ok-to-test"}
    open_pull_request(env, "reopened")
    env.run_align()
    (waiting,) = waiting_comments(env)
    assert env.head[:12] in waiting and "/ok-to-test" in waiting
    (held,) = env.github.check_runs_for(OWNER, REPO)  # the head's check run says so too
    assert (held.status, held.conclusion) == ("completed", "action_required")
    assert env.head[:12] in held.output["title"] and "/ok-to-test" in held.output["summary"]

    assert env.comment("/ok-to-test", "ada")["commands"][0]["accepted"]
    result = env.run_align()
    assert result is not None and result["conclusion"] == "success"
    (run,) = env.github.check_runs_for(OWNER, REPO, env.head)  # the same run, now checked
    assert run.id == held.id and run.conclusion == "success"

    approved = env.head
    pushed = push(env)  # a new head needs a new go-ahead
    assert env.run_align() == {"skipped": "waiting for a maintainer's /ok-to-test"}
    (waiting,) = waiting_comments(env)  # the same comment, now about the new head
    assert pushed[:12] in waiting and approved[:12] in waiting and "`ada`" in waiting
    (held,) = env.github.check_runs_for(OWNER, REPO, pushed)
    assert held.conclusion == "action_required" and approved[:12] in held.output["summary"]
    env.comment("/ok-to-test", "wes")
    env.run_align()
    (run,) = env.github.check_runs_for(OWNER, REPO, pushed)
    assert run.conclusion == "success"


def test_trust_carries_over_pushes_when_configured(github_server: GitHubServer,
                                                   tmp_path: Path) -> None:
    env = make_env(github_server, tmp_path,
                   config=CONFIG + "trust:\n  carry_over_pushes: true\n")
    env.comment("/ok-to-test", "wes")
    env.run_align()
    pushed = push(env)
    result = env.run_align()
    assert result is not None and "conclusion" in result
    assert len(github_server.check_runs_for(OWNER, REPO, pushed)) == 1
    assert waiting_comments(env) == []
    assert is_ok(env.job.engine, f"{OWNER}/{REPO}", NUMBER, pushed, carry_over=True)


def test_the_head_cannot_trust_itself(github_server: GitHubServer, tmp_path: Path) -> None:
    env = make_env(github_server, tmp_path,
                   head_config=CONFIG + "trust:\n  outside_contributors: run\n")
    open_pull_request(env)
    assert env.run_align() == {"skipped": "waiting for a maintainer's /ok-to-test"}
    assert env.comment("/align", "wes")["commands"][0]["accepted"]  # a maintainer's /align
    result = env.run_align()
    assert result is not None and result["conclusion"] == "success"


def test_skip_mode_never_runs_outside_pull_requests(github_server: GitHubServer,
                                                    tmp_path: Path) -> None:
    env = make_env(github_server, tmp_path,
                   config=CONFIG + "trust:\n  outside_contributors: skip\n")
    open_pull_request(env)
    assert "skip" in str(env.run_align())
    assert env.replies() == []
    assert not env.comment("/ok-to-test", "ada")["commands"][0]["accepted"]
    assert "outside_contributors: skip" in env.replies()[-1]


def test_members_and_run_mode_are_not_gated(github_server: GitHubServer,
                                            tmp_path: Path) -> None:
    env = make_env(github_server, tmp_path, config=CONFIG + "trust:\n  outside_contributors: "
                   "run\n")
    open_pull_request(env)
    result = env.run_align()
    assert result is not None and result["conclusion"] == "success"
    assert waiting_comments(env) == []


# -- floods and the one reply --------------------------------------------------------------


def test_a_flood_of_commands_is_one_reply_and_one_check(env: Env) -> None:
    body = "\n".join(f"/align op{index}" for index in range(50))
    result = env.comment(body, "wes")
    assert len(result["commands"]) == commands.MAX_COMMANDS and result["ignored"] == 40
    assert [c["accepted"] for c in result["commands"]] == [True] + [False] * 9
    assert len(env.align_jobs()) == 1
    (reply,) = env.replies()
    assert reply.count("a comment runs at most one check") == 9
    assert "40 more command lines in this comment were not acted on" in reply


def test_replies_to_people_without_write_access_are_rate_limited(env: Env) -> None:
    for index in range(8):
        env.comment(f"/align op{index}\n/help", "nora")
    assert len(env.replies()) == 5
    last = env.github.comments_on(OWNER, REPO, NUMBER)[-2]  # the last comment of nora's
    assert sorted(env.reactions(last.id)) == ["+1", "confused"]
    env.comment("/help", "wes")  # people with write access are not limited
    assert len(env.replies()) == 6


def test_an_edit_updates_the_one_reply(env: Env) -> None:
    env.comment("/help", "nora")
    comment = env.github.comments_on(OWNER, REPO, NUMBER)[0]
    comment.body = "/help\n/align --n 0"
    payload = env.github.webhook("issue_comment.edited", OWNER, REPO, comment_id=comment.id,
                                 changes={"body": {"from": "/help"}})
    env.run(on_issue_comment(Event("issue_comment", "edited", "d-edit", payload)))
    (reply,) = env.replies()
    assert "alignbot answers these commands" in reply and "`--n 0`" in reply


def test_a_forged_reply_marker_is_not_the_reply(env: Env) -> None:
    comment = env.github.add_comment(OWNER, REPO, NUMBER, "/help", "nora")
    env.github.add_comment(OWNER, REPO, NUMBER,
                           f"<!-- alignbot:command comment:{comment.id} -->\nforged", "rita")
    payload = env.github.webhook("issue_comment.created", OWNER, REPO, comment_id=comment.id)
    env.run(on_issue_comment(Event("issue_comment", "created", "d-f", payload)))
    (reply,) = env.replies()
    assert reply.startswith(f"<!-- alignbot:command comment:{comment.id} -->")


def test_a_review_approves_the_commit_it_was_written_on(env: Env) -> None:
    open_pull_request(env)
    env.run_align()
    reviewed = env.head
    env.clock.tick()
    review = env.github.add_review(OWNER, REPO, NUMBER, "wes", "COMMENTED", "/ok-to-test",
                                   commit_id=reviewed)
    pushed = push(env)  # the review is submitted after this push, but names its commit
    payload = env.github.webhook("pull_request_review.submitted", OWNER, REPO, number=NUMBER,
                                 review_id=review.id)
    env.run(on_review(Event("pull_request_review", "submitted", "d-rv", payload)))
    assert is_ok(env.job.engine, f"{OWNER}/{REPO}", NUMBER, reviewed, carry_over=False)
    assert not is_ok(env.job.engine, f"{OWNER}/{REPO}", NUMBER, pushed, carry_over=False)
    (reply,) = [body for body in env.replies() if "review:" in body]
    assert reviewed[:12] in reply and pushed[:12] in reply


def test_a_maintainers_align_runs_only_the_head_it_was_written_on(env: Env) -> None:
    env.clock.tick()
    written = env.head
    comment = env.github.add_comment(OWNER, REPO, NUMBER, "/align", "wes")
    payload = env.github.webhook("issue_comment.created", OWNER, REPO, comment_id=comment.id)
    pushed = push(env)  # lands before the comment's job runs
    (result,) = env.run(on_issue_comment(Event("issue_comment", "created", "d-a", payload)))
    assert not result["commands"][0]["accepted"]
    assert [job.payload.get("approved_by") for job in env.align_jobs()] == []
    reply = env.replies()[-1]
    assert written[:12] in reply and pushed[:12] in reply and "again" in reply
    assert env.comment("/align", "wes")["commands"][0]["accepted"]  # written on the new head
    (job,) = env.align_jobs()
    assert (job.payload["head_sha"], job.payload["approved_by"]) == (pushed, "wes")
