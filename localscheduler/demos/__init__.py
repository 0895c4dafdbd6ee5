"""The parts `make demo` plays, each usable alone by the tests: the scheduled jobs
(`simulation`), the event jobs on the Pub/Sub emulator (`events`, with the messages a folder
declares in `event_data`), the proxied Workflows job (`proxy`), and the watchdog on the demo's
ledger (`watch`)."""
