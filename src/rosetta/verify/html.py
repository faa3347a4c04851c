"""The self-contained HTML view of a verify report: the agent × model × criterion matrix, plots of
score by model (inline SVG), and a drill-down per example (inputs, each model's output, verdicts).

One file with no external resources — it opens from a CI artifact store or an e-mail attachment.
Everything from the report is escaped by Jinja's autoescaping.
"""

from __future__ import annotations

import json
from typing import Any

from rosetta.verify.findings import CRITERIA, ModelResult, VerifyReport

_COLOURS = {"pass": "#1a7f37", "fail": "#cf222e", "indeterminate": "#9a6700", "n/a": "#6e7781"}

_TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rosetta verify — {{ verdict }}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem; color: #1f2328; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border: 1px solid #d0d7de; padding: .35rem .6rem; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
.status { color: #fff; border-radius: 3px; padding: 0 .4rem; font-weight: 600; white-space: nowrap; }
{% for name, colour in colours.items() %}.s-{{ name | replace('/', '') }} { background: {{ colour }}; }
{% endfor %}
.summary { font-size: 1.1rem; }
pre { background: #f6f8fa; padding: .5rem; max-height: 18rem; overflow: auto; white-space: pre-wrap; }
details { margin: .4rem 0; } summary { cursor: pointer; }
.hidden { display: none; }
.muted { color: #57606a; }
</style>
</head>
<body>
<h1>rosetta verify</h1>
<p class="summary" id="verdict">
  <span class="status s-{{ 'fail' if failures else 'indeterminate' if not_run else 'pass' }}">{{ verdict }}</span>
  {{ report.agents | length }} agent(s) × {{ report.models | length }} model(s); judge {{ report.judge }};
  created {{ report.created }} by rosetta {{ report.rosetta_version }}
</p>
{% if failures %}<ul id="failures">{% for f in failures %}<li>{{ f }}</li>{% endfor %}</ul>{% endif %}
{% if not_run %}<p class="muted" id="not-run">not run, neither failed nor passed ({{ not_run | length }}):</p>
<ul id="not-run-list">{% for n in not_run %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}
<label><input type="checkbox" id="only-failures"> show only rows with a failed criterion</label>

<h2>Matrix</h2>
<table id="matrix">
<thead><tr><th>agent</th><th>model</th>{% for id, title in criteria.items() %}<th title="{{ title }}">{{ id }}</th>{% endfor %}
<th>compliance</th><th>retries</th><th>latency</th><th>cost</th></tr></thead>
<tbody>
{% for agent in report.agents %}{% for model in agent.models %}
<tr class="{{ 'failing' if failing(model) else 'passing' }}">
<td>{{ agent.agent }}</td><td>{{ model.model }}{% if model.error %}<br><span class="muted">{{ model.error }}</span>{% endif %}{% if model.not_run %}<br><span class="muted not-run">not run: {{ model.not_run }}</span>{% endif %}</td>
{% for id in criteria %}{% set c = model.criterion(id) %}
<td>{% if c %}<span class="status s-{{ c.status | replace('/', '') }}" title="{{ c.detail }}">{{ c.status }}</span>{% if c.score is not none %} {{ '%.2f' | format(c.score) }}{% endif %}{% else %}—{% endif %}</td>
{% endfor %}
<td>{{ percent(model.compliance) }}</td><td>{{ percent(model.retry_rate) }}</td>
<td>{{ seconds(model.mean_latency_s) }}</td><td>{{ dollars(model.mean_cost_usd) }}</td>
</tr>
{% endfor %}{% if agent.error %}<tr class="failing"><td>{{ agent.agent }}</td><td colspan="{{ criteria | length + 5 }}">{{ agent.error }}</td></tr>{% endif %}{% if agent.skipped %}<tr><td>{{ agent.agent }}</td><td colspan="{{ criteria | length + 5 }}" class="muted">skipped: {{ agent.skipped }}</td></tr>{% endif %}{% endfor %}
</tbody>
</table>

<h2>Score by model</h2>
{% for agent in report.agents if agent.models %}
<figure><figcaption>{{ agent.agent }}: quality (PV-015) and first-attempt compliance</figcaption>{{ chart(agent) | safe }}</figure>
{% endfor %}

<h2>Details</h2>
{% for agent in report.agents %}
<section class="agent"><h3>{{ agent.agent }} <span class="muted">({{ agent.definition }}; {{ agent.cases }})</span></h3>
{% for model in agent.models %}
<details><summary>{{ model.model }} — prompt: {{ model.prompt_source }}</summary>
<table><tr><th>criterion</th><th>status</th><th>detail</th></tr>
{% for c in model.criteria %}<tr><td>{{ c.id }} {{ c.title }}</td><td><span class="status s-{{ c.status | replace('/', '') }}">{{ c.status }}</span></td><td>{{ c.detail }}</td></tr>{% endfor %}
</table>
{% for run in model.runs %}
<details class="run"><summary>{{ run.kind }} {{ run.case_id }}: {% for check in run.checks %}<span class="status s-{{ check.verdict }}">{{ check.criterion }} {{ check.verdict }}</span> {% endfor %}{% if run.review and run.review.decided_score is not none %}quality {{ '%.2f' | format(run.review.decided_score) }}{% endif %}</summary>
{% if run.probe %}<p>Probe: {{ run.probe }}</p>{% endif %}
<p>Inputs</p><pre>{{ dump(run.inputs) }}</pre>
<p>Output ({{ 'valid' if run.valid else 'not valid' }}, {{ run.attempts }} attempt(s), {{ seconds(run.latency_s) }})</p>
<pre>{{ run.error if run.error else dump(run.output) if run.output is not none else run.raw }}</pre>
{% if run.expected is not none %}<p>Expected</p><pre>{{ dump(run.expected) }}</pre>{% endif %}
{% if run.tool_calls %}<p>Tool calls</p><pre>{{ dump(run.tool_calls) }}</pre>{% endif %}
<ul>{% for check in run.checks %}<li>{{ check.criterion }} {{ check.verdict }} ({{ check.source }}{% if check.confidence is not none %}, confidence {{ check.confidence }}{% endif %}): {{ check.reasoning }}</li>{% endfor %}
{% if run.review %}{% for c in run.review.criteria %}<li>PV-015 {{ c.id }} {{ c.verdict }}: {{ c.text }} — {{ c.reasoning }}</li>{% endfor %}{% endif %}</ul>
</details>
{% endfor %}
</details>
{% endfor %}
</section>
{% endfor %}
<script>
document.getElementById("only-failures").addEventListener("change", function (event) {
  document.querySelectorAll("#matrix tbody tr.passing").forEach(function (row) {
    row.classList.toggle("hidden", event.target.checked);
  });
});
</script>
</body>
</html>
"""


def render_html(report: VerifyReport) -> str:
    from jinja2 import Environment

    environment = Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    template = environment.from_string(_TEMPLATE)
    failures = report.failed
    return template.render(
        report=report, failures=failures, not_run=report.not_run, criteria=CRITERIA,
        verdict="FAILED" if failures else "INCOMPLETE" if report.not_run else "PASSED",
        colours=_COLOURS, chart=_chart, dump=_dump, percent=_percent, seconds=_seconds, dollars=_dollars,
        failing=lambda model: bool(model.error) or any(c.status == "fail" for c in model.criteria))


def _chart(agent: Any) -> str:
    """Grouped horizontal bars per model: quality and compliance on a 0–1 axis, the PV-015 line."""
    from markupsafe import escape

    models: list[ModelResult] = agent.models
    label_width, bar_width, row = 260, 360, 34
    height = 30 + row * len(models)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{label_width + bar_width + 60}" '
             f'height="{height}" role="img" aria-label="scores of {escape(agent.agent)} by model">']
    threshold = label_width + bar_width * 0.85
    parts.append(f'<line x1="{threshold}" y1="0" x2="{threshold}" y2="{height - 20}" stroke="#cf222e" '
                 'stroke-dasharray="4 3"><title>PV-015 threshold 0.85</title></line>')
    for number, model in enumerate(models):
        y = 4 + number * row
        parts.append(f'<text x="0" y="{y + 16}" font-size="12">{escape(model.model)}</text>')
        for offset, (value, colour, name) in enumerate(((model.quality, "#0969da", "quality"),
                                                        (model.compliance, "#8250df", "compliance"))):
            width = bar_width * (value or 0.0)
            text = "—" if value is None else f"{value:.2f}"
            parts.append(f'<rect x="{label_width}" y="{y + offset * 13}" width="{width:.1f}" height="11" '
                         f'fill="{colour}"><title>{name} {text}</title></rect>')
            parts.append(f'<text x="{label_width + width + 4:.1f}" y="{y + offset * 13 + 10}" font-size="10">'
                         f'{name} {text}</text>')
    axis = height - 14
    for tick in (0, 0.5, 1.0):
        x = label_width + bar_width * tick
        parts.append(f'<text x="{x}" y="{axis + 10}" font-size="10" text-anchor="middle">{tick}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _dump(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}s"


def _dollars(value: float | None) -> str:
    return "—" if value is None else f"${value:.4f}"
