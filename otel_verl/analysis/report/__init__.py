"""The report room: what a reader sees of an analysis, in the terminal and in report.html.

- :mod:`.presenting`: the words and numbers both share (seconds, counts, the cause a headline points at);
- :mod:`.step_rows`: the steps table's rows (each step's own severity and top cause);
- :mod:`.plotly_embed`: plotly.js packed into the page, so report.html travels alone;
- :mod:`.page`: report.html itself (:func:`.page.write_html`).
"""
