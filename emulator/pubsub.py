"""Start and stop a real Pub/Sub emulator on a free loopback port.

The same shape as `emulator.firestore`: `PubSubEmulator().start()` blocks until the emulator says
it is ready, `.host` is the value for PUBSUB_EMULATOR_HOST, `.stop()` ends it and the JVM gcloud
spawned; or use it as a context manager. Only `gcloud beta emulators pubsub start` works on
gcloud 528.
"""

from __future__ import annotations

from dataclasses import dataclass

from emulator.process import EmulatorProcess, EmulatorUnavailable

READY_LINE = "Server started, listening on"

__all__ = ["READY_LINE", "EmulatorUnavailable", "PubSubEmulator"]


@dataclass
class PubSubEmulator(EmulatorProcess):
    """A running Pub/Sub emulator; `host` is the value for PUBSUB_EMULATOR_HOST."""

    name = "Pub/Sub emulator"
    gcloud_args = ("beta", "emulators", "pubsub", "start")
    ready_line = READY_LINE
    install_hint = (
        "the Google Cloud CLI with its Pub/Sub emulator and a Java runtime (apt-get install "
        "google-cloud-cli google-cloud-cli-pubsub-emulator openjdk-17-jre-headless)"
    )
