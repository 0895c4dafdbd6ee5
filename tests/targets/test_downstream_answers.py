"""@idempotent_endpoint served by functions-framework (its test client), on the real Firestore
emulator and, for the tests marked `both_stores`, on the in-memory store too (the fast tier):
every answer shape Flask accepts is replayed to a repeat as it was first sent, a token reused
with another request is refused, statuses follow the library's rule, every answer of the
decorator's own is JSON, and the store failing at any step (on the emulator alone) never runs
the handler twice."""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import flask
import functions_framework
import grpc
import pytest
from werkzeug.serving import make_server
from werkzeug.wrappers import Response

from emulator.wire import Fault
from runonce import ConfigError, PermanentError
from runonce.core.errors import NotRunnable
from runonce.downstream import REPLAYED_HEADER, idempotent_endpoint
from runonce.store import firestore as ledger_module
from runonce.targets import IDEMPOTENCY_HEADER
from tests.core.conftest import memory_store, tap, tapped_client
from tests.targets.test_downstream import store_client

__all__ = ["memory_store", "store_client", "tap", "tapped_client"]  # fixtures, used by name

ENDPOINT: Callable | None = None
"""What the served main.py calls: the endpoint under test, set by `serve`."""

MAIN = """
import flask
import functions_framework
from tests.targets import test_downstream_answers as spec

@functions_framework.http
def handle(request):
    return spec.ENDPOINT(request)
"""


class Handler:
    """The handler behind the endpoint: counts its runs, then answers what the test asks."""

    def __init__(self, answer: Callable):
        self.runs = 0
        self.answer = answer

    def __call__(self, request):
        self.runs += 1
        return self.answer(request)


@pytest.fixture
def serve(store_client, collection, clock, monkeypatch, tmp_path):
    """A functions-framework test client of `idempotent_endpoint(**options)(handler)`, lease 120 s."""

    def build(handler: Callable, **options):
        options.setdefault("lease", 120)
        options.setdefault("collection", collection)
        endpoint = idempotent_endpoint(name="charge", client=store_client, **options)(handler)
        monkeypatch.setattr(sys.modules[__name__], "ENDPOINT", endpoint)
        source = tmp_path / f"main_{uuid.uuid4().hex[:6]}.py"
        source.write_text(MAIN)
        # create_app writes these into os.environ; keep them to this test.
        for name in ("FUNCTION_TARGET", "FUNCTION_SIGNATURE_TYPE", "FUNCTION_SOURCE"):
            monkeypatch.delenv(name, raising=False)
        return functions_framework.create_app("handle", str(source), "http").test_client()

    return build


def post(client, token: str | None = "run-key-1", path: str = "/", method: str = "POST", **request):
    headers = request.pop("headers", {})
    if token is not None:
        headers[IDEMPOTENCY_HEADER] = token
    request.setdefault("json", {"amount": 5})
    return client.open(path, method=method, headers=headers, **request)


def _stream():
    yield "id,amount\n"
    yield "1,5\n"


SHAPES = {
    "text": lambda request: "charged",
    "bytes, not UTF-8": lambda request: (b"\x89PNG\r\n\x1a\n\x00\xff", 201, {"Content-Type": "image/png"}),
    "dict": lambda request: {"charged": 5},
    "list": lambda request: [{"charged": 5}],
    "text status": lambda request: ({"charged": 5}, "201 CREATED"),
    "headers without status": lambda request: ({"charged": 5}, {"X-Receipt": "r-1"}),
    "three-tuple, header list": lambda request: ("made", 201, [("X-Receipt", "r-1")]),
    "Response": lambda request: Response(
        '{"charged":5}', 202, {"X-Receipt": "r-1"}, mimetype="application/json"
    ),
    "Response in a tuple": lambda request: (Response("made"), 201, {"X-Receipt": "r-1"}),
    "streamed Response": lambda request: Response(_stream(), mimetype="text/csv"),
    "generator": lambda request: _stream(),
}


