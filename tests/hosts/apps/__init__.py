"""Small apps served by real servers in tests/hosts/test_servers.py: one per host, each running
`job.body` under `@deduplicated` at POST /jobs/close."""
