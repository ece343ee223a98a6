"""bot/shard_groups.py: a check's shard jobs, their reports and its one end, on SQLite and
PostgreSQL."""

from __future__ import annotations

import threading

from alignbot.bot.jobs import ALIGN, ALIGN_SHARD
from alignbot.bot.queue import JobRecord, JobRequest, JobState, SqlJobQueue
from alignbot.bot.shard_groups import ShardGroups
from alignbot.bot.storage import GroupEnd

KEY = "o/r#1"


def split(queue: SqlJobQueue, shards: int = 2) -> tuple[JobRecord, list[int]]:
    """A running ``align`` job split into ``shards`` shard jobs, each claimed by worker wK."""
    queue.enqueue(JobRequest(ALIGN, KEY, {"head_sha": "abc"}, supersede=True,
                             supersedes=(ALIGN_SHARD,)))
    parent = queue.claim("w0")
    assert parent is not None
    ids = ShardGroups(queue).split(parent, "w0", [
        JobRequest(ALIGN_SHARD, KEY, {"head_sha": "abc", "parent": parent.id, "shard": k})
        for k in range(1, shards + 1)])
    assert ids is not None
    for k in range(1, shards + 1):
        assert queue.claim(f"w{k}") is not None
    return parent, ids


def test_the_last_report_stored_merges_once(queue: SqlJobQueue) -> None:
    groups = ShardGroups(queue)
    parent, (one, two) = split(queue)
    assert groups.store(parent.id, one, "w1", {"shard_report": 1}) is False
    assert groups.store(parent.id, two, "w9", {"shard_report": 2}) is None  # not its worker's
    assert groups.store(parent.id, two, "w2", {"shard_report": 2}) is True
    group = groups.get(parent.id)
    assert group is not None and (group.ended, group.ended_by) == (GroupEnd.MERGED, two)
    assert groups.results(group) == [{"shard_report": 1}, {"shard_report": 2}]
    # stored again (the shard ran again after its worker died): it still merges, no other
    assert groups.store(parent.id, two, "w2", {"shard_report": 2}) is True
    assert groups.store(parent.id, one, "w1", {"shard_report": 1}) is False
    assert not groups.end(parent.id, GroupEnd.FAILED, one)


def test_two_shards_finishing_at_once_merge_once(queue: SqlJobQueue) -> None:
    """Each round two threads store the two reports at the same moment: exactly one of them
    is told to merge (without the group's row lock, on PostgreSQL, both could read the
    other's report as missing and neither would merge)."""
    groups = ShardGroups(queue)
    for _ in range(15):
        parent, ids = split(queue)
        barrier = threading.Barrier(2)
        answers: dict[int, bool | None] = {}

        def store(job_id: int, worker: str, parent_id: int = parent.id,
                  wait: threading.Barrier = barrier, out: dict[int, bool | None] = answers
                  ) -> None:
            wait.wait()
            out[job_id] = groups.store(parent_id, job_id, worker, {"shard_report": job_id})

        threads = [threading.Thread(target=store, args=(job_id, f"w{k}"))
                   for k, job_id in enumerate(ids, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(answers.values(), key=str) == [False, True], answers
        group = groups.get(parent.id)
        assert group is not None and group.ended is GroupEnd.MERGED
        assert answers[group.ended_by or 0] is True


def test_a_group_ends_once(queue: SqlJobQueue) -> None:
    groups = ShardGroups(queue)
    parent, (one, two) = split(queue)
    assert groups.end(parent.id, GroupEnd.FAILED, one)
    assert groups.end(parent.id, GroupEnd.FAILED, one)  # the same end again: still its
    assert not groups.end(parent.id, GroupEnd.CANCELLED, two)
    assert groups.store(parent.id, two, "w2", {"shard_report": 2}) is False
    assert groups.unended(KEY, before=parent.id + 100) == []


def test_shards_are_queued_only_by_their_running_parent(queue: SqlJobQueue) -> None:
    groups = ShardGroups(queue)
    queue.enqueue(JobRequest(ALIGN, KEY, {"head_sha": "abc"}))
    parent = queue.claim("w0")
    assert parent is not None
    shard = JobRequest(ALIGN_SHARD, KEY, {"parent": parent.id})
    assert groups.split(parent, "w1", [shard]) is None  # not that worker's job
    ids = groups.split(parent, "w0", [shard, shard])
    assert ids is not None and groups.split(parent, "w0", [shard, shard]) == ids  # once
    # a newer push supersedes the parent's shards with it; a superseded parent splits nothing
    queue.enqueue(JobRequest(ALIGN, KEY, {"head_sha": "def"}, supersede=True,
                             supersedes=(ALIGN_SHARD,)))
    assert {queue.get(i).state for i in ids} == {JobState.SUPERSEDED}  # type: ignore[union-attr]
    assert groups.split(parent, "w0", [shard]) is None
    assert [group.parent_id for group in groups.unended(KEY, before=parent.id + 100)] == \
        [parent.id]
