"""What the team's operators (`Team.operators`) may do: exactly what the `runonce` verbs need, on the
team's own resources (docs/operate.md, "IAM for operators").

Per operator:
- `roles/datastore.user` conditioned on the ledger's database: `runs`, `show` read records,
  `release`, `rerun` and `replay` write them. Firestore's IAM stops at the database: it cannot
  limit writes to some fields or to the verbs' own writes, so an operator can change any record
  of the ledger with any Firestore client; the verbs record every change they make on the
  record, a client used directly does not.
- `roles/pubsub.subscriber` on each event job's dead-letter subscription: `dead-letters` pulls
  the copies (without acknowledging them), `replay` acknowledges the one it replayed.
- `roles/pubsub.publisher` on each event job's topic (the stack's or the existing one it names;
  a Cloud Storage trigger has none): `replay` publishes the original back to it.
- `roles/cloudscheduler.jobRunner` on the project, for a team with scheduled jobs of any kind
  (function, service or App Engine jobs): `rerun` and
  `backfill` deliver through Scheduler's `jobs.run`, and Scheduler grants no narrower
  (`defaults.ROLE_JOB_RUNNER`); and `roles/cloudscheduler.viewer` there: `backfill` reads the
  Scheduler job (`jobs.get`, its `userUpdateTime`), which the job runner role does not hold.
- The project custom role `runonce_<team>_resumer` (`defaults.RESUMER_PERMISSIONS`:
  `cloudscheduler.jobs.get` and `cloudscheduler.jobs.enable`), only for a team whose watchdog may
  pause a job (`pause_after_failures`): `resume` calls `jobs.resume`, which needs `jobs.enable`,
  held by no predefined role narrower than roles/cloudscheduler.admin. One role, created once (as
  the watchdog's pauser role, `stacks.constructs.watchdog`), granted to each operator.
- `roles/datastore.viewer` conditioned on the watchdog's own database, only for a team whose
  watchdog may pause a job and keeps its records in Firestore: `runs` and `show` read the
  watchdog's record of a pause there (who paused the job, since when, after which runs). Read
  only: the watchdog alone writes its records. On Valkey its records are on the team's instance,
  which the connection role already reaches (`stacks.constructs.valkey_store`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from constructs import Construct

from stacks.config import defaults
from stacks.constructs.dedup_store import DedupStore
from stacks.constructs.identity import custom_role
from stacks.constructs.provider import (
    ProjectIamCustomRole,
    ProjectIamMember,
    PubsubSubscriptionIamMember,
    PubsubTopicIamMember,
)
from stacks.constructs.required_apis import RequiredApis
from stacks.toolchain import TerraformResource

_NOT_IN_ID = re.compile(r"[^A-Za-z0-9-]+")


@dataclass(frozen=True)
class EventJobAccess:
    """One event job's resources an operator acts on."""

    job: str
    dead_letters: str
    """The dead-letter subscription's id (a reference)."""
    topic: str
    """The topic's id (a reference or `projects/P/topics/T`); "" for a Cloud Storage trigger."""


@dataclass(frozen=True)
class OperatorAccessProps:
    """The team's operators and the resources they operate."""

    project: str
    team: str
    """The team's name (names the resumer role)."""
    members: tuple[str, ...]
    """The operators, as IAM principals (validated: `stacks.validate.operators`)."""
    ledger: DedupStore
    event_jobs: tuple[EventJobAccess, ...]
    scheduled: bool
    """Whether the team has scheduled jobs of any kind (`Team.scheduled`: what `rerun` and
    `backfill` run, on functions, services or App Engine)."""
    apis: RequiredApis
    resumes: bool = False
    """Whether the team's watchdog may pause a Scheduler job (`WatchdogProps.pauses`): only then do
    the operators get the resumer role, for `runonce resume`."""
    watchdog_records: DedupStore | None = None
    """The watchdog's own database when its records are in Firestore (a Firestore team with the
    watchdog on), else None: where the team `resumes`, the operators read it, for the pause
    records `runs` and `show` print."""


