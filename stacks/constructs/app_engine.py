"""The team's existing App Engine application, as its App Engine jobs need it: checked at plan time,
and the accounts its services run as granted the ledger (docs/stacks/services.md).

The stack never creates `google_app_engine_application` (one per project, its region fixed for
good). The provider has no data source for the application; App Engine creates its default
service account (`PROJECT@appspot.gserviceaccount.com`) with the application, and the
`google_app_engine_default_service_account` data source reads it, leaving `email` empty when there
is none (the provider's HandleNotFoundError), so a postcondition on it stops the plan with the fix.
"""

from __future__ import annotations

from cdktf import Postcondition, TerraformResourceLifecycle
from constructs import Construct

from stacks.config import defaults
from stacks.config.team import Team
from stacks.constructs import provider
from stacks.constructs.dedup_store import DedupStore
from stacks.constructs.function_identity import grant_ledger
from stacks.constructs.required_apis import RequiredApis

DEFAULT_ACCOUNT = ""
"""`AppEngineJob.service_account` for App Engine's default account."""


class AppEngineAccess:
    """The application check and one ledger grant per account the team's App Engine jobs name,
    in `scope` with ids starting with `app-engine`."""

    def __init__(self, scope: Construct, team: Team, store: DedupStore, apis: RequiredApis) -> None:
        self.default_account = provider.DataGoogleAppEngineDefaultServiceAccount(
            scope,
            "app-engine-default-account",
            project=team.project,
            depends_on=apis.of(defaults.API_IAM),
            lifecycle=TerraformResourceLifecycle(
                postcondition=[
                    Postcondition(
                        condition='${self.email != ""}',
                        error_message=f"Project {team.project} has no App Engine default service "
                        "account, so it has no App Engine application (or its default account was "
                        "deleted): the stack never creates one. Create the application "
                        "(gcloud app create --region=...) and deploy the handlers, or remove the "
                        "team's app_engine_jobs.",
                    )
                ]
            ),
        )
        """The `google_app_engine_default_service_account` data source: the plan-time check that
        the application exists, and the default account's member."""
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
            members["default"] = self.default_account.member
        self.ledger_grants = [
            grant_ledger(scope, f"app-engine-{name}-ledger", team.project, members[name], store)
            for name in sorted(members)
        ]
        """roles/datastore.user on the ledger database only, for each account the App Engine
        services run as (the default one, or each `AppEngineJob.service_account`)."""


def _local_part(email: str) -> str:
    return email.split("@")[0]
