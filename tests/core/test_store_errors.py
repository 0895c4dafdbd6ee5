"""Store errors reach the handler as runonce's own types and are answered as before the store
interface existed: a refused identity or a missing database is `misconfigured`, with the fix."""

from __future__ import annotations

import grpc

from emulator.wire import Fault

from .conftest import scheduler_headers


def test_a_store_that_refuses_the_claim_is_misconfigured_naming_the_database_and_the_role(client, probe, tap):
    tap.inject(Fault("Commit", code=grpc.StatusCode.PERMISSION_DENIED, times=100))
    response = client.post("/", headers=scheduler_headers())
    assert response.status_code == 500 and response.json["outcome"] == "misconfigured"
    error = response.json["error"]
    assert error.startswith("the run ledger cannot be used: the store rejected it (PermissionDenied")
    assert "(RUNONCE_DATABASE) exists" in error and "(roles/datastore.user)" in error
    assert probe.count == 0
