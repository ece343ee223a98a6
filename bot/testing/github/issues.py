"""Issues and their comments (pull-request conversations included), and reactions."""

from __future__ import annotations

from .errors import not_found, validation_failed
from .formats import parse_time
from .handling import ApiBase
from .model import Comment, CommentReaction, Issue
from .routes import Call, Reply

COMMENT_LIMIT = 65536


class IssuesApi(ApiBase):
    """Issues, issue comments and comment reactions."""

    def create_issue(self, call: Call) -> Reply:
        """POST /repos/{owner}/{repo}/issues."""
        repo = self.repo(call)
        body = call.json
        if len(body.get("body") or "") > COMMENT_LIMIT:
            raise validation_failed("Issue", "body", "custom",
                                    f"body is too long (maximum is {COMMENT_LIMIT} characters)")
        taken = [number for (repo_id, number) in self.s.issues if repo_id == repo.id]
        moment = self.s.now()
        issue = Issue(
            repo, max(taken, default=0) + 1, self.s.next_id(), str(body["title"]),
            body.get("body"), self.actor(call), moment, moment,
            labels=[str(x) for x in body.get("labels") or []],
            assignees=[self.s.user(x) for x in body.get("assignees") or []], via_app=True,
        )
        self.s.issues[(repo.id, issue.number)] = issue
        data = self.v.issue(issue)
        return Reply(201, data, {"Location": data["url"]})

    def get_issue(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/issues/{issue_number}."""
        return Reply(200, self.v.issue(self.issue(call)))

    def list_comments(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/issues/{issue_number}/comments (`since` supported)."""
        issue = self.issue(call)
        since = call.query.get("since")
        found = [
            c for c in self.s.comments.values()
            if c.repo is issue.repo and c.issue_number == issue.number
            and (since is None or c.updated_at >= parse_time(since))
        ]
        return self.paginate(call, found, self.v.comment)

    def check_comment_body(self, text: str, creating: bool) -> None:
        """422 for a body over 65536 characters, in the shape each endpoint uses."""
        if len(text) <= COMMENT_LIMIT:
            return
        if creating:
            raise validation_failed("IssueComment", "data", "unprocessable",
                                    f"Body is too long (maximum is {COMMENT_LIMIT} characters)")
        raise validation_failed("IssueComment", "body", "custom",
                                f"body is too long (maximum is {COMMENT_LIMIT} characters)")

    def create_comment(self, call: Call) -> Reply:
        """POST /repos/{owner}/{repo}/issues/{issue_number}/comments."""
        issue = self.issue(call)
        self.check_comment_body(call.json["body"], creating=True)
        moment = self.s.now()
        comment = Comment(
            self.s.next_id(), issue.repo, issue.number, call.json["body"], self.actor(call),
            moment, moment, "NONE", via_app=True,
        )
        self.s.comments[comment.id] = comment
        issue.updated_at = moment
        data = self.v.comment(comment)
        return Reply(201, data, {"Location": data["url"]})

    def comment(self, call: Call) -> Comment:
        """The comment named in the path, if it belongs to the path's repository."""
        repo = self.repo(call)
        comment_id = call.params["comment_id"]
        comment = self.s.comments.get(int(comment_id)) if comment_id.isdigit() else None
        if comment is None or comment.repo is not repo:
            raise not_found()
        return comment

    def get_comment(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/issues/comments/{comment_id}."""
        return Reply(200, self.v.comment(self.comment(call)))

    def update_comment(self, call: Call) -> Reply:
        """PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}."""
        comment = self.comment(call)
        self.actor(call)
        self.check_comment_body(call.json["body"], creating=False)
        comment.body = call.json["body"]
        comment.updated_at = self.s.now()
        self.s.issues[(comment.repo.id, comment.issue_number)].updated_at = comment.updated_at
        return Reply(200, self.v.comment(comment))

    def create_reaction(self, call: Call) -> Reply:
        """POST .../issues/comments/{comment_id}/reactions: 201 new, 200 if already there."""
        comment = self.comment(call)
        user, content = self.actor(call), call.json["content"]
        for reaction in comment.reactions:
            if reaction.user is user and reaction.content == content:
                return Reply(200, self.v.reaction(reaction))
        reaction = CommentReaction(self.s.next_id(), user, content, self.s.now())
        comment.reactions.append(reaction)
        return Reply(201, self.v.reaction(reaction))
