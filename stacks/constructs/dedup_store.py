"""The run ledger: a dedicated Firestore database with a TTL policy on its runs collection, and
the composite indexes the operators' `runonce runs` lists event jobs' runs with."""

from __future__ import annotations

from dataclasses import dataclass

from constructs import Construct

from runonce.contract import EXPIRE_AT_FIELD
from stacks.config import defaults
from stacks.constructs.provider import (
    FirestoreDatabase,
    FirestoreField,
    FirestoreFieldIndexConfig,
    FirestoreFieldTtlConfig,
    FirestoreIndex,
    FirestoreIndexFields,
    ProjectIamMemberCondition,
)
from stacks.constructs.required_apis import RequiredApis
from stacks.contract import CLAIMED_AT_FIELD

# The field runonce writes on every run record; the TTL policy deletes records after it.
EXPIRY_FIELD = EXPIRE_AT_FIELD


@dataclass(frozen=True)
class DedupStoreProps:
    """The ledger database of one team."""

    project: str
    """Project id."""
    database: str
    """Firestore database id; a dedicated database lets IAM be scoped to it alone."""
    location: str
    """Firestore location (a region such as europe-west1, or a multi-region such as eur3)."""
    collection: str
    """Collection of run records (RUNONCE_COLLECTION)."""
    apis: RequiredApis
    """The stack's enabled APIs; the database waits for Firestore's."""
    delete_protection: bool = True
    """Refuse to delete the database (and with it every run record). Default on."""
    point_in_time_recovery: bool = False
    """Keep 7 days of versions. Default off (costs storage)."""
    listed_by: tuple[str, ...] = ()
    """Record fields the operators' command lists event jobs' runs by, each from a claim time on
    (`event_source` for push jobs, `event_consumer` for Eventarc): one composite index
    (field, claimed_at) each."""


class DedupStore(Construct):
    """A Firestore native database plus the TTL policy that expires run records.

    `index_config {}` drops the single-field indexes on `expire_at`: nothing queries it, and a
    monotonically increasing indexed field would limit write throughput.
    """

    def __init__(self, scope: Construct, id: str, props: DedupStoreProps) -> None:
        super().__init__(scope, id)
        self.props = props
        """The props this store was built from."""
        firestore_api = props.apis.of(defaults.API_FIRESTORE)
        self.database = FirestoreDatabase(
            self,
            "database",
            project=props.project,
            name=props.database,
            location_id=props.location,
            type="FIRESTORE_NATIVE",
            delete_protection_state=(
                "DELETE_PROTECTION_ENABLED" if props.delete_protection else "DELETE_PROTECTION_DISABLED"
            ),
            deletion_policy="ABANDON" if props.delete_protection else "DELETE",
            point_in_time_recovery_enablement=(
                "POINT_IN_TIME_RECOVERY_ENABLED"
                if props.point_in_time_recovery
                else "POINT_IN_TIME_RECOVERY_DISABLED"
            ),
            depends_on=firestore_api,
        )
        """The `google_firestore_database`."""
        self.ttl_field = FirestoreField(
            self,
            "ttl",
            project=props.project,
            database=self.database.name,
            collection=props.collection,
            field=EXPIRY_FIELD,
            ttl_config=FirestoreFieldTtlConfig(),
            index_config=FirestoreFieldIndexConfig(),
            depends_on=firestore_api,
        )
        """The `google_firestore_field` holding the TTL policy on expire_at."""
        # An equality filter on one field with a range on another needs a composite index
        # (Firestore, "Index types": https://firebase.google.com/docs/firestore/query-data/index-overview);
        # fields and order as google_firestore_index takes them (provider 6.50 docs,
        # https://registry.terraform.io/providers/hashicorp/google/6.50.0/docs/resources/firestore_index).
        self.listing_indexes = [
            FirestoreIndex(
                self,
                f"listing-{field}",
                project=props.project,
                database=self.database.name,
                collection=props.collection,
                query_scope="COLLECTION",
                fields=[
                    FirestoreIndexFields(field_path=field, order="ASCENDING"),
                    FirestoreIndexFields(field_path=CLAIMED_AT_FIELD, order="ASCENDING"),
                ],
                depends_on=firestore_api,
            )
            for field in props.listed_by
        ]
        """The `google_firestore_index` of each listing field."""

    @property
    def resource_name(self) -> str:
        """The database's IAM resource name, as an IAM condition compares it."""
        return f"projects/{self.props.project}/databases/{self.props.database}"

    def only_this(self, title: str, description: str = "") -> ProjectIamMemberCondition:
        """An IAM condition that holds for this database alone: Firestore's IAM stops at the
        database, so a project-level Datastore role is narrowed to one database this way."""
        return ProjectIamMemberCondition(
            title=title,
            description=description or f"Only the {self.props.database} Firestore database",
            expression=f'resource.name == "{self.resource_name}"',
        )
