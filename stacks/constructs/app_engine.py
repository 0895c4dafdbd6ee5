"""The team's existing App Engine application, as its App Engine jobs need it: checked before they
are created, and the accounts its services run as granted the ledger (docs/stacks/services.md).

The stack never creates `google_app_engine_application` (one per project, its region fixed for
good). The provider has no data source for the application; App Engine creates its default
service account (`PROJECT@appspot.gserviceaccount.com`) with the application, so the check lists
the project's accounts whose email is that one (`google_service_accounts`): an empty list stops the
plan, or the first apply, with the fix. `google_app_engine_default_service_account` would not: in
provider 6.50 its read fails on a missing account with the provider's own error, never our message.
"""

from __future__ import annotations

from constructs import Construct

from stacks.config import defaults
from stacks.config.team import Team
from stacks.constructs import provider
from stacks.constructs.dedup_store import DedupStore
from stacks.constructs.function_identity import grant_ledger
from stacks.constructs.required_apis import RequiredApis
from stacks.toolchain import ITerraformDependable, Postcondition, TerraformResourceLifecycle

DEFAULT_ACCOUNT = ""
"""`AppEngineJob.service_account` for App Engine's default account."""


def default_account_email(project: str) -> str:
    """App Engine's default service account in `project` (IAM, "Service account types")."""
    return f"{project}@appspot.gserviceaccount.com"


class AppEngineAccess:
    """The application check and one ledger grant per account the team's App Engine jobs name,
    in `scope` with ids starting with `app-engine`."""

    def __init__(self, scope: Construct, team: Team, store: DedupStore, apis: RequiredApis) -> None:
        email = default_account_email(team.project)
        self.default_account = provider.DataGoogleServiceAccounts(
            scope,
            "app-engine-default-account",
            project=team.project,
            # RE2, matched against each account's email: this one only (a project id holds letters,
            # digits and hyphens; the domain's dots are escaped).
            regex="^" + email.replace(".", "\\.") + "$",
            # The IAM API may be enabled by this very apply: then the list is read during apply,
            # and every App Engine job waits for it (`checks`).
            depends_on=apis.of(defaults.API_IAM),
            lifecycle=TerraformResourceLifecycle(
                postcondition=[
                    Postcondition(
                        condition="${length(self.accounts) > 0}",
                        error_message=f"Project {team.project} has no App Engine default service account "
                        f"({email}): it has no App Engine application, or that account was deleted, and "
                        "the stack never creates either. Create the application (gcloud app create "
                        "--region=REGION) and deploy the handlers, or remove the team's app_engine_jobs.",
                    )
                ]
            ),
        )
        """The `google_service_accounts` data source listing App Engine's default account: the
        check that the application exists, and the default account's member."""
        self.checks: list[ITerraformDependable] = [self.default_account]
        """What every App Engine Scheduler job waits for, whichever account its service runs as."""
        self.accounts = {
            account: provider.DataGoogleServiceAccount(
                scope, f"app-engine-{_local_part(account)}-account", account_id=account, project=team.project
            )
            for account in sorted({job.service_account for job in team.app_engine_jobs} - {DEFAULT_ACCOUNT})
        }
        """The `google_service_account` data source of each user-managed account the jobs name: the
        plan stops if one does not exist, and its grant names the account by reference."""
        members = {_local_part(account): data.member for account, data in self.accounts.items()}
        if any(job.service_account == DEFAULT_ACCOUNT for job in team.app_engine_jobs):
            members["default"] = self.default_account.accounts.get(0).member
        self.ledger_grants = [
            grant_ledger(scope, f"app-engine-{name}-ledger", team.project, members[name], store)
            for name in sorted(members)
        ]
        """roles/datastore.user on the ledger database only, for each account the App Engine
        services run as (the default one, or each `AppEngineJob.service_account`)."""


def _local_part(email: str) -> str:
    return email.split("@")[0]
