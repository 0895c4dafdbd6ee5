"""Every answer a target API can give a start, through the proxy on the real Firestore emulator
and the API stand-in: odd 2xx bodies, Google's canonical error codes, error bodies that are not
Google's JSON, answers cut off or reset. No answer may start a target twice or lose a run."""

from __future__ import annotations

import google.auth.exceptions
import pytest

from emulator.googleapis import Fault
from runonce.targets import SUBSTITUTION, BuildTrigger, CloudRunJob, GoogleApi, Workflow
from runonce.targets.proxy import Proxy

from .conftest import JOB, TRIGGER, WORKFLOW, FakeCredentials, scheduler_headers, serve

GRACE = 62.0  # the proxy's default grace for the 2 s timeout the fixture uses, and a second
PUBLISH = "https://pubsub.googleapis.com/v1/projects/acme-prod/topics/nightly:publish"
TARGETS = {
    "workflow": (Workflow(WORKFLOW), "/executions", "executions"),
    "cloud run job": (CloudRunJob(JOB), ":run", "executions"),
    "build trigger": (BuildTrigger(TRIGGER), ":run", "builds"),
}
ODD_2XX = {
    "html": Fault("answer", status=200, body="<html><body>OK</body></html>", content_type="text/html"),
    "empty": Fault("answer", status=200, body=""),
    "truncated json": Fault("answer", status=200, body='{"name": "projects/acme-prod/loc'),
    "json without name": Fault("answer", status=200, body='{"done": false}'),
    "another name": Fault("answer", status=200, body='{"name": "projects/other/locations/x/widgets/1"}'),
    "a json list": Fault("answer", status=200, body="[]"),
    "204 no content": Fault("answer", status=204, body=""),
    "cut off mid-body": Fault("cut"),
}


def _started(stand_in, kind: str) -> list[dict]:
    return stand_in.resources(kind)


@pytest.mark.parametrize("answer", ODD_2XX.values(), ids=ODD_2XX.keys())
@pytest.mark.parametrize("name", TARGETS.keys())
def test_an_odd_2xx_to_a_start_completes_the_run_and_never_starts_it_again(
    proxy_app, stand_in, clock, name, answer
):
    target, path, kind = TARGETS[name]
    client = proxy_app(target).test_client()
    stand_in.inject(Fault(**{**vars(answer), "path_contains": path}))
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 200 and first.json["outcome"] == "completed", first.json
    [started] = _started(stand_in, kind)
    result = first.json["result"]
    if target.lookup(first.json["run_key"]) is not None:  # found again by its key
        assert result["reconciled"] is True and started["name"] in result.values()
    else:
        assert result["reconciled"] is False and result["answer_unreadable"]
    clock.advance(3600)
    assert client.post("/", headers=scheduler_headers()).json["outcome"] == "duplicate"
    assert len(_started(stand_in, kind)) == 1


def test_a_generic_call_whose_2xx_answer_is_cut_off_is_not_sent_again(proxy_app, stand_in):
    client = proxy_app(GoogleApi("POST", PUBLISH, body={"messages": []})).test_client()
    stand_in.inject(Fault("cut", path_contains=":publish"))
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 200 and first.json["outcome"] == "completed"
    assert first.json["result"]["answer_unreadable"].startswith("was cut off")
    client.post("/", headers=scheduler_headers())
    assert len(stand_in.starts()) == 1


NOT_DONE = [(409, "ABORTED"), (429, "RESOURCE_EXHAUSTED")]


@pytest.mark.parametrize(("status", "code"), NOT_DONE, ids=[code for _, code in NOT_DONE])
def test_a_start_google_says_was_not_done_is_released_and_the_retry_starts_it(
    proxy_app, stand_in, status, code
):
    """AIP-194: ABORTED is retried at a higher level (here: the whole attempt), never recorded lost."""
    client = proxy_app(Workflow(WORKFLOW)).test_client()
    stand_in.inject(Fault("fail", path_contains="/executions", status=status, code=code))
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 500 and first.json["outcome"] == "retry", first.json
    second = client.post("/", headers=scheduler_headers())
    assert second.json["outcome"] == "completed" and second.json["result"]["reconciled"] is False
    assert len(stand_in.resources("executions")) == 1


REFUSED = [
    (400, "FAILED_PRECONDITION"),
    (400, "OUT_OF_RANGE"),
    (501, "UNIMPLEMENTED"),
]