WITH_RECEIPT = {"headers without status", "three-tuple, header list", "Response", "Response in a tuple"}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.both_stores
def test_every_answer_shape_is_replayed_with_its_status_headers_and_body(serve, shape):
    handler = Handler(SHAPES[shape])
    client = serve(handler)
    first, again = post(client), post(client)
    assert (again.status_code, again.data) == (first.status_code, first.data)
    assert again.status_code < 400 and first.data
    for name in ("Content-Type", "X-Receipt"):
        assert again.headers.get(name) == first.headers.get(name)
    if shape in WITH_RECEIPT:
        assert first.headers["X-Receipt"] == "r-1"
    assert again.headers[REPLAYED_HEADER] == "true" and REPLAYED_HEADER not in first.headers
    assert handler.runs == 1


@pytest.mark.both_stores
def test_an_answer_too_large_to_store_is_recorded_and_repeats_say_so_with_its_status(serve):
    handler = Handler(lambda request: ("x" * 600_000, 201))  # more than the 512 KiB stored
    client = serve(handler)
    first, again = post(client), post(client)
    assert (first.status_code, len(first.data)) == (201, 600_000)
    assert again.status_code == 201 and again.headers[REPLAYED_HEADER] == "true"
    assert again.json["outcome"] == "duplicate" and again.json["body_stored"] is False
    assert "524288" in again.json["reason"]
    assert handler.runs == 1


@pytest.mark.both_stores
def test_an_answer_flask_cannot_send_is_answered_json_and_never_run_again(serve):
    handler = Handler(lambda request: None)  # the handler ran its effect and forgot to return
    client = serve(handler)
    first, again = post(client), post(client)
    assert (first.status_code, first.json["outcome"]) == (500, "error")
    assert "None" in first.json["error"]
    assert (again.status_code, again.json["outcome"], again.json["body_stored"]) == (500, "duplicate", False)
    assert handler.runs == 1


@pytest.mark.parametrize(
    "repeat",
    [
        {"json": {"amount": 999}},
        {"method": "PUT"},
        {"path": "/refund"},
        {"path": "/?currency=EUR"},
        {"json": None, "data": b""},
    ],
    ids=["other body", "other method", "other path", "other query", "no body"],
)
@pytest.mark.both_stores
def test_a_token_reused_with_another_request_is_refused_422_and_not_run(serve, repeat):
    handler = Handler(lambda request: ({"charged": 5}, 201))
    client = serve(handler)
    first, reused = post(client), post(client, **repeat)
    assert first.status_code == 201
    assert (reused.status_code, reused.json["outcome"]) == (422, "payload_mismatch")
    assert IDEMPOTENCY_HEADER in reused.json["error"]
    assert handler.runs == 1


@pytest.mark.both_stores
def test_the_same_json_in_another_key_order_or_spacing_is_the_same_request(serve):
    handler = Handler(lambda request: request.get_json())
    client = serve(handler)
    json_type = {"content_type": "application/json"}
    first = post(client, json=None, data=b'{"amount": 5, "order": "A-17"}', **json_type)
    again = post(client, json=None, data=b'{"order":"A-17","amount":5}', **json_type)
    assert (
        (again.status_code, again.json)
        == (200, {"amount": 5, "order": "A-17"})
        == (first.status_code, first.json)
    )
    assert handler.runs == 1


@pytest.mark.both_stores
def test_a_body_that_is_not_json_counts_byte_for_byte(serve):
    handler = Handler(lambda request: "stored")
    client = serve(handler)
    body = {"json": None, "content_type": "application/json"}
    assert post(client, data=b"\xff{not json", **body).status_code == 200
    assert post(client, data=b"\xff{not json", **body).headers[REPLAYED_HEADER] == "true"
    assert post(client, data=b"\xff{not json!", **body).status_code == 422
    assert handler.runs == 1


