"""GitHub's OpenAPI description (a subset, shipped beside this module) as JSON Schema.

Validation needs `jsonschema` (a test dependency, not one of the App's): it is imported only
when a validator is built, so the server runs without it (`validation_available()`)."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .model import Json

if TYPE_CHECKING:
    import jsonschema


SUBSET = Path(__file__).parent / "openapi-subset.json"


def to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema to JSON Schema: `nullable: true` becomes `anyOf` with `null`."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: to_json_schema(value) for key, value in node.items()
        if not (key == "nullable" and isinstance(value, bool))
    }
    return {"anyOf": [{"type": "null"}, out]} if node.get("nullable") is True else out


def format_checker() -> jsonschema.FormatChecker:
    """Checks for the two formats GitHub's responses lean on: `date-time` and `uri`."""
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())

    @checker.checks("date-time")
    def is_datetime(value: object) -> bool:
        pattern = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"
        return not isinstance(value, str) or re.fullmatch(pattern, value) is not None

    @checker.checks("uri")
    def is_uri(value: object) -> bool:
        parts = urlsplit(value) if isinstance(value, str) else None
        return parts is None or bool(parts.scheme and parts.netloc)

    return checker


@dataclass(frozen=True)
class Erratum:
    """A known mistake in GitHub's description, corrected when the subset is loaded.

    `rename` swaps a keyword (old, new) at `pointer`; `nullable` marks the schema there
    nullable. Applying fails once upstream has fixed the mistake, so the list stays true.
    """

    pointer: str
    reason: str
    rename: tuple[str, str] | None = None
    nullable: bool = False

    def target(self, document: Json) -> Json:
        """The schema object the JSON pointer names."""
        node: Any = document
        for part in self.pointer.strip("/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def apply(self, document: Json) -> None:
        """Correct `document` in place."""
        node = self.target(document)
        if self.rename:
            old, new = self.rename
            node[new] = node.pop(old)
        if self.nullable:
            if node.get("nullable"):
                raise ValueError(f"{self.pointer} is already nullable upstream")
            node["nullable"] = True


SPEC_ERRATA = (
    Erratum(
        "/paths/~1app~1installations/get/responses/200/content/application~1json/schema/items"
        "/properties/account",
        "inlined as allOf[simple-user, enterprise], which no account satisfies; the "
        "`installation` component says anyOf",
        rename=("allOf", "anyOf"),
    ),
    Erratum(
        "/components/schemas/pull-request/properties/head/properties/repo",
        "GitHub sends `head.repo: null` when the fork was deleted",
        nullable=True,
    ),
    Erratum(
        "/components/schemas/pull-request-simple/properties/head/properties/repo",
        "GitHub sends `head.repo: null` when the fork was deleted",
        nullable=True,
    ),
    Erratum(
        "/components/schemas/issue-search-result-item/properties/body",
        "GitHub sends `body: null` for an issue or pull request without a description, as the "
        "`issue` schema allows",
        nullable=True,
    ),
)


class OpenApiSubset:
    """GitHub's OpenAPI description (the subset in fixtures/github) turned into validators.

    The server checks request bodies with it (GitHub answers a schema violation with 422
    `Invalid request.`); the tests check every response body with it.
    """

    def __init__(self, path: Path = SUBSET) -> None:
        self.document: Json = json.loads(path.read_text())
        for erratum in SPEC_ERRATA:
            erratum.apply(self.document)
        self._components = to_json_schema(self.document["components"])
        self._checker = format_checker()
        self._validators: dict[str, jsonschema.Draft4Validator] = {}

    def operation(self, method: str, template: str) -> Json | None:
        """The operation object for `method template`, or None when the subset lacks it."""
        item = self.document["paths"].get(template, {})
        return item.get(method.lower())

    def validator(self, schema: Json) -> jsonschema.Draft4Validator:
        """A validator for `schema` whose `$ref`s resolve inside the subset's components."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._validators:
            import jsonschema

            root = {"allOf": [to_json_schema(schema)], "components": self._components}
            self._validators[key] = jsonschema.Draft4Validator(root, format_checker=self._checker)
        return self._validators[key]

    def request_schema(self, method: str, template: str) -> Json | None:
        """The JSON request-body schema of an operation, if it has one."""
        operation = self.operation(method, template) or {}
        content = operation.get("requestBody", {}).get("content", {})
        return content.get("application/json", {}).get("schema")

    def response_schema(self, method: str, template: str, status: int) -> Json | None:
        """The JSON schema GitHub documents for this operation and status, if any."""
        operation = self.operation(method, template) or {}
        response = operation.get("responses", {}).get(str(status))
        if response and "$ref" in response:
            response = self.document["components"]["responses"][response["$ref"].split("/")[-1]]
        content = (response or {}).get("content", {})
        media = content.get("application/json") or content.get("application/scim+json") or {}
        return media.get("schema")

    def errors(self, schema: Json, instance: Any) -> list[jsonschema.ValidationError]:
        """Every violation of `schema` by `instance`, shallowest first."""
        found = self.validator(schema).iter_errors(instance)
        return sorted(found, key=lambda error: len(error.absolute_path))

    def webhook_schema(self, name: str) -> Json:
        """The payload schema of one webhook (a key of `x-webhooks`, e.g. `pull-request-opened`)."""
        post = self.document["x-webhooks"][name]["post"]
        return post["requestBody"]["content"]["application/json"]["schema"]


def validation_available() -> bool:
    """Whether `jsonschema` is installed, so that bodies can be checked against the subset."""
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def load_subset() -> OpenApiSubset:
    """The OpenAPI subset, parsed once per process."""
    return OpenApiSubset()


def describe_violation(error: jsonschema.ValidationError) -> str:
    """One line of a GitHub `Invalid request.` message for a schema violation."""
    value = error.instance
    if error.validator == "maxLength":
        return f"Only {error.validator_value} characters are allowed; {len(value)} were supplied."
    if error.validator == "maxItems":
        allowed = error.validator_value
        return f"No more than {allowed} items are allowed; {len(value)} were supplied."
    if error.validator == "required":
        name = error.message.split(" is a required")[0].strip("'")
        return f'"{name}" wasn\'t supplied.'
    where = "/".join(str(part) for part in error.absolute_path) or "body"
    return f"For 'properties/{where}', {error.message}."


# ---------------------------------------------------------------------------------------------
# State