@pytest.mark.parametrize(("status", "code"), REFUSED, ids=[code for _, code in REFUSED])
def test_a_start_google_refuses_is_recorded_failed_and_not_retried(proxy_app, stand_in, ledger, status, code):
    client = proxy_app(CloudRunJob(JOB)).test_client()
    stand_in.inject(Fault("fail", path_contains=":run", status=status, code=code))
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 200 and first.json["outcome"] == "failed", first.json
    assert code in first.json["error"]
    assert client.post("/", headers=scheduler_headers()).json["status"] == "failed"
    assert len(stand_in.starts()) == 1 and ledger.get(first.json["run_key"])["status"] == "failed"


UNKNOWN = [
    (503, "UNAVAILABLE", None),
    (500, "INTERNAL", None),
    (500, "UNKNOWN", None),
    (504, "DEADLINE_EXCEEDED", None),
    (499, "CANCELLED", None),
    (502, None, "<html><title>502 Bad Gateway</title></html>"),
    (409, None, ""),
]


def _fault(status: int, code: str | None, body: str | None, commit: bool) -> Fault:
    if body is not None:
        return Fault("answer", path_contains="/executions", status=status, commit=commit, body=body)
    return Fault(
        "answer", path_contains="/executions", status=status, commit=commit, body=_google_error(status, code)
    )


UNKNOWN_IDS = [f"{status} {code or repr(body[:10])}" for status, code, body in UNKNOWN]


@pytest.mark.parametrize(("status", "code", "body"), UNKNOWN, ids=UNKNOWN_IDS)
def test_a_start_that_may_have_happened_and_did_is_found_at_once(proxy_app, stand_in, status, code, body):
    client = proxy_app(Workflow(WORKFLOW)).test_client()
    stand_in.inject(_fault(status, code, body, commit=True))
    first = client.post("/", headers=scheduler_headers())
    [execution] = stand_in.resources("executions")
    assert first.status_code == 200 and first.json["outcome"] == "completed", first.json
    assert first.json["result"] == {"target": "workflow", "execution": execution["name"], "reconciled": True}


@pytest.mark.parametrize(("status", "code", "body"), UNKNOWN, ids=UNKNOWN_IDS)
def test_a_start_that_may_have_happened_and_is_not_found_holds_the_run_then_starts_once(
    proxy_app, stand_in, clock, ledger, status, code, body
):
    """Not found at once (it may not be listed yet): the run is held for the grace, answered
    409 meanwhile without calling the API, and the attempt after the grace looks, then starts."""
    client = proxy_app(Workflow(WORKFLOW)).test_client()
    stand_in.inject(_fault(status, code, body, commit=False))
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 409 and first.json["outcome"] == "in_progress", first.json
    record = ledger.get(first.json["run_key"])
    assert record["status"] == "in_progress" and str(status) in record["held_reason"]
    calls = len(stand_in.calls)
    assert client.post("/", headers=scheduler_headers()).status_code == 409
    assert len(stand_in.calls) == calls
    clock.advance(GRACE)
    after = client.post("/", headers=scheduler_headers())
    assert after.json["outcome"] == "completed" and after.json["attempt"] == 2
    assert after.json["result"]["reconciled"] is False
    assert len(stand_in.resources("executions")) == 1


def _google_error(status: int, code: str | None) -> str:
    return f'{{"error": {{"code": {status}, "message": "injected", "status": "{code}"}}}}'


@pytest.mark.parametrize(
    ("status", "body", "outcome"),
    [(404, "<html>Not Found</html>", "failed"), (429, "Too Many Requests", "retry"), (413, "", "failed")],
    ids=["404 html", "429 text", "413 empty"],
)
def test_an_error_body_that_is_not_googles_is_read_by_its_http_status(
    proxy_app, stand_in, status, body, outcome
):
    client = proxy_app(Workflow(WORKFLOW)).test_client()
    stand_in.inject(
        Fault("fail", path_contains="/executions", status=status, body=body, content_type="text/html")
    )
    assert client.post("/", headers=scheduler_headers()).json["outcome"] == outcome
    assert stand_in.resources("executions") == []


TOPIC = "https://pubsub.googleapis.com/v1/projects/acme-prod/topics/nightly"
# A create whose resource is there, a delete whose resource is not (AIP-135): (method, status, code, fact)
THERE_ALREADY = {
    "create finds it exists": ("PUT", 409, "ALREADY_EXISTS", "already_existed"),
    "delete finds it gone": ("DELETE", 404, "NOT_FOUND", "already_gone"),
}