RETRYABLE = {
    "int 503": lambda request: ({"error": "bank down"}, 503),
    "text 503": lambda request: ({"error": "bank down"}, "503 SERVICE UNAVAILABLE"),
    "Response 503": lambda request: Response("bank down", status=503),
    "int 408": lambda request: ("slow", 408),
    "text 429": lambda request: ("slow down", "429 TOO MANY REQUESTS"),
    "Response 500 in a tuple": lambda request: (Response("broken"), 500),
}


@pytest.mark.parametrize("answer", RETRYABLE)
@pytest.mark.both_stores
def test_408_429_and_5xx_answers_are_sent_as_given_and_release_the_token(serve, answer):
    handler = Handler(RETRYABLE[answer])
    client = serve(handler)
    first = post(client)
    handler.answer = lambda request: ({"charged": 5}, 201)
    retry = post(client)
    assert first.status_code in (408, 429, 500, 503) and first.data == handler_answer_data(RETRYABLE[answer])
    assert (retry.status_code, retry.json) == (201, {"charged": 5}) and REPLAYED_HEADER not in retry.headers
    assert handler.runs == 2


def handler_answer_data(answer: Callable) -> bytes:
    """The body Flask itself would send for `answer` (outside any endpoint)."""
    app = flask.Flask("plain")
    with app.test_request_context():
        return app.make_response(answer(None)).get_data()


STORED_4XX = {
    "int 404": lambda request: ({"error": "no such order"}, 404),
    "text 409": lambda request: ({"error": "order closed"}, "409 CONFLICT"),
    "Response 400": lambda request: Response("bad order", status=400),
}


@pytest.mark.parametrize("answer", STORED_4XX)
@pytest.mark.both_stores
def test_other_4xx_answers_are_stored_and_replayed(serve, answer):
    handler = Handler(STORED_4XX[answer])
    client = serve(handler)
    first, again = post(client), post(client)
    assert 400 <= first.status_code < 500
    assert (again.status_code, again.data) == (first.status_code, first.data)
    assert again.headers[REPLAYED_HEADER] == "true"
    assert handler.runs == 1


@pytest.mark.both_stores
def test_an_invalid_setting_is_answered_json_misconfigured_and_nothing_runs(serve):
    handler = Handler(lambda request: "charged")
    client = serve(handler, lease=0)
    response = post(client)
    assert (response.status_code, response.json["outcome"]) == (500, "misconfigured")
    assert "lease" in response.json["error"]
    assert handler.runs == 0


@pytest.mark.both_stores
def test_a_permanent_error_whose_str_raises_is_stored_and_answered_json_422(serve):
    class Unprintable(PermanentError):
        def __str__(self):
            raise RuntimeError("no message")

    def refuse(request):
        raise Unprintable()

    handler = Handler(refuse)
    client = serve(handler)
    first, again = post(client), post(client)
    assert (first.status_code, first.json["outcome"]) == (422, "failed")
    assert (again.status_code, again.json) == (422, first.json)
    assert handler.runs == 1


@pytest.mark.both_stores
def test_an_exception_whose_str_and_repr_raise_is_answered_json_and_released(serve):
    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no message")

        def __repr__(self):
            raise RuntimeError("no repr")

    def fail(request):
        raise Unprintable()

    handler = Handler(fail)
    client = serve(handler)
    first = post(client)
    handler.answer = lambda request: "charged"
    assert (first.status_code, first.json["outcome"]) == (500, "retry")
    assert post(client).data == b"charged"
    assert handler.runs == 2


@pytest.mark.both_stores
def test_a_streamed_body_that_raises_releases_the_token_and_is_answered_json(serve):
    def broken():
        yield "id,amount\n"
        raise ConnectionError("bank went away mid-stream")

    handler = Handler(lambda request: Response(broken(), mimetype="text/csv"))
    client = serve(handler)
    first = post(client)
    handler.answer = lambda request: "charged"
    assert (first.status_code, first.json) == (500, {"outcome": "retry", "error": "ConnectionError"})
    assert post(client).data == b"charged"
    assert handler.runs == 2


