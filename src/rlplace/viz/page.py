"""The HTML page of a plan: the SVG picture inline, then the same facts as text to read and search.

The plan table's rows (the strings `rlplace plan` prints), the estimate and its streams, every warning and
every note of the plan. Self-contained (no script, no external file), so it can be mailed, attached to a
ticket or opened from a cluster's shared disk.
"""

from __future__ import annotations

from html import escape

from rlplace.lifecycle import NodeMark
from rlplace.planner.estimate import format_bytes
from rlplace.planner.ranges import format_ranks
from rlplace.viz.collapse import COLUMNS, rows
from rlplace.viz.components import component_facts
from rlplace.viz.environments import environments
from rlplace.viz.scene import Scene, headline
from rlplace.viz.text import estimate_line, flow_name, settings_parts

CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
.picture { border: 1px solid #ddd; padding: 4px; }
.picture svg { display: block; width: 100%; height: auto; }
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
    plan = scene.plan
    title = escape(headline(scene))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{title}</h1>",
        f'<p class="settings">{escape(" · ".join(settings_parts(plan)))}</p>',
    ]
    if scene.estimate is not None:
        parts.append(f'<p class="estimate">{escape(estimate_line(plan, scene.estimate))}</p>')
    parts += [
        f'<div class="picture">{svg_text}</div>',
        *(
            _listed("Environments", "environments", envs)
            for envs in [tuple(e.line() for e in environments(plan))]
            if envs
        ),
        _listed("Warnings", "warnings", plan.warnings),
        _listed("Notes", "notes", plan.notes),
        "<h2>Components</h2><ul>",
        *(f"<li>{escape(f.line())}</li>" for f in component_facts(plan, scene.runs)),
        "</ul>",
        _nodes_table(scene),
    ]
    if scene.unpinned:
        parts += [
            "<h2>Scheduled by Ray (not pinned)</h2>",
            "<ul>",
            *(
                f'<li title="{escape(e.title("scheduled by Ray", True))}">{escape(e.label(True))}</li>'
                for e in scene.unpinned
            ),
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


def _listed(heading: str, cls: str, lines: tuple[str, ...]) -> str:
    if not lines:
        return f"<h2>{heading}</h2><p>none</p>"
    return f'<h2>{heading}</h2><ul class="{cls}">' + "".join(f"<li>{escape(w)}</li>" for w in lines) + "</ul>"


def _nodes_table(scene: Scene) -> str:
    """The plan table as `rlplace plan` prints it: a row per run of alike nodes and devices."""
    head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    out = [f'<h2>Nodes</h2><table class="nodes"><thead><tr>{head}</tr></thead><tbody>']
    states = {n.rank: n for n in scene.nodes if n.state != NodeMark.OK}
    for r, run in _with_runs(scene):
        node = escape(r.node)
        if r.node and run.ranks[0] in states:
            view = states[run.ranks[0]]
            node += f'<br><span class="node-{view.state}">{escape(view.state.upper())}: {escape(view.note)}</span>'
        workers = escape(r.workers) if r.workers != "idle" else '<span class="idle">idle</span>'
        out.append(f"<tr><td>{node}</td><td>{escape(r.device)}</td><td>{workers}</td><td>{escape(r.cpus)}</td></tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _with_runs(scene: Scene):
    """Each table row with the node run it belongs to."""
    for run in scene.runs:
        for r in rows((run,)):
            yield r, run


def _flows_table(scene: Scene) -> str:
    """The estimate's streams, merged per picture box (one row per arrow)."""
    est = scene.estimate
    if est is None or not scene.flows:
        return "<h2>Cross-node streams</h2><p>none</p>"
    body = "".join(
        f"<tr><td>{escape(flow_name(f.kind, est))}</td><td>{format_ranks(f.src_nodes)}</td>"
        f"<td>{format_ranks(f.dst_nodes)}</td><td>{f.workers}</td><td>{escape(format_bytes(f.bytes))}</td></tr>"
        for f in scene.flows
    )
    return (
        "<h2>Cross-node streams (per iteration)</h2><table><thead><tr><th>stream</th><th>from nodes</th>"
        f"<th>to nodes</th><th>workers</th><th>bytes</th></tr></thead><tbody>{body}</tbody></table>"
    )
