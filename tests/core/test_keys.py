"""Run keys: one per scheduled run, the same for every way of writing it, never shared."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runonce._instant import Instant, parse_instant
from runonce.scheduler.delivery import Delivery
from runonce.scheduler.keys import run_key

pytestmark = pytest.mark.fast  # no store: the decision logic alone

instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2099, 12, 31), timezones=st.just(UTC)
).map(lambda moment: moment.replace(microsecond=0))
offsets = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(
    lambda minutes: timedelta(minutes=minutes)
)
names = st.text(min_size=1, max_size=40)


def _write(moment: datetime, offset: timedelta, nanos: int) -> str:
    local = moment.astimezone(timezone(offset))
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    fraction = f".{nanos:09d}" if nanos else ""
    return f"{local:%Y-%m-%dT%H:%M:%S}{fraction}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _delivery(instant: Instant, job: str = "job", project: str = "p", location: str = "l", forced=False):
    return Delivery(job=job, schedule_time=instant, project=project, location=location, forced=forced)


@given(instants, offsets, offsets, st.integers(min_value=0, max_value=999_999_999))
def test_any_offset_spelling_of_one_instant_gives_one_key(moment, first, second, nanos):
    one = parse_instant(_write(moment, first, nanos))
    two = parse_instant(_write(moment, second, nanos))
    assert run_key(_delivery(one)) == run_key(_delivery(two))


@given(instants, instants)
def test_different_instants_give_different_keys(first, second):
    one, two = Instant(first, 0), Instant(second, 0)
    assert (run_key(_delivery(one)) == run_key(_delivery(two))) == (first == second)


@given(names, names, names, names, names, names)
def test_fields_cannot_be_shifted_into_each_other(job1, project1, location1, job2, project2, location2):
    instant = Instant(datetime(2026, 1, 1, tzinfo=UTC), 0)
    one = run_key(_delivery(instant, job1, project1, location1))
    two = run_key(_delivery(instant, job2, project2, location2))
    assert (one == two) == ((job1, project1, location1) == (job2, project2, location2))


@given(instants)
def test_a_forced_run_never_shares_the_key_of_the_scheduled_run(moment):
    instant = Instant(moment, 0)
    assert run_key(_delivery(instant, forced=True)) != run_key(_delivery(instant, forced=False))


@given(instants)
def test_keys_are_sha256_hex_digests(moment):
    key = run_key(_delivery(Instant(moment, 0)))
    assert len(key) == 64 and int(key, 16) >= 0
