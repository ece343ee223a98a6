"""The alignment feature: which events make jobs, and what a hostile pull request gets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_serve import Service

from bot.alignment import on_check_run_rerequested, on_pull_request
from bot.demo import NUMBER, OWNER, REPO, ROOT, _files, _sha, deliver, wait_for
from bot.output import CHECK_NAME
from bot.webhooks import Event

FIXTURES = Path(__file__).parent / "fixtures"


def _event(name: str, action: str | None = None, **changes: Any) -> Event:
    stem = f"{name}.{action}" if action else name
    file = FIXTURES / "github" / "webhooks" / f"{stem}.json"
    payload = json.loads(file.read_text())
    for dotted, value in changes.items():
        target = payload
        *path, last = dotted.split("__")
        for part in path:
            target = target[part]
        target[last] = value
    return Event(name=name, action=action, delivery_id="d-1", payload=payload)


def test_pull_request_events_make_one_superseding_job() -> None:
    (request,) = on_pull_request(_event("pull_request", "opened"))
    payload = request.payload
    assert request.kind == "align" and request.supersede
    assert request.key == f"{payload['repo']}#{payload['number']}"
    assert len(payload["head_sha"]) == 40 and payload["installation_id"] > 0


def test_drafts_and_deleted_forks_make_no_job() -> None:
    assert on_pull_request(_event("pull_request", "opened", pull_request__draft=True)) == []
    event = _event("pull_request", "synchronize")
    event.payload["pull_request"]["head"]["repo"] = None
    assert on_pull_request(event) == []
    event.payload.pop("installation", None)
    event.payload["pull_request"]["head"]["repo"] = {"full_name": "x/y"}
    assert on_pull_request(event) == []


def test_rerequested_check_run_reruns_its_pull_requests() -> None:
    event = _event("check_run", "rerequested")
    event.payload["check_run"]["name"] = CHECK_NAME
    event.payload["check_run"]["pull_requests"] = [{"number": 7, "id": 1}]
    (request,) = on_check_run_rerequested(event)
    assert request.payload["number"] == 7
    assert request.payload["head_sha"] == event.payload["check_run"]["head_sha"]
    event.payload["check_run"]["name"] = "someone else's check"
    assert on_check_run_rerequested(event) == []


def test_hostile_spec_is_contained_and_no_secret_is_posted(github_server: Any,
                                                           tmp_path: Path) -> None:
    github = github_server
    base = _files(ROOT / "examples" / "fastops")
    head = {**base, "alignment/steal.py": (FIXTURES / "hostile_pr" / "alignment" / "steal.py")
            .read_bytes(),
            ".github/alignbot.yml": base[".github/alignbot.yml"].replace(
                b"draws: 12", b'draws: 1\nspecs: ["alignment/*.py"]')}
    head[".github/alignbot.yml"] = head[".github/alignbot.yml"].replace(
        b'specs: ["activations.softplus", "activations.mish"]', b'specs: ["steal.*"]')
    base_sha, head_sha = _sha(base), _sha(head)
    github.add_installation(4242, OWNER)
    github.add_repo(OWNER, REPO, 4242, files_by_ref={base_sha: base})
    github.add_pull(OWNER, REPO, NUMBER, head_sha, base_sha, "Innocent change", "mallory",
                    head_tree=head, files=[{"filename": "fastops.py", "status": "modified",
                                            "patch": "@@ -1,1 +1,1 @@\n-a\n+b"}],
                    author_association="MEMBER")
    key_file = tmp_path / "app-key.pem"
    key_file.write_text(github.private_key_pem)
    key_file.chmod(0o600)
    service = Service(github, tmp_path)
    service.env.pop("ALIGNBOT_PRIVATE_KEY")
    service.env["ALIGNBOT_PRIVATE_KEY_FILE"] = str(key_file)
    service.start()
    try:
        deliver(github, service.port, "pull_request",
                github.webhook("pull_request.opened", OWNER, REPO, number=NUMBER))
        wait_for(lambda: bool(github.comments_on(OWNER, REPO, NUMBER)), 300, "the comment")
    finally:
        service.stop()
    (run,) = github.check_runs_for(OWNER, REPO, head_sha)
    (comment,) = github.comments_on(OWNER, REPO, NUMBER)
    posted = comment.body + json.dumps([u for u in run.updates])
    assert run.conclusion == "failure" and "could not run" in posted
    # the hostile spec ran (its error, with what it read from /proc, is what got posted) …
    assert "exit status 2" in posted and "alignment/steal.py" in posted
    secrets = [line for line in github.private_key_pem.splitlines() if "-----" not in line]
    secrets += ["demo webhook secret", *github.tokens]
    for secret in secrets:  # … but nothing of the app's secrets was in it
        assert secret not in posted
    assert "network: connected" not in posted
