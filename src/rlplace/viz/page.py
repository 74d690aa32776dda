"""The HTML page of a plan: the SVG picture inline, then the same facts as tables to read and search.

Self-contained (no script, no external file), so it can be mailed, attached to a ticket or opened
from a cluster's shared disk.
"""

from __future__ import annotations

from html import escape

from rlplace.viz.scene import Entry, NodeView, Scene, counted

CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
.picture { overflow-x: auto; border: 1px solid #ddd; padding: 4px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f2f4f7; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; }
.warnings li { color: #8a5a00; }
.idle { color: #999; }
.node-lost, .node-failed { background: #fde7e7; color: #b71c1c; font-weight: bold; }
.node-spare, .node-replaced { background: #e3f4e5; color: #1b5e20; font-weight: bold; }
"""


def render_page(scene: Scene, svg_text: str) -> str:
    plan, s = scene.plan, scene.plan.settings
    settings = ", ".join(
        f"{k} <code>{escape(str(v).lower() if isinstance(v, bool) else str(v))}</code>"
        for k, v in (
            ("mode", s.mode),
            ("strategy", s.strategy),
            ("env_strategy", s.env_strategy),
            ("is_colocated", s.is_colocated),
            ("enable_offload", s.enable_offload),
            ("buffer shards", s.buffer_worker_num),
            ("placement groups", plan.uses_placement_groups),
        )
    )
    used = sum(n.used for n in scene.nodes)
    headline = f"rlplace plan: {counted(len(plan.workers), 'worker')} on {counted(used, 'node')}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{headline}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{headline}</h1>",
        f"<p>{settings}</p>",
        f'<div class="picture">{svg_text}</div>',
        _warnings(plan.warnings),
        _nodes_table(scene.nodes),
    ]
    if scene.unpinned:
        parts += [
            "<h2>Scheduled by Ray (not pinned)</h2>",
            "<ul>",
            *(_li(e, "scheduled by Ray") for e in scene.unpinned),
            "</ul>",
        ]
    if scene.driver:
        parts += [
            "<h2>In the driver process (remote: false, nothing reserved)</h2>",
            "<ul>",
            *(f"<li>{escape(e.label())}</li>" for e in scene.driver),
            "</ul>",
        ]
    parts += [_flows_table(scene), "</body></html>", ""]
    return "\n".join(parts)


def _warnings(warnings: tuple[str, ...]) -> str:
    if not warnings:
        return "<h2>Warnings</h2><p>none</p>"
    return '<h2>Warnings</h2><ul class="warnings">' + "".join(f"<li>{escape(w)}</li>" for w in warnings) + "</ul>"


def _entries(entries: tuple[Entry, ...], where: str) -> str:
    return "<br>".join(f'<span title="{escape(e.title(where))}">{escape(e.label())}</span>' for e in entries)


def _li(e: Entry, where: str) -> str:
    return f'<li title="{escape(e.title(where, unpinned=True))}">{escape(e.label(unpinned=True))}</li>'


def _nodes_table(nodes: tuple[NodeView, ...]) -> str:
    rows = [
        "<h2>Nodes</h2><table><thead><tr><th>node</th><th>GPUs</th><th>groups</th><th>GPU</th>"
        "<th>workers on the GPU</th><th>robots and CPU workers</th></tr></thead><tbody>"
    ]
    for n in nodes:
        gpus = f"{len(n.devices)}" + (f" x {escape(n.gpu_model)}" if n.gpu_model else "") if n.devices else "none"
        other = [
            f'<span title="{escape(h.detail)}">{escape(h.label)}</span>: {_entries(h.entries, f"node {n.rank}")}'
            for h in n.hardware
        ]
        if n.cpu:
            other.append(_entries(n.cpu, f"node {n.rank} · CPU only"))
        span = max(len(n.devices), 1)
        state = f'<br><span class="node-{n.state}">{escape(n.state.upper())}: {escape(n.note)}</span>'
        head = (
            f'<tr id="node-{n.rank}-row"><td rowspan="{span}">{n.rank}{state if n.state != "ok" else ""}</td>'
            f'<td rowspan="{span}">{gpus}</td>'
            f'<td rowspan="{span}">{escape(", ".join(n.groups)) or "-"}</td>'
        )
        tail = f'<td rowspan="{span}">{"<br>".join(other) or "-"}</td>'
        if not n.devices:
            rows.append(f"{head}<td>-</td><td>-</td>{tail}</tr>")
        for i, d in enumerate(n.devices):
            cell = _entries(d.entries, f"node {n.rank} GPU {d.index}") or '<span class="idle">idle</span>'
            rows.append(f"{head if i == 0 else '<tr>'}<td>{d.index}</td><td>{cell}</td>{tail if i == 0 else ''}</tr>")
    rows.append("</tbody></table>")
    return "\n".join(rows)


def _flows_table(scene: Scene) -> str:
    if not scene.flows:
        return "<h2>Cross-node flows</h2><p>none: weight sync and experience stay on their nodes</p>"
    body = "".join(
        f"<tr><td>{escape(f.kind)}</td><td>{f.src}</td><td>{f.dst}</td><td>{f.count}</td></tr>" for f in scene.flows
    )
    return (
        "<h2>Cross-node flows</h2><table><thead><tr><th>stream</th><th>from node</th><th>to node</th>"
        f"<th>workers</th></tr></thead><tbody>{body}</tbody></table>"
    )
