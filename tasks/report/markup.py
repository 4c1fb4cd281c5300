"""The data report's HTML primitives: escaping and number formatting, tables, badges, figures, notes,
the page's inline CSS and its Content-Security-Policy. They know nothing of artifacts."""

from __future__ import annotations

import html
from typing import Any

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def table(header: list[str], rows: list[list[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(c if isinstance(c, Raw) else f"<td>{esc(fmt(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def kv_table(rows: list[list[Any]]) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th>" + (v if isinstance(v, Raw) else f"<td>{esc(fmt(v))}</td>") + "</tr>"
                   for k, v in rows)
    return f'<table class="kv"><tbody>{body}</tbody></table>'


class Raw(str):
    """A table cell that is already HTML."""


def badge(ok: bool, yes: str = "passed", no: str = "failed") -> Raw:
    return Raw(f'<td><span class="badge {"ok" if ok else "bad"}">{esc(yes if ok else no)}</span></td>')


def figure(plot_id: str, feature: str | None, body: str, caption: str) -> str:
    data = f' data-feature="{esc(feature)}"' if feature is not None else ""
    return (f'<figure class="plot" id="{esc(plot_id)}"{data}>{body}'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


STYLE = """
body{font-family:"DejaVu Sans",system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;margin:0;color:#1f2328;
background:#f6f8fa;font-size:14px;line-height:1.45}
main{max-width:1040px;margin:0 auto;padding:16px 24px 48px}
header{background:#24292f;color:#fff;padding:16px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c9d1d9;font-size:13px}
section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 20px;margin:16px 0}
h2{font-size:17px;margin:4px 0 10px;border-bottom:1px solid #d8dee4;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}h3 .type{font-weight:normal;color:#57606a;font-size:13px;margin-left:6px}
article.feature{border-top:1px solid #eaeef2;padding-top:4px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}th,td{border:1px solid #d0d7de;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f6f8fa}tbody tr:nth-child(even){background:#fbfcfd}
table.kv th{width:170px;background:#f6f8fa;font-weight:600}table.kv{min-width:640px}td.num{text-align:right}
code,.mono{font-family:"DejaVu Sans Mono",ui-monospace,monospace;font-size:12px;word-break:break-all}
.badge{display:inline-block;padding:0 8px;border-radius:10px;font-size:12px;font-weight:bold}
.badge.ok{background:#dafbe1;color:#116329}.badge.bad{background:#ffebe9;color:#a40e26}
figure.plot{margin:8px 0 14px}figure.plot svg,figure.plot img{max-width:100%;height:auto;display:block}
figure.plot img.pixels{image-rendering:pixelated}
figcaption{color:#57606a;font-size:12px;margin-top:2px}
p.note{color:#57606a;font-style:italic;margin:4px 0}
nav ul{columns:3;margin:4px 0;padding-left:18px}nav a{color:#0969da;text-decoration:none}
details summary{cursor:pointer;color:#0969da}
"""



def plots_module():
    """tasks.report.plots, imported when a report draws (matplotlib, a heavy optional dependency, slow to
    import, which a flow process whose report is built on a Dask worker never pays)."""
    from tasks.report import plots as report_plots

    return report_plots