def test_the_store_failing_on_the_completion_still_sends_the_answer_and_never_reruns(serve, tap):
    def effect_then_store_fails(request):
        tap.inject(Fault("Commit", grpc.StatusCode.PERMISSION_DENIED))  # the completion write
        return {"charged": 5}, 201

    handler = Handler(effect_then_store_fails)
    client = serve(handler)
    first, again = post(client), post(client)
    assert (first.status_code, first.json) == (201, {"charged": 5})
    assert (again.status_code, again.json["outcome"]) == (409, "in_progress")  # held until its lease ends
    assert handler.runs == 1


def test_the_store_failing_on_the_release_is_answered_json_retry(serve, tap):
    def fail(request):
        tap.inject(Fault("Commit", grpc.StatusCode.PERMISSION_DENIED))  # the release
        raise ConnectionError("bank unreachable")

    client = serve(Handler(fail))
    response = post(client)
    assert (response.status_code, response.json["outcome"]) == (500, "retry")


def test_the_store_failing_on_the_failure_write_is_answered_json_422_not_recorded(serve, tap):
    def refuse(request):
        tap.inject(Fault("Commit", grpc.StatusCode.PERMISSION_DENIED))  # the failure write
        raise PermanentError("card declined")

    client = serve(Handler(refuse))
    response = post(client)
    assert (response.status_code, response.json["outcome"], response.json["recorded"]) == (
        422,
        "failed",
        False,
    )


def test_a_store_that_refuses_the_claim_is_answered_misconfigured_naming_the_fix(serve, tap):
    handler = Handler(lambda request: "charged")
    client = serve(handler)
    tap.inject(Fault("Commit", grpc.StatusCode.PERMISSION_DENIED))
    response = post(client)
    assert (response.status_code, response.json["outcome"]) == (500, "misconfigured")
    assert "roles/datastore.user" in response.json["error"]
    assert handler.runs == 0


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {IDEMPOTENCY_HEADER: ""},
        {IDEMPOTENCY_HEADER: "   "},
        [(IDEMPOTENCY_HEADER, "a"), (IDEMPOTENCY_HEADER, "b")],
    ],
    ids=["missing", "empty", "blank", "sent twice"],
)
@pytest.mark.both_stores
def test_a_request_without_one_usable_token_is_rejected_json_and_not_run(serve, headers):
    handler = Handler(lambda request: "charged")
    client = serve(handler)
    response = post(client, token=None, headers=headers)
    assert (response.status_code, response.json["outcome"]) == (400, "rejected")
    assert IDEMPOTENCY_HEADER in response.json["error"]
    assert handler.runs == 0


@pytest.mark.parametrize("token", ["clé-1", "k" * 8000, "projects/p/jobs/j:2026-11-29T03:00:00Z"])
@pytest.mark.both_stores
def test_any_other_token_is_one_token(serve, token):
    handler = Handler(lambda request: "charged")
    client = serve(handler)
    first, again, other = (
        post(client, token=token),
        post(client, token=token),
        post(client, token=token + "x"),
    )
    assert first.status_code == again.status_code == other.status_code == 200
    assert again.headers[REPLAYED_HEADER] == "true" and REPLAYED_HEADER not in other.headers
    assert handler.runs == 2


@pytest.mark.fast
def test_an_async_handler_is_refused_when_decorated():
    async def handle(request):
        return "charged"

    with pytest.raises(NotRunnable, match="async"):
        idempotent_endpoint(name="charge")(handle)


@pytest.mark.both_stores
def test_an_answer_just_under_the_bound_is_stored_and_replayed_byte_for_byte(serve):
    body = b"x" * 520_000  # about 520 kB of JSON text with the status and headers: under 512 KiB
    handler = Handler(lambda request: (body, 201))
    client = serve(handler)
    first, again = post(client), post(client)
    assert (again.status_code, again.data) == (first.status_code, first.data) == (201, body)
    assert again.headers[REPLAYED_HEADER] == "true" and handler.runs == 1


