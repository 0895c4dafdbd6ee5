"""Where a team can deploy: the regions and Firestore locations, pinned from Google's pages.

Pinned in code, not fetched, so synth stays offline and a typo (`europe-west-1`, `us-centrall`)
fails at synth instead of half-way through an apply. Google adds regions from time to time: a
region missing here is reported with the page to check, and adding it is a one-line change.
Read on 2026-11-30 from stored copies of these pages:

- Cloud Run functions run on Cloud Run, so a gen2 function's regions are Cloud Run's:
  "Cloud Run locations", https://cloud.google.com/run/docs/locations (Tier 1 and Tier 2 lists).
  (https://cloud.google.com/functions/docs/locations redirects there for current functions;
  the 1st gen list, https://cloud.google.com/functions/1stgendocs/locations, is shorter.)
- Cloud Scheduler: "Cloud Scheduler locations", https://cloud.google.com/scheduler/docs/locations
  (only its Americas table could be read in the stored copy), the regions its release notes
  (https://cloud.google.com/scheduler/docs/release-notes) announced: europe-west4, me-central1,
  me-central2, me-west1 (2026-04-17), asia-southeast3 (2026-09-18), asia-south2, europe-west12,
  northamerica-northeast2 (2026-09-24), and for the rest the regions of Cloud Tasks' table
  (https://cloud.google.com/tasks/docs/locations), which Scheduler's have long matched. This is
  the least certain list: a region Google lists for Scheduler but missing here is rejected with
  a fix that says to add it.
- App Engine: "App Engine locations", https://cloud.google.com/appengine/docs/standard/locations:
  an application's region is fixed when it is created, and "two locations, which are called
  `europe-west` and `us-central` in App Engine commands and in the Google Cloud console, are
  called `europe-west1` and `us-central1`, respectively, elsewhere". A Scheduler job targeting
  App Engine "can only be created in the project's App Engine region" (Scheduler overview,
  "Supported regions by target", https://cloud.google.com/scheduler/docs/overview), so an
  application's region that Scheduler offers is the only one an App Engine job can use.
- Firestore: "Firestore locations", https://cloud.google.com/firestore/native/docs/locations
  (multi-regions eur3, nam5, nam7), and the regional locations the Firestore API lists under
  `projects.locations` (https://cloud.google.com/firestore/docs/reference/rest/v1/projects.locations/get).
- Memorystore for Valkey: "Memorystore for Valkey locations",
  https://cloud.google.com/memorystore/docs/valkey/locations (`VALKEY_REGIONS`).
"""

from __future__ import annotations

FUNCTION_REGIONS = frozenset(
    {
        # Tier 1
        "asia-east1",
        "asia-northeast1",
        "asia-northeast2",
        "europe-north1",
        "europe-southwest1",
        "europe-west1",
        "europe-west4",
        "europe-west8",
        "europe-west9",
        "me-west1",
        "us-central1",
        "us-east1",
        "us-east4",
        "us-east5",
        "us-south1",
        "us-west1",
        # Tier 2
        "africa-south1",
        "asia-east2",
        "asia-northeast3",
        "asia-southeast1",
        "asia-southeast2",
        "asia-south1",
        "asia-south2",
        "australia-southeast1",
        "australia-southeast2",
        "europe-central2",
        "europe-west10",
        "europe-west12",
        "europe-west2",
        "europe-west3",
        "europe-west6",
        "me-central1",
        "me-central2",
        "northamerica-northeast1",
        "northamerica-northeast2",
        "southamerica-east1",
        "southamerica-west1",
        "us-west2",
        "us-west3",
        "us-west4",
    }
)
"""Regions where a gen2 (Cloud Run) function can be deployed."""

SCHEDULER_REGIONS = frozenset(
    {
        "asia-east1",
        "asia-east2",
        "asia-northeast1",
        "asia-northeast2",
        "asia-northeast3",
        "asia-south1",
        "asia-south2",
        "asia-southeast1",
        "asia-southeast2",
        "asia-southeast3",
        "australia-southeast1",
        "europe-central2",
        "europe-west1",
        "europe-west2",
        "europe-west3",
        "europe-west4",
        "europe-west6",
        "europe-west12",
        "me-central1",
        "me-central2",
        "me-west1",
        "northamerica-northeast1",
        "northamerica-northeast2",
        "southamerica-east1",
        "us-central1",
        "us-east1",
        "us-east4",
        "us-west1",
        "us-west2",
        "us-west3",
        "us-west4",
    }
)
"""Regions where Cloud Scheduler jobs can be created (the page's tables and release notes)."""

