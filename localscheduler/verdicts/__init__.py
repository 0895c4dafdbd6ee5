"""The verdicts, read from the store and the logs, never from what the harness expected: a
scheduled job's runs (`scheduled`) and an event job's messages (`events`), from the job bodies the
runonce core logs (`bodies`) and the effects a function folder declares (`effects`); the tables
they print (`table`)."""
