"""A widget whose size comes from the layout takes it without asking for another layout.

After a reflow Textual calls ``_size_updated`` on each widget whose size changed, and by default it
assigns ``virtual_size``, a ``layout=True`` reactive, so the widget asks for a layout again and the
screen reflows a second time, finding nothing to move. Measured on the agent workload (9 turns,
160×48, when the transcript was a widget per entry): 14 of 28 reflows moved nothing, one after every
real one. The panels are sized *by* the reflow that reports their size, so they take it quietly
(``layout=False``: stored without a refresh; dirty regions and scrollbars update as before), as
Textual's own ``ScrollView`` does (and the transcript is one). Content that grows still asks for its
layout (``Panel.flush``). ``_size_updated`` is a private Textual hook:
``tests/test_ui_app.py`` checks that no such echo comes back with another Textual.
"""

from __future__ import annotations

from textual.geometry import Size


class NoEchoLayout:
    def _size_updated(self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True) -> bool:
        return super()._size_updated(size, virtual_size, container_size, layout=False)  # type: ignore[misc]
