"""How report.html carries its interactive figures: plotly.js inside the page, gzipped, so the one file works
copied anywhere or mailed alone, with no network (clusters are often offline) and no file beside it.

Why gzipped and not plain: plotly.min.js is 4.8 MB; gzipped and base64-encoded it is 1.96 MB, and the browser
unpacks it with its own ``DecompressionStream`` (Chrome/Edge 80+, Firefox 113+, Safari 16.4+) in well under a
second. The trade-off, written down: one self-contained file of about 2 MB plus the figures' data, against 4.8 MB
for plotly inlined as is, or a 4.8 MB file beside the page that a copied or mailed report.html loses (every figure
blank, as before issue 41). A browser without ``DecompressionStream`` shows a note at the top of the page saying the
PNGs beside the report draw the same figures.

Each figure is a placeholder ``<div>`` and its JSON (``<script type='application/json'>``, inert); the loader at the
end of the page unpacks plotly.js, runs it, then draws every figure, so no figure's script runs before plotly
exists (that was the "Plotly is not defined" error of a report without its plotly file).
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import pkgutil
from typing import Any

NOTE_ID = "noplotly"
FIGURE_CLASS = "plotly-figure"

_LOADER = """<script id='plotly-gz' type='application/octet-stream'>{payload}</script>
<script>
(async () => {{
  try {{
    if (typeof DecompressionStream === 'undefined') throw new Error('this browser cannot unpack gzip');
    const bytes = Uint8Array.from(atob(document.getElementById('plotly-gz').textContent), c => c.charCodeAt(0));
    const unpacked = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    const code = document.createElement('script');
    code.textContent = await new Response(unpacked).text();
    document.head.appendChild(code);
    for (const el of document.querySelectorAll('script.{figure_class}')) {{
      const fig = JSON.parse(el.textContent);
      Plotly.newPlot(el.dataset.div, fig.data, fig.layout, {{responsive: true}});
    }}
  }} catch (e) {{
    const note = document.getElementById('{note_id}');
    note.querySelector('.why').textContent = String(e && e.message || e);
    note.style.display = 'block';
  }}
}})();
</script>"""


def note_html() -> str:
    """The note shown at the top of the page when the figures cannot be drawn (hidden otherwise)."""
    return (
        f"<p id='{NOTE_ID}' style='display:none'>The interactive figures could not be drawn here (<span class='why'>"
        "</span>); the PNG files in this report's folder show the same figures. They need a browser from 2023 on "
        "(Chrome/Edge 80+, Firefox 113+, Safari 16.4+).</p>"
    )


def figure_html(fig: Any, div_id: str) -> str:
    """A plotly figure as a placeholder and its JSON; :func:`loader_html` draws it."""
    data = fig.to_json().replace("</", "<\\/")  # "</script>" inside a string would end the tag; "\/" is JSON for "/"
    div = html.escape(div_id)
    return (
        f"<div id='{div}' class='plotly-graph-div'></div>"
        f"<script type='application/json' class='{FIGURE_CLASS}' data-div='{div}'>{data}</script>"
    )


def loader_html() -> str:
    """The end of the page: plotly.js gzipped and base64-encoded, and the script that unpacks it and draws."""
    return _LOADER.format(payload=packed_plotly(), figure_class=FIGURE_CLASS, note_id=NOTE_ID)


@functools.cache
def packed_plotly() -> str:
    """plotly.min.js of the installed plotly, gzipped (level 9) and base64-encoded (once per process: it is not free,
    docs/performance.md)."""
    js = pkgutil.get_data("plotly", "package_data/plotly.min.js")
    if js is None:  # pragma: no cover - plotly always ships it
        raise FileNotFoundError("plotly/package_data/plotly.min.js")
    return base64.b64encode(gzip.compress(js, compresslevel=9, mtime=0)).decode("ascii")
