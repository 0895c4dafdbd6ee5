"""What the demo publishes to an event job, as its function folder declares it.

Only the job knows what a message it can take looks like, so its folder says so in the `[events]`
table of its `local_demo.toml` (see `folder_file`):

    [events]
    # The data of every message the demo publishes; {n} becomes the message's number.
    data = '{"order_id": "{n}", "amount": 12}'

A folder without the table gets `{"n": <number>}`. The faults the demo injects into such a job
need nothing from it (see `events_demo.GENERIC_FAULTS`), so the data only has to be a message
the job completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from localscheduler.folder_file import check_fields, read_section, text_field

SECTION = "events"
_FIELDS = ("data",)
NUMBER = "{n}"
DEFAULT_DATA = '{"n": {n}}'


@dataclass(frozen=True)
class EventData:
    """The data of the messages published to one event job."""

    template: str
    """The data, with every `{n}` standing for the message's number."""

    def message(self, number: int) -> bytes:
        """The data of message `number`."""
        return self.template.replace(NUMBER, str(number)).encode()


def declared_event_data(source_dir: Path) -> EventData:
    """The data the folder's local_demo.toml declares; `{"n": <number>}` if it declares none."""
    found = read_section(source_dir, SECTION)
    if found is None:
        return EventData(DEFAULT_DATA)
    table, path = found
    check_fields(table, _FIELDS, path, SECTION)
    return EventData(text_field(table, "data", path, SECTION, "order {n}", required=True) or DEFAULT_DATA)
