"""`@deduplicated_event`, the event adapter: a Pub/Sub push request or a CloudEvent -> the core.

`parse` reads either shape into an `Event` and its run key, `deadletter` forwards an event that
will not run to the dead-letter topic, `adapter` is the decorator.
"""
