"""The constructs a team stack is built from, each making one part of it: the enabled APIs
(`required_apis`), the ledger (`dedup_store`), the build storage (`build_storage`), the team's
build and invoker accounts (`team_identity`, with `build_grants`), a function's runtime account
(`function_identity`), the function itself (`deduplicated_function`, from an `archive`), its
Scheduler job (`scheduled_job`), an event job's delivery (`event_job`, with the Eventarc and
Pub/Sub agents of `service_agents`), a proxy's target grants (`target_access`) and a migration's
retiring accounts (`legacy_accounts`).
`provider` holds every google provider class they use; `identity` the account helpers.
`stacks.team_stack.TeamStack` wires them together."""
