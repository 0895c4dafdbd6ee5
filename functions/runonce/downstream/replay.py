"""An endpoint's HTTP answer as `runonce.downstream` stores it and replays it to repeats.

The answer is what Flask sends for the handler's return value, whatever its shape (text, bytes,
dict, list, `(body, status)`, `(body, headers)`, `(body, status, headers)`, a `Response`, a
generator): the status, the headers and every byte of the body. It is stored as one JSON text,
the body as UTF-8 text or, when it is not UTF-8, base64. Firestore holds at most 1 MiB per
document (Firestore "Quotas and limits", https://cloud.google.com/firestore/quotas), so an answer
of more than `MAX_ANSWER_BYTES` is recorded without its body and headers: its status and the
reason only. Repeats of such an answer get a JSON body that says so, with the original status.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from werkzeug.wrappers import Response

from ..core.store import StoredResult

# Half the document limit: the record's other fields (the token, the endpoint name, timestamps)
# and Firestore's per-field overhead stay far below the rest.
MAX_ANSWER_BYTES = 512 * 1024
REPLAYED_HEADER = "X-Runonce-Replayed"
# Recomputed by the server for every answer it sends; a stored copy would be wrong or harmful.
_NOT_STORED_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})


@dataclass(frozen=True)
class HttpAnswer:
    """One HTTP answer in full: status line, headers and body."""

    status: str
    headers: list[tuple[str, str]]
    body: bytes

    @classmethod
    def of(cls, response: Response) -> HttpAnswer:
        """Read `response` in full. A streamed body is the handler's code: it runs here."""
        response.direct_passthrough = False  # a send_file answer is read like any other
        body = response.get_data()
        headers = [
            (name, value)
            for name, value in response.headers.items()
            if name.lower() not in _NOT_STORED_HEADERS
        ]
        return cls(response.status, headers, body)

    @property
    def status_code(self) -> int:
        """The status as a number."""
        return int(self.status.split(" ", 1)[0])

    def response(self, replayed: bool = False) -> Response:
        """The answer as a new Response (marked replayed for a repeat)."""
        headers = [*self.headers, (REPLAYED_HEADER, "true")] if replayed else self.headers
        return Response(self.body, status=self.status, headers=headers)

    def stored(self) -> StoredResult:
        """The answer as the ledger stores it: in full if it fits, else its status and why not."""
        try:
            body, encoding = self.body.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            body, encoding = base64.b64encode(self.body).decode("ascii"), "base64"
        record = {"status": self.status, "headers": self.headers, "body": body, "body_encoding": encoding}
        # ensure_ascii (the default) makes the text ASCII: its length is its size in bytes.
        text = json.dumps(record, separators=(",", ":"))
        if len(text) <= MAX_ANSWER_BYTES:
            return StoredResult(text)
        return not_stored(
            self.status, f"the answer is {len(text)} bytes as JSON, more than the {MAX_ANSWER_BYTES} stored"
        )


def not_stored(status: str, reason: str) -> StoredResult:
    """A completion recorded without the answer's body: its status and `reason`."""
    return StoredResult(json.dumps({"status": status, "body_stored": False, "reason": reason}))


def replay(stored: StoredResult | None) -> Response | tuple[dict[str, Any], int, dict[str, str]]:
    """What a repeat of a completed request is answered: the stored answer, or a JSON body that
    says the answer was not stored, with the original status when it is known."""
    value = stored.value if stored is not None else None
    record = value if isinstance(value, dict) else {}
    if record.get("body_encoding") in ("utf-8", "base64"):
        text = str(record["body"])
        body = text.encode("utf-8") if record["body_encoding"] == "utf-8" else base64.b64decode(text)
        headers = [(str(name), str(header)) for name, header in record.get("headers", [])]
        return HttpAnswer(str(record["status"]), headers, body).response(replayed=True)
    reason = record.get("reason") or (stored.dropped if stored is not None else None) or "not stored"
    status = _code(record.get("status"))
    answer = {"outcome": "duplicate", "body_stored": False, "reason": reason, "status": status}
    return answer, status, {REPLAYED_HEADER: "true"}


def _code(status: object) -> int:
    """The number of a stored status line; 200 when none was stored (the store refused even that)."""
    try:
        return int(str(status).split(" ", 1)[0])
    except ValueError:
        return 200