@pytest.mark.fast
def test_the_docs_table_lists_every_outcome_of_the_endpoint_with_its_status():
    from runonce.downstream import EndpointOutcome

    docs = (Path(__file__).resolve().parents[2] / "docs" / "targets.md").read_text()
    section = docs.split("## Downstream idempotency", 1)[1].split("\n## ", 1)[0]
    for outcome in EndpointOutcome:
        assert f"{outcome.status} `{outcome.label}`" in section, outcome


@pytest.mark.both_stores
def test_a_handler_reading_the_raw_stream_still_gets_the_body(serve):
    handler = Handler(lambda request: request.stream.read())
    client = serve(handler)
    response = post(client, json=None, data=b"order A-17", content_type="text/plain")
    assert response.data == b"order A-17"


@pytest.mark.parametrize(("code", "runs"), [(404, 1), (409, 1), (503, 2), (429, 2)])
@pytest.mark.both_stores
def test_an_abort_is_an_answer_by_the_status_rule(serve, code, runs):
    handler = Handler(lambda request: flask.abort(code))
    client = serve(handler)
    first, again = post(client), post(client)
    assert first.status_code == again.status_code == code
    assert (REPLAYED_HEADER in again.headers) is (runs == 1)
    assert handler.runs == runs


@pytest.mark.both_stores
def test_a_coroutine_returned_by_a_plain_handler_is_answered_misconfigured_and_released(serve):
    async def charge():
        return "charged"

    handler = Handler(lambda request: charge())
    client = serve(handler)
    first = post(client)
    handler.answer = lambda request: "charged"
    assert (first.status_code, first.json["outcome"]) == (500, "misconfigured")
    assert post(client).data == b"charged"  # nothing had run: the token was released
    assert handler.runs == 2


@pytest.fixture
def short_budgets(monkeypatch):
    """Store budgets of 1 s (claim, release) and 2 s (finishing write), as tests/core uses."""
    monkeypatch.setattr(ledger_module, "CLAIM_SECONDS", 1.0)
    monkeypatch.setattr(ledger_module, "RELEASE_SECONDS", 1.0)
    monkeypatch.setattr(ledger_module, "FINISH_SECONDS", 2.0)


def test_the_store_unavailable_before_the_claim_is_answered_json_and_nothing_runs(serve, tap, short_budgets):
    handler = Handler(lambda request: "charged")
    client = serve(handler)
    tap.inject(Fault("Commit", times=100))
    response = post(client)
    assert (response.status_code, response.json["outcome"]) == (500, "store_unavailable")
    assert handler.runs == 0


@pytest.mark.parametrize("fault", ["unavailable", "hung"])
def test_the_store_down_on_the_completion_still_sends_the_answer_and_never_reruns(
    serve, tap, short_budgets, fault
):
    def effect_then_store_down(request):
        tap.inject(Fault("Commit", times=100, hang=30 if fault == "hung" else 0))
        return {"charged": 5}, 201

    handler = Handler(effect_then_store_down)
    client = serve(handler)
    first = post(client)
    tap.reset()
    again = post(client)
    assert (first.status_code, first.json) == (201, {"charged": 5})
    assert (again.status_code, again.json["outcome"]) == (409, "in_progress")
    assert handler.runs == 1


@pytest.mark.both_stores
def test_simultaneous_repeats_run_the_handler_once(serve):
    def slow(request):
        time.sleep(0.5)
        return {"charged": 5}, 201

    handler = Handler(slow)
    client = serve(handler)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: post(client), range(8)))
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses.count(201) >= 1 and set(statuses) <= {201, 409}
    assert handler.runs == 1
    assert post(client).headers[REPLAYED_HEADER] == "true"


@pytest.fixture
def served(serve):
    """`serve`'s app on a real loopback server; yields a raw-HTTP POST to it (headers as bytes)."""
    apps = []

    def start(handler: Callable) -> Callable[[list[tuple[bytes, bytes]]], tuple[int, bytes, dict]]:
        app = serve(handler).application
        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        apps.append(server)

        def send(headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes, dict]:
            connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=30)
            connection.putrequest("POST", "/")
            for name, value in [(b"Content-Type", b"application/json"), (b"Content-Length", b"2"), *headers]:
                connection.putheader(name, value)
            connection.endheaders(b"{}")
            response = connection.getresponse()
            answer = (response.status, response.read(), dict(response.getheaders()))
            connection.close()
            return answer

        return send

    yield start
    for server in apps:
        server.shutdown()


