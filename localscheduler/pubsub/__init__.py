"""Pub/Sub, locally, on the real emulator: the topics, push subscriptions and dead letters of an
event job (`topology`), and the network between the emulator and the instances, with its faults
(`push_proxy`)."""
