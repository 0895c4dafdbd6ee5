"""`runonce release KEY`: end the lease of a claim whose attempt died, so the run's next delivery
(Scheduler's or Pub/Sub's retry) takes it over at once instead of waiting for the lease.

The record is kept, in progress, with its lease ended now and the release in `operator_actions`:
the next claim takes it over as it takes over any expired lease (attempt + 1). The change is
`Store.release_held`, one transaction fenced on the attempt the operator looked at: if another
attempt took the run over in between, or the run finished, nothing is written. A live lease is
refused unless `--force`; forced, the attempt still running loses its fence, so its finishing
write is refused and the run's next delivery runs the job again (the job may run twice).
"""

from __future__ import annotations

from dataclasses import dataclass

from operate.actions import entry, log_change
from operate.team import BadInput
from runonce.core.store import Refusal, Store

RELEASE = "release"


@dataclass(frozen=True)
class Released:
    """Whether the claim was released, and what to tell the operator."""

    done: bool
    message: str


def release(store: Store, key: str, by: str, force: bool) -> Released:
    """Release the claim on run `key` (see the module); BadInput if the run has no record."""
    record = store.read(key)
    if record is None:
        raise BadInput("KEY", f"no run {key!r} in this team's ledger; `runonce runs --team T` lists the keys")
    lease = record.get("lease_expires")
    action = entry(
        RELEASE,
        by,
        {
            "attempt_id": record.get("attempt_id"),
            "attempts": record.get("attempts"),
            "lease_expires": lease,
            "force": force,
        },
    )
    answer = store.release_held(key, str(record.get("attempt_id")), action, force)
    if answer is Refusal.LEASE_LIVE:
        return Released(
            False,
            f"the claim's lease runs until {lease}: its attempt may be alive. Wait for the lease, or pass "
            "--force (the attempt's own finishing write is then refused, and the job may run twice)",
        )
    if answer is Refusal.NOT_IN_PROGRESS:
        return Released(False, f"the run is {record.get('status')}: there is no claim to release")
    if answer is Refusal.TAKEN_OVER:
        return Released(
            False,
            "another attempt took the run over since it was read: nothing changed; look again (runonce show)",
        )
    if answer is Refusal.NO_RECORD:
        return Released(False, "the record was deleted since it was read: nothing to release")
    log_change(f"released the claim on run {key}", action, run_key=key)
    return Released(True, "released: the run's next delivery takes it over at once")
