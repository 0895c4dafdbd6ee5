"""The team's dashboard as the Monitoring Dashboards API's JSON: charts in a two-column mosaic, each
chart one or more data sets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stacks.constructs.monitoring.filters import ALIGNMENT

Chart = tuple[str, list[dict[str, Any]]]
"""A chart's title and its data sets (`series`)."""


def series(
    filter_: str,
    group_by: list[str],
    aligner: str = "ALIGN_SUM",
    reducer: str = "REDUCE_SUM",
    plot: str = "STACKED_BAR",
    legend: str = "",
) -> dict[str, Any]:
    """One data set of an XY chart: the filter's time series, summed per minute, grouped; named
    `legend` in the chart's legend when given."""
    return {
        **({"legendTemplate": legend} if legend else {}),
        "plotType": plot,
        "timeSeriesQuery": {
            "timeSeriesFilter": {
                "filter": filter_,
                "aggregation": {
                    "alignmentPeriod": ALIGNMENT,
                    "perSeriesAligner": aligner,
                    "crossSeriesReducer": reducer,
                    "groupByFields": group_by,
                },
            }
        },
    }


def document(team: str, charts: Sequence[Chart]) -> dict[str, Any]:
    """A `google.monitoring.dashboard.v1.Dashboard` titled `runonce TEAM` showing the charts in
    order, two per row."""
    width, height = 24, 16
    return {
        "displayName": f"runonce {team}",
        "mosaicLayout": {
            "columns": 2 * width,
            "tiles": [
                {
                    "xPos": (index % 2) * width,
                    "yPos": (index // 2) * height,
                    "width": width,
                    "height": height,
                    "widget": {"title": title, "xyChart": {"dataSets": datasets}},
                }
                for index, (title, datasets) in enumerate(charts)
            ],
        },
    }
