"""Check runs: create, update, annotations, and the runs of a commit."""

from __future__ import annotations

from .errors import ApiError, invalid_request, not_found, validation_failed
from .formats import parse_time
from .handling import ApiBase
from .model import CheckRun, Json
from .routes import Call, Reply

OUTPUT_LIMIT = 65535


class CheckRunsApi(ApiBase):
    """POST/PATCH check runs, their annotations, and the runs of a ref."""

    def check_output(self, output: Json | None) -> None:
        """GitHub measures output.summary and output.text in bytes too (65535 at most)."""
        for key in ("summary", "text"):
            text = (output or {}).get(key) or ""
            if len(text.encode()) > OUTPUT_LIMIT:
                raise validation_failed("CheckRun", key, "custom",
                                        f"{key} exceeds a maximum bytesize of {OUTPUT_LIMIT}")

    def apply_run(self, run: CheckRun, body: Json) -> None:
        """Apply a create or update body to a run; annotations are appended, not replaced."""
        for key in ("name", "details_url", "external_id", "status", "conclusion", "actions"):
            if key in body:
                setattr(run, key, body[key])
        if "started_at" in body:
            run.started_at = parse_time(body["started_at"])
        output = body.get("output")
        if output:
            run.output.update({k: output[k] for k in ("title", "summary", "text") if k in output})
            run.annotations.extend(output.get("annotations") or [])
        if "conclusion" in body:
            run.status = "completed"
        if run.status == "completed":
            stamp = body.get("completed_at")
            run.completed_at = parse_time(stamp) if stamp else (run.completed_at or self.s.now())
        elif run.status == "in_progress" and run.started_at is None:
            run.started_at = self.s.now()
        run.updates.append(body)

    def check_completed(self, run: CheckRun, body: Json) -> None:
        """A completed run needs a conclusion."""
        if body.get("status") == "completed" and not (body.get("conclusion") or run.conclusion):
            raise invalid_request(['"conclusion" wasn\'t supplied.'])

    def create_check_run(self, call: Call) -> Reply:
        """POST /repos/{owner}/{repo}/check-runs."""
        repo = self.repo(call)
        body = call.json
        if body["head_sha"] not in repo.commits:
            raise ApiError(422, f"No commit found for SHA: {body['head_sha']}")
        self.check_output(body.get("output"))
        same = [r for r in self.s.check_runs.values() if r.repo is repo
                and r.head_sha == body["head_sha"]]
        suite = same[0].suite_id if same else self.s.next_id()
        run = CheckRun(self.s.next_id(), repo, body["name"], body["head_sha"], suite,
                       started_at=self.s.now())
        self.check_completed(run, body)
        self.apply_run(run, body)
        self.s.check_runs[run.id] = run
        data = self.v.check_run(run)
        return Reply(201, data, {"Location": data["url"]})

    def check_run(self, call: Call) -> CheckRun:
        """The check run named in the path (404 when unknown or in another repository)."""
        repo = self.repo(call)
        run_id = call.params["check_run_id"]
        run = self.s.check_runs.get(int(run_id)) if run_id.isdigit() else None
        if run is None or run.repo is not repo:
            raise not_found()
        return run

    def get_check_run(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/check-runs/{check_run_id}."""
        return Reply(200, self.v.check_run(self.check_run(call)))

    def update_check_run(self, call: Call) -> Reply:
        """PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}."""
        run = self.check_run(call)
        self.check_output(call.json.get("output"))
        self.check_completed(run, call.json)
        self.apply_run(run, call.json)
        return Reply(200, self.v.check_run(run))

    def list_annotations(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/check-runs/{check_run_id}/annotations."""
        run = self.check_run(call)
        return self.paginate(call, run.annotations, lambda a: self.v.annotation(run, a))

    def list_check_runs_for_ref(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}/commits/{ref}/check-runs (check_name, status, filter)."""
        repo = self.repo(call)
        sha = self.resolve(repo, call.params["ref"])
        runs = [r for r in self.s.check_runs.values() if r.repo is repo and r.head_sha == sha]
        name, status = call.query.get("check_name"), call.query.get("status")
        runs = [r for r in runs if name in (None, r.name) and status in (None, r.status)]
        if call.query.get("filter", "latest") == "latest":
            runs = list({r.name: r for r in runs}.values())
        runs.sort(key=lambda r: r.id, reverse=True)

        def wrap(page: list[Json]) -> Json:
            return {"total_count": len(runs), "check_runs": page}

        return self.paginate(call, runs, self.v.check_run, wrap)
