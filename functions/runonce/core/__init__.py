"""The core: one occurrence claimed, run and finished exactly once, whatever transport brought it.

The path of a request: an adapter reads an `Occurrence` (`occurrence`), `handler.run_once` claims
it from a `Store` (`store`), runs the job (`run`), records how it ended (`finish`) and answers
with an `Outcome` (`outcomes`). The core imports no Google library and no adapter: the Firestore
store (`runonce.store`), the Scheduler adapter (`runonce.scheduler`) and the event adapter
(`runonce.events`) import it, never the other way round (`make lint` checks it).
"""