def member_id(member: str) -> str:
    """A construct id part for a principal that stays the same when the list is reordered."""
    return _NOT_IN_ID.sub("-", member).strip("-")


class OperatorAccess(Construct):
    """Every grant of every operator; `grants` lists them."""

    def __init__(self, scope: Construct, id: str, props: OperatorAccessProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.resumer = self._resumer_role() if props.resumes else None
        """The custom role holding exactly `defaults.RESUMER_PERMISSIONS`; None for a team whose
        watchdog pauses no job."""
        self.grants: list[TerraformResource] = []
        """Every operator grant, in member order."""
        for principal in props.members:
            self.grants.extend(self._grants(principal))

    def _grants(self, principal: str) -> Sequence[TerraformResource]:
        props, who = self.props, member_id(principal)
        grants: list[TerraformResource] = [
            ProjectIamMember(
                self,
                f"{who}-ledger",
                project=props.project,
                role=defaults.ROLE_LEDGER,
                member=principal,
                condition=props.ledger.only_this("runonce-operator-ledger"),
                depends_on=props.apis.of(defaults.API_FIRESTORE),
            )
        ]
        if props.resumes and props.watchdog_records is not None:
            grants.append(self._pause_records_grant(who, principal, props.watchdog_records))
        # Scheduler's roles are project-level only: `rerun` and `backfill` run the job, `backfill`
        # reads it too.
        scheduler_roles = {
            "job-runner": defaults.ROLE_JOB_RUNNER,
            "scheduler-viewer": defaults.ROLE_SCHEDULER_VIEWER,
        }
        grants += [
            ProjectIamMember(
                self,
                f"{who}-{suffix}",
                project=props.project,
                role=role,
                member=principal,
                depends_on=props.apis.of(defaults.API_SCHEDULER),
            )
            for suffix, role in (scheduler_roles.items() if props.scheduled else ())
        ]
        if self.resumer is not None:
            grants.append(
                ProjectIamMember(
                    self,
                    f"{who}-job-resumer",
                    project=props.project,
                    role=self.resumer.name,
                    member=principal,
                )
            )
        for job in props.event_jobs:
            grants.append(
                PubsubSubscriptionIamMember(
                    self,
                    f"{who}-{job.job}-dead-letters",
                    project=props.project,
                    subscription=job.dead_letters,
                    role=defaults.ROLE_SUBSCRIBER,
                    member=principal,
                    depends_on=props.apis.of(defaults.API_PUBSUB),
                )
            )
            if job.topic:
                grants.append(
                    PubsubTopicIamMember(
                        self,
                        f"{who}-{job.job}-topic",
                        project=props.project,
                        topic=job.topic,
                        role=defaults.ROLE_PUBLISHER,
                        member=principal,
                        depends_on=props.apis.of(defaults.API_PUBSUB),
                    )
                )
        return grants

    def _pause_records_grant(self, who: str, principal: str, records: DedupStore) -> ProjectIamMember:
        """Read only, on the watchdog's database alone: Firestore's IAM is per database, and the
        operators' ledger grant names the ledger's."""
        props = self.props
        return ProjectIamMember(
            self,
            f"{who}-watchdog-records",
            project=props.project,
            role=defaults.ROLE_LEDGER_READER,
            member=principal,
            condition=records.only_this(
                "runonce-operator-pause-records",
                f"Read only the {records.props.database} Firestore database (the watchdog's pause records)",
            ),
            depends_on=props.apis.of(defaults.API_FIRESTORE),
        )

    def _resumer_role(self) -> ProjectIamCustomRole:
        """The custom role `runonce_<team>_resumer`, named as the watchdog's pauser role is."""
        props = self.props
        return custom_role(
            self,
            "resumer-role",
            props.project,
            props.team,
            "resumer",
            defaults.RESUMER_PERMISSIONS,
            f"runonce {props.team} operators: resume Scheduler jobs",
            "Read and resume Cloud Scheduler jobs (runonce resume)",
            props.apis,
        )
