"""``/`` on a table screen (Alerts, Compare): a box at the bottom whose text narrows the rows as it is
typed (:func:`..figures.filters.compile_row_filter`: ``column:value`` terms and bare words); Enter keeps
it and goes back to the table, Esc clears it (a second Esc leaves the screen)."""
from __future__ import annotations

from typing import Callable, Sequence

from textual.widgets import DataTable, Input

from ..figures.filters import compile_row_filter


class TableFilter:
    """The filter of one screen's table: mixed into a Screen that yields :meth:`filter_box` and calls
    :meth:`refilter` (its own method that redraws the rows) when the text changes."""

    filter_text: str = ""
    TABLE_ID = ""  # the DataTable's id

    @staticmethod
    def filter_box(placeholder: str) -> Input:
        return Input(placeholder=placeholder + " (Enter keeps, Esc clears)", id="table-filter")

    def row_filter(self, columns: Sequence[str]) -> Callable[[Sequence[str]], bool]:
        return compile_row_filter(self.filter_text, columns)

    def refilter(self) -> None:  # pragma: no cover - each screen's own
        raise NotImplementedError

    def action_filter(self) -> None:
        box = self.query_one("#table-filter", Input)  # type: ignore[attr-defined]
        box.add_class("visible")
        box.focus()

    def clear_filter(self) -> bool:
        """Esc: clears a filter (or closes its empty box) and says True; False when there was none."""
        box = self.query_one("#table-filter", Input)  # type: ignore[attr-defined]
        if not box.has_class("visible") and not self.filter_text:
            return False
        box.value = ""
        box.remove_class("visible")
        if self.filter_text:
            self.filter_text = ""
            self.refilter()
        self.query_one(f"#{self.TABLE_ID}", DataTable).focus()  # type: ignore[attr-defined]
        return True

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "table-filter":
            event.stop()
            self.filter_text = event.value
            self.refilter()

    def filter_submitted(self, event: Input.Submitted) -> bool:
        if event.input.id != "table-filter":
            return False
        event.stop()
        if not event.value.strip():
            event.input.remove_class("visible")
        self.query_one(f"#{self.TABLE_ID}", DataTable).focus()  # type: ignore[attr-defined]
        return True
