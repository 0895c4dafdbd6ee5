"""Start and stop a real Firestore emulator on a free loopback port.

Used by the tests, the benchmark and the demo, so every one of them runs against the same
emulator the same way (see `emulator.process` for the process handling).
"""

from __future__ import annotations

from dataclasses import dataclass

from emulator.process import EmulatorProcess, EmulatorUnavailable, free_port

READY_LINE = "Dev App Server is now running"

__all__ = ["READY_LINE", "EmulatorUnavailable", "FirestoreEmulator", "free_port"]


@dataclass
class FirestoreEmulator(EmulatorProcess):
    """A running Firestore emulator; `host` is the value for FIRESTORE_EMULATOR_HOST."""

    name = "Firestore emulator"
    gcloud_args = ("emulators", "firestore", "start")
    ready_line = READY_LINE
    install_hint = (
        "the Google Cloud CLI with its Firestore emulator and a Java runtime (apt-get install "
        "google-cloud-cli google-cloud-cli-firestore-emulator openjdk-17-jre-headless)"
    )