@pytest.mark.both_stores
def test_over_a_real_server_a_header_sent_twice_is_rejected(served):
    handler = Handler(lambda request: "charged")
    send = served(handler)
    header = IDEMPOTENCY_HEADER.encode()
    status, body, _ = send([(header, b"run-key-1"), (header, b"run-key-2")])
    assert status == 400 and json.loads(body)["outcome"] == "rejected"
    assert handler.runs == 0


@pytest.mark.both_stores
def test_over_a_real_server_a_utf8_token_is_one_token(served):
    handler = Handler(lambda request: "charged")
    send = served(handler)
    token = [(IDEMPOTENCY_HEADER.encode(), "clé-ключ-1".encode())]
    (first, _, _), (again, data, headers) = send(token), send(token)
    assert (first, again, data) == (200, 200, b"charged") and headers[REPLAYED_HEADER] == "true"
    assert handler.runs == 1


@pytest.mark.both_stores
def test_another_request_taking_over_an_expired_claim_is_refused_and_does_not_run(serve, clock):
    entered, resume = threading.Event(), threading.Event()

    def first_hangs(request):
        entered.set()
        resume.wait(30)  # the first attempt's instance is gone; its claim stays in progress
        return "charged 5"

    handler = Handler(first_hangs)
    client = serve(handler)
    worker = threading.Thread(target=post, args=(client,))
    worker.start()
    try:
        assert entered.wait(10)
        clock.advance(121)  # past the 120 s lease
        handler.answer = lambda request: "charged 999"
        other = post(client, json={"amount": 999})
    finally:
        resume.set()
        worker.join(30)
    assert (other.status_code, other.json["outcome"]) == (422, "payload_mismatch")
    assert handler.runs == 1
    # The first attempt outlived its lease, so its late completion is fenced off and the first
    # request's retry runs it again (the ledger's limit: the lease must outlast the handler).
    handler.answer = lambda request: "charged 5"
    retry = post(client)
    assert (retry.data, REPLAYED_HEADER in retry.headers, handler.runs) == (b"charged 5", False, 2)


@pytest.mark.both_stores
def test_a_query_with_its_parameters_in_another_order_is_the_same_request(serve):
    handler = Handler(lambda request: "charged")
    client = serve(handler)
    assert post(client, path="/?currency=EUR&amount=5&tag=a&tag=b").status_code == 200
    again = post(client, path="/?amount=5&tag=a&currency=EUR&tag=b")
    assert again.headers[REPLAYED_HEADER] == "true"
    assert post(client, path="/?amount=5&tag=b&currency=EUR&tag=a").status_code == 422  # a list reordered
    assert handler.runs == 1


@pytest.mark.fast
@pytest.mark.parametrize("header", ["", "X_Runonce_Token", "X Token", 42])
def test_a_header_name_no_request_can_carry_is_refused_when_decorated(header):
    with pytest.raises(ConfigError, match="header="):
        idempotent_endpoint(name="charge", header=header)


def test_the_store_down_on_the_read_of_a_repeat_is_answered_json_and_nothing_runs(
    serve, tap, short_budgets, monkeypatch
):
    handler = Handler(lambda request: ("charged", 201))
    client = serve(handler)
    assert post(client).status_code == 201
    real_get = ledger_module.Ledger.get

    def get_on_a_dead_store(self, key):
        """The repeat's read of the first request's record (the claim reads by itself)."""
        tap.inject(Fault("BatchGetDocuments", times=100))
        return real_get(self, key)

    monkeypatch.setattr(ledger_module.Ledger, "get", get_on_a_dead_store)
    response = post(client)
    assert (response.status_code, response.json["outcome"]) == (500, "store_unavailable")
    assert handler.runs == 1
