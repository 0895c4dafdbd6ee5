"""Small apps served by real servers in tests/hosts/test_servers.py: one per host, each running
`job.body` under `@deduplicated` at POST /jobs/close; and `previous_job`, the incremental job
tests/operate/test_previous_black_box.py serves with functions-framework instances."""
