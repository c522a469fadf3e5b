"""The served OpenAPI schema tells the truth: schemathesis generates requests from ``/openapi.json`` (valid
and invalid ones, a bounded number per operation) and sends them, as an anonymous client, a player and
the operator, to a real host on a real Redis. Every answer must be documented by its operation: no 5xx,
no status the schema does not list, no body or content type other than the one it publishes.

Each operation runs its own Hypothesis search; the failures of all are gathered and shown together."""

from __future__ import annotations

from collections.abc import Iterator

import hypothesis
import pytest
import schemathesis
from schemathesis import checks

from codemojex.web import HostConfig
from tests.support.web import OPERATOR, Served, open_round

pytestmark = pytest.mark.slow

EXAMPLES = 15  # per operation and caller: bounded, so the run stays well under a minute
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
]
STREAMS = {"/api/events"}  # an event stream never ends: its answers are tested in test_api_events_metrics


@pytest.fixture(scope="module")
def host(redis_server) -> Iterator[tuple[Served, str]]:
    """A host on its own tag, with a round open and one player (whose token is returned)."""
    config = HostConfig(redis_url=redis_server.url, tag="openapi", operator_token=OPERATOR, proof=True)
    served = Served(config).start()
    try:
        with served.client(OPERATOR) as operator:
            open_round(operator)
        with served.client() as anon:
            token = anon.post("/api/players", json={"name": "Fuzz"}).json()["token"]
        yield served, token
    finally:
        served.stop()


def _fuzz(served: Served, headers: dict[str, str]) -> list[str]:
    schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json")
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path in STREAMS:
            continue

        @hypothesis.given(case=operation.as_strategy())
        @hypothesis.settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(hypothesis.HealthCheck),
        )
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=headers, checks=CHECKS)

        try:
            run()
        except BaseException as exc:  # a FailureGroup is a BaseExceptionGroup
            if isinstance(exc, KeyboardInterrupt):
                raise
            failures.append(f"{operation.label}: {exc}")
    return failures


@pytest.mark.parametrize("caller", ["anonymous", "player", "operator"])
def test_every_answer_to_generated_requests_is_one_the_schema_documents(host, caller):
    served, token = host
    headers = {"anonymous": {}, "player": {"Authorization": f"Bearer {token}"}}.get(
        caller, {"Authorization": f"Bearer {OPERATOR}"}
    )
    failures = _fuzz(served, headers)
    assert not failures, "\n\n".join(failures)


def test_the_schema_names_its_bearer_schemes_and_which_operations_need_them(host):
    served, _ = host
    with served.client() as anon:
        schema = anon.get("/openapi.json").json()
    schemes = schema["components"]["securitySchemes"]
    assert schemes["player"] == schemes["operator"] | {"description": schemes["player"]["description"]}
    assert schemes["player"]["scheme"] == "bearer"
    paths = schema["paths"]
    assert paths["/api/wallet"]["get"]["security"] == [{"player": []}]
    assert paths["/api/operator/stats"]["get"]["security"] == [{"operator": []}]
    assert {"player": []} in paths["/api/jobs/{job_id}"]["get"]["security"]
    assert {"operator": []} in paths["/api/jobs/{job_id}"]["get"]["security"]
    assert "security" not in paths["/api/rounds"]["get"]  # public


def test_every_operation_documents_its_errors_with_the_one_error_shape(host):
    served, _ = host
    with served.client() as anon:
        schema = anon.get("/openapi.json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            errors = {status: answer for status, answer in operation["responses"].items() if status >= "400"}
            assert "503" in errors, where
            for status, answer in errors.items():
                shape = answer["content"]["application/json"]["schema"]
                assert shape == {"$ref": "#/components/schemas/ErrorBody"}, f"{where} {status}"
            ok = [status for status in operation["responses"] if status < "300"]
            assert ok, where
            for status in ok:
                content = operation["responses"][status]["content"]
                if "application/json" in content:  # a typed body, not a bare object
                    assert "$ref" in content["application/json"]["schema"], f"{where} {status}"
