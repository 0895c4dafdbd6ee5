"""The rules, by family: `iam`, `network`, `pubsub`, `storage`, `deploy`.

Each rule is a function of one synthesized resource and its stack (`policy.synthesized`) that
answers a `Verdict`: COMPLIANT, NOT_APPLICABLE, or NON_COMPLIANT. A rule that needs only the
resource ignores the stack; one that looks across resources (a grant and the service it names,
a `depends_on` and the `time_sleep` it waits on) reads it. `policy.pack` gives each rule its id,
severity and explanation; rules over all stacks together are in `policy.stack_set`.
"""