TEAM_REGIONS = FUNCTION_REGIONS & SCHEDULER_REGIONS
"""A team's functions and Scheduler jobs share one region, so it must offer both."""

APP_ENGINE_NAMES = {"europe-west": "europe-west1", "us-central": "us-central1"}
"""App Engine's own names (`gcloud app describe`'s locationId) of the two regions it names apart,
and the names Scheduler and the rest of Google Cloud give them; every other App Engine location is
named as its region is."""


def app_engine_scheduler_region(location_id: str) -> str:
    """The Scheduler region of an App Engine application in `location_id` (its locationId): where
    Scheduler jobs targeting the application must be created."""
    return APP_ENGINE_NAMES.get(location_id, location_id)


FIRESTORE_MULTI_REGIONS = frozenset({"eur3", "nam5", "nam7"})
"""Firestore's multi-region locations."""

FIRESTORE_LOCATIONS = FIRESTORE_MULTI_REGIONS | frozenset(
    {
        "africa-south1",
        "asia-east1",
        "asia-east2",
        "asia-northeast1",
        "asia-northeast2",
        "asia-northeast3",
        "asia-south1",
        "asia-south2",
        "asia-southeast1",
        "asia-southeast2",
        "asia-southeast3",
        "australia-southeast1",
        "australia-southeast2",
        "europe-central2",
        "europe-north1",
        "europe-north2",
        "europe-southwest1",
        "europe-west1",
        "europe-west10",
        "europe-west12",
        "europe-west15",
        "europe-west2",
        "europe-west3",
        "europe-west4",
        "europe-west6",
        "europe-west8",
        "europe-west9",
        "me-central1",
        "me-central2",
        "me-west1",
        "northamerica-northeast1",
        "northamerica-northeast2",
        "northamerica-south1",
        "southamerica-east1",
        "southamerica-west1",
        "us-central1",
        "us-east1",
        "us-east4",
        "us-east5",
        "us-south1",
        "us-west1",
        "us-west2",
        "us-west3",
        "us-west4",
    }
)
"""Every location a Firestore database can be created in."""

VALKEY_REGIONS = frozenset(
    {
        "africa-south1",
        "asia-east1",
        "asia-east2",
        "asia-northeast1",
        "asia-northeast2",
        "asia-northeast3",
        "asia-south1",
        "asia-south2",
        "asia-southeast1",
        "asia-southeast2",
        "australia-southeast1",
        "australia-southeast2",
        "europe-central2",
        "europe-north1",
        "europe-southwest1",
        "europe-west1",
        "europe-west2",
        "europe-west3",
        "europe-west4",
        "europe-west6",
        "europe-west8",
        "europe-west9",
        "europe-west10",
        "europe-west12",
        "me-central1",
        "me-central2",
        "me-west1",
        "northamerica-northeast1",
        "northamerica-northeast2",
        "southamerica-east1",
        "southamerica-west1",
        "us-central1",
        "us-east1",
        "us-east4",
        "us-east5",
        "us-south1",
        "us-west1",
        "us-west2",
        "us-west3",
        "us-west4",
    }
)
"""The regions Memorystore for Valkey offers ("Memorystore for Valkey locations",
https://cloud.google.com/memorystore/docs/valkey/locations; docs/stacks/stores.md says how much
of it was read here). A region Google adds goes here."""

STORAGE_TRIGGER_MULTI_REGIONS = frozenset({"asia", "eu", "us", "asia1", "eur4", "nam4"})
"""The dual- and multi-regions a Cloud Storage Eventarc trigger can be in (its bucket's), besides
single regions: "Cloud Storage triggers support single-region, dual-region, and multi-region
locations", six of them ("A closer look at locations in Eventarc", Google Cloud blog, 2021; the
Eventarc locations page, https://cloud.google.com/eventarc/docs/locations, lists them)."""
STORAGE_TRIGGER_LOCATIONS = FUNCTION_REGIONS | STORAGE_TRIGGER_MULTI_REGIONS
"""Where a Cloud Storage trigger (so its bucket) can be: a region, or a dual- or multi-region."""

LOCATIONS_PAGES = (
    "https://cloud.google.com/run/docs/locations and https://cloud.google.com/scheduler/docs/locations"
)
"""Where to check a region missing here before adding it."""
