"""Error responses in GitHub's shape, raised by handlers and sent by the dispatcher."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .model import Json

DOCS = "https://docs.github.com/rest"


class ApiError(Exception):
    """An error response in GitHub's shape, raised by a handler and sent by the dispatcher."""

    def __init__(
        self,
        status: int,
        message: str,
        doc: str = DOCS,
        *,
        errors: list[Json] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body: Json = {"message": message, "documentation_url": doc, "status": str(status)}
        if errors is not None:
            self.body["errors"] = errors
        self.headers = dict(headers or {})


def not_found(doc: str = DOCS) -> ApiError:
    """GitHub's 404, also its answer for a private resource the caller may not see."""
    return ApiError(404, "Not Found", doc)


def forbidden() -> ApiError:
    """What an installation token gets for a write it has no permission for."""
    return ApiError(403, "Resource not accessible by integration")


def validation_failed(resource: str, field_name: str, code: str, message: str = "") -> ApiError:
    """GitHub's 422 `Validation Failed` with one entry in `errors`."""
    error: Json = {"resource": resource, "code": code, "field": field_name}
    if message:
        error["message"] = message
    return ApiError(422, "Validation Failed", errors=[error])


def invalid_request(lines: Iterable[str]) -> ApiError:
    """GitHub's 422 for a body that breaks the operation's JSON schema."""
    return ApiError(422, "Invalid request.\n\n" + "\n".join(lines))
