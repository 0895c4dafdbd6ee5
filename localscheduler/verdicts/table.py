"""The demo's tables as aligned text: the first column left-aligned, the counts right-aligned."""

from __future__ import annotations

from collections.abc import Sequence


def aligned(lines: Sequence[Sequence[str]], total: bool = False) -> str:
    """The header line and rows, with a rule under the header (and above the last row: `total`)."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    ]
    text.insert(1, "-" * len(text[0]))
    if total:
        text.insert(len(text) - 1, "-" * len(text[0]))
    return "\n".join(text)