@pytest.mark.parametrize(
    ("method", "status", "code", "fact"), THERE_ALREADY.values(), ids=THERE_ALREADY.keys()
)
def test_a_generic_call_whose_answer_was_lost_and_whose_retry_finds_it_done_succeeded(
    proxy_app, stand_in, clock, ledger, method, status, code, fact
):
    client = proxy_app(GoogleApi(method, TOPIC, body={})).test_client()
    stand_in.inject(Fault("drop", method=method, path_contains="/topics/"))
    first = client.post("/", headers=scheduler_headers())
    assert first.status_code == 409 and first.json["outcome"] == "in_progress"
    clock.advance(GRACE)
    stand_in.inject(Fault("fail", method=method, path_contains="/topics/", status=status, code=code))
    retry = client.post("/", headers=scheduler_headers())
    assert retry.json["outcome"] == "completed", retry.json
    assert retry.json["result"] == {"target": "googleapis", "name": None, fact: True, "reconciled": True}
    assert ledger.get(retry.json["run_key"])["status"] == "completed"


@pytest.mark.parametrize(
    ("method", "status", "code", "fact"), THERE_ALREADY.values(), ids=THERE_ALREADY.keys()
)
def test_a_generic_call_whose_first_try_finds_it_done_did_nothing_and_fails(
    proxy_app, stand_in, method, status, code, fact
):
    client = proxy_app(GoogleApi(method, TOPIC, body={})).test_client()
    stand_in.inject(Fault("fail", method=method, path_contains="/topics/", status=status, code=code))
    first = client.post("/", headers=scheduler_headers())
    assert first.json["outcome"] == "failed" and "before this run's first call" in first.json["error"]


def test_a_connection_reset_after_a_build_started_is_found_by_its_substitution(proxy_app, stand_in):
    client = proxy_app(BuildTrigger(TRIGGER)).test_client()
    stand_in.inject(Fault("cut", path_contains=":run"))  # status line sent, then the body is cut
    response = client.post("/", headers=scheduler_headers())
    [build] = stand_in.resources("builds")
    assert build["substitutions"][SUBSTITUTION] == response.json["run_key"]
    assert response.json["result"] == {"target": "build_trigger", "build": build["name"], "reconciled": True}


def test_a_redirect_is_not_followed_and_is_a_refusal(proxy_app, stand_in):
    """Google APIs do not redirect: following one would send the start (and its token) elsewhere."""
    client = proxy_app(CloudRunJob(JOB)).test_client()
    stand_in.inject(Fault("answer", path_contains=":run", status=302, commit=False, body=""))
    first = client.post("/", headers=scheduler_headers())
    assert first.json["outcome"] == "failed" and "answered 302" in first.json["error"]
    assert [call.method for call in stand_in.calls] == ["POST"]
    assert client.post("/", headers=scheduler_headers()).json["outcome"] == "duplicate"


class FailingRefresh(FakeCredentials):
    """Credentials whose token cannot be minted the first `failures` times (metadata server down)."""

    def __init__(self, failures: int):
        super().__init__()
        self.failures = failures

    def refresh(self, request):
        if self.failures > 0:
            self.failures -= 1
            raise google.auth.exceptions.TransportError("metadata server unreachable")
        super().refresh(request)


def test_a_token_that_cannot_be_minted_after_a_takeover_keeps_the_run_held(
    stand_in, clock, ledger, collection, firestore_client
):
    """Nothing was sent, but an earlier attempt's call may have landed: releasing the run would
    forget that, and the generic call's later ALREADY_EXISTS would read as "existed before"."""
    url = TOPIC
    credentials = FailingRefresh(0)
    proxy = Proxy(
        GoogleApi("PUT", url, body={}),
        credentials=credentials,
        base_url=stand_in.url,
        timeout=2.0,
        environ={},
    )
    client = serve(proxy, collection, firestore_client).test_client()
    stand_in.inject(Fault("drop", method="PUT", path_contains="/topics/"))
    assert client.post("/", headers=scheduler_headers()).status_code == 409
    clock.advance(GRACE)
    credentials.failures, credentials.token, credentials.expiry = 1, None, None
    held = client.post("/", headers=scheduler_headers())
    assert held.status_code == 409 and held.json["outcome"] == "in_progress", held.json
    clock.advance(GRACE)
    stand_in.inject(Fault("fail", method="PUT", path_contains="/topics/", status=409, code="ALREADY_EXISTS"))
    done = client.post("/", headers=scheduler_headers())
    assert done.json["outcome"] == "completed" and done.json["result"]["already_existed"] is True, done.json
