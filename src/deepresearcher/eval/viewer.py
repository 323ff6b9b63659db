"""``report.html``: the eval's table and every trajectory as a readable conversation, in one static file.

No server, no CDN: CSS and JavaScript are inline and the rollouts are embedded as JSON, so the file
opens from disk, attaches to an issue or a mail, and works offline. Each rollout shows the question,
then turn by turn the policy's thinking, its searches with the hits they returned, the pages it read
with the reader's notes, format errors, and finally the answer next to the gold answers and scores.

Filters (benchmark, outcome, free text) live in the URL hash, e.g. ``report.html#bench=hotpotqa&outcome=wrong``,
so a filtered view can be linked; ``&open=1`` expands every shown rollout. Outcome of a rollout:

- ``correct``: the judge says so, or (without a judge) cover-EM is 1;
- ``partial``: not correct but F1 > 0;
- ``wrong``: an answer with no overlap;
- ``no_answer``: the episode ended without an answer.

Data is rendered with ``textContent`` only, so page text or model output can never inject markup.
"""

from __future__ import annotations

import html
import re
from typing import Any

import orjson

__all__ = ["OUTCOMES", "outcome", "render_html", "slim_record"]

OUTCOMES: tuple[str, ...] = ("correct", "partial", "wrong", "no_answer")
_MAX_TEXT = 4000  # characters kept per thought, note or snippet: keeps the file small on huge evals


def outcome(record: dict[str, Any]) -> str:
    """The filter bucket of a scored rollout (see the module docstring)."""
    if record.get("answer") is None:
        return "no_answer"
    correct = record.get("judge") if record.get("judge") is not None else record.get("cover_em")
    if correct:
        return "correct"
    return "partial" if (record.get("f1") or 0) > 0 else "wrong"


def _cut(text: Any) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + " …"


_TAGS = re.compile(r"<tool_call>.*?(</tool_call>|$)|<answer>.*?(</answer>|$)", re.DOTALL)


def _thought(text: str) -> str:
    """The policy's own words in a turn: the text without its tool call and answer blocks."""
    text = _TAGS.sub("", text)
    return _cut(re.sub(r"</?think>", "", text).strip())


def _observation(call: dict[str, Any]) -> list[dict[str, Any]]:
    items = call.get("observation")
    if not isinstance(items, list):
        return []
    out = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if call.get("name") == "web_search":
            out.append({
                "query": _cut(item.get("search_query", "")),
                "error": item.get("error"),
                "hits": [{"title": _cut(h.get("title")), "url": h.get("url", ""), "snippet": _cut(h.get("quick_summary"))}
                         for h in item.get("web_page_info_list", []) if isinstance(h, dict)],
            })
        else:
            out.append({"url": item.get("url", ""), "notes": _cut(item.get("information")), "error": item.get("error")})
    return out


def slim_record(record: dict[str, Any]) -> dict[str, Any]:
    """What the viewer needs of one scored rollout: no token ids, texts cut to a readable length."""
    turns = []
    for turn in (record.get("trajectory") or {}).get("turns", []):
        call = turn.get("tool_call")
        turns.append({
            "thought": _thought(turn.get("text", "")),
            "format_error": turn.get("format_error"),
            "call": None if call is None else {
                "name": call.get("name", ""), "arguments": call.get("arguments", {}), "error": call.get("error"),
                "results": _observation(call),
            },
        })
    return {
        "benchmark": record["benchmark"], "task_id": record["task_id"], "sample": record.get("sample", 0),
        "question": record.get("question", ""), "golds": record.get("golds", []), "answer": record.get("answer"),
        "em": record.get("em"), "f1": record.get("f1"), "cover_em": record.get("cover_em"),
        "judge": record.get("judge"), "judge_by": record.get("judge_by"), "termination": record.get("termination", ""),
        "format_ok": record.get("format_ok"), "outcome": outcome(record), "turns": turns,
    }


def _json_script(data: Any) -> str:
    # "</" would close the <script> element early; "<\/" is the same string to JSON.parse.
    return orjson.dumps(data).decode().replace("</", "<\\/").replace("<!--", "<\\!--")


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2430}
header{background:#1d2430;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
main{padding:16px 24px;max-width:1200px}
table.metrics{border-collapse:collapse;background:#fff;margin:8px 0 4px}
table.metrics th,table.metrics td{border:1px solid #d6dae1;padding:4px 10px;text-align:right}
table.metrics th:first-child,table.metrics td:first-child{text-align:left}
.meta{color:#4a5566;font-size:13px;margin:4px 0 16px}.meta li{margin:1px 0}
.filters{position:sticky;top:0;background:#f6f7f9;padding:8px 0;border-bottom:1px solid #d6dae1;z-index:1}
.filters label{margin-right:14px}.filters select,.filters input{font:inherit}
.traj{background:#fff;border:1px solid #d6dae1;border-left:6px solid #999;border-radius:4px;margin:12px 0;padding:10px 14px}
.traj.correct{border-left-color:#2e9d5b}.traj.partial{border-left-color:#d9a520}.traj.wrong{border-left-color:#d04a3a}
.traj.no_answer{border-left-color:#7b8494}
.traj summary{cursor:pointer;font-weight:600}.badge{display:inline-block;font-size:12px;padding:0 6px;border-radius:8px;
background:#e8ebf0;margin-left:6px;font-weight:400}
.turn{border-top:1px dashed #d6dae1;margin-top:8px;padding-top:6px}
.thought{font-style:italic;color:#4a5566;white-space:pre-wrap}
.search,.browse{margin:4px 0 0 10px}.query{font-weight:600;color:#1b5fa8}.hit{margin-left:14px}
.hit a,.page a{color:#1b5fa8}.snippet,.notes{color:#333;white-space:pre-wrap;margin-left:14px;font-size:13px}
.error{color:#b3261e}.final{margin-top:8px;padding-top:6px;border-top:1px solid #d6dae1}
.final b{display:inline-block;min-width:70px}
"""

_JS = r"""
(function(){
const doc = JSON.parse(document.getElementById('data').textContent);
const list = document.getElementById('list');
const el = (tag, cls, text) => {const e=document.createElement(tag); if(cls) e.className=cls;
  if(text!==undefined && text!==null) e.textContent=String(text); return e;};
const pct = v => v===null||v===undefined ? '—' : (100*v).toFixed(0);
function link(url){const a=el('a',null,url); a.href=url; a.target='_blank'; a.rel='noopener noreferrer'; return a;}
function renderTurn(t, i){
  const d=el('div','turn'); d.appendChild(el('div',null,'Turn '+(i+1)));
  if(t.thought) d.appendChild(el('div','thought',t.thought));
  if(t.format_error) d.appendChild(el('div','error','format error: '+t.format_error));
  const c=t.call; if(!c) return d;
  if(c.error) d.appendChild(el('div','error',c.name+': '+c.error));
  if(c.name==='web_search'){
    const s=el('div','search');
    if(!c.results.length) s.appendChild(el('div','query','search: '+JSON.stringify(c.arguments)));
    for(const r of c.results){
      s.appendChild(el('div','query','search: '+r.query)); if(r.error) s.appendChild(el('div','error',r.error));
      for(const h of r.hits){const hd=el('div','hit'); hd.appendChild(el('span',null,h.title+' ')); hd.appendChild(link(h.url));
        s.appendChild(hd); if(h.snippet) s.appendChild(el('div','snippet',h.snippet));}
    }
    d.appendChild(s);
  } else {
    const b=el('div','browse');
    if(!c.results.length) b.appendChild(el('div','query','read: '+JSON.stringify(c.arguments)));
    for(const p of c.results){const pd=el('div','page'); pd.appendChild(el('span',null,'read: ')); pd.appendChild(link(p.url));
      b.appendChild(pd); if(p.error) b.appendChild(el('div','error',p.error)); if(p.notes) b.appendChild(el('div','notes',p.notes));}
    d.appendChild(b);
  }
  return d;
}
function renderRecord(r){
  const det=el('details','traj '+r.outcome); det.dataset.bench=r.benchmark; det.dataset.outcome=r.outcome;
  det.dataset.text=(r.question+' '+(r.answer||'')+' '+r.golds.join(' ')).toLowerCase();
  const sum=el('summary',null,r.question);
  sum.appendChild(el('span','badge',r.benchmark)); sum.appendChild(el('span','badge',r.outcome));
  if(r.sample) sum.appendChild(el('span','badge','sample '+r.sample));
  det.appendChild(sum);
  det.addEventListener('toggle',()=>{ if(det.open && !det.dataset.filled){ det.dataset.filled='1';
    r.turns.forEach((t,i)=>det.appendChild(renderTurn(t,i)));
    const f=el('div','final');
    const a=el('div'); a.appendChild(el('b',null,'answer')); a.appendChild(el('span',null,r.answer===null?'(none: '+r.termination+')':r.answer)); f.appendChild(a);
    const g=el('div'); g.appendChild(el('b',null,'gold')); g.appendChild(el('span',null,r.golds.join(' | '))); f.appendChild(g);
    const s=el('div'); s.appendChild(el('b',null,'score'));
    s.appendChild(el('span',null,'EM '+pct(r.em)+' · F1 '+pct(r.f1)+' · cover-EM '+pct(r.cover_em)+
      (r.judge===null?'':' · judge '+pct(r.judge)+' ('+r.judge_by+')')+' · ended: '+r.termination+(r.format_ok?'':' · format broken')));
    f.appendChild(s); det.appendChild(f);}});
  return det;
}
const items = doc.records.map(r=>{const n=renderRecord(r); list.appendChild(n); return n;});
const bench=document.getElementById('bench'), outc=document.getElementById('outcome'), text=document.getElementById('text');
for(const b of doc.benchmarks){const o=el('option',null,b); o.value=b; bench.appendChild(o);}
function readHash(){const p=new URLSearchParams(location.hash.slice(1));
  bench.value=p.get('bench')||''; outc.value=p.get('outcome')||''; text.value=p.get('q')||'';}
function apply(){let shown=0; const q=text.value.trim().toLowerCase();
  for(const n of items){const ok=(!bench.value||n.dataset.bench===bench.value)&&(!outc.value||n.dataset.outcome===outc.value)&&(!q||n.dataset.text.includes(q));
    n.hidden=!ok; if(ok) shown++;}
  document.getElementById('shown').textContent=String(shown);}
function writeHash(){const p=new URLSearchParams(); if(bench.value) p.set('bench',bench.value); if(outc.value) p.set('outcome',outc.value);
  if(text.value.trim()) p.set('q',text.value.trim()); const o=new URLSearchParams(location.hash.slice(1)).get('open'); if(o) p.set('open',o); history.replaceState(null,'','#'+p.toString()); apply();}
bench.onchange=writeHash; outc.onchange=writeHash; text.oninput=writeHash;
window.addEventListener('hashchange',()=>{readHash(); apply();});
readHash(); apply();
if(new URLSearchParams(location.hash.slice(1)).get('open')) for(const n of items) if(!n.hidden) n.open=true;
document.body.dataset.ready='1';
})();
"""


def _html_table(markdown: list[str]) -> str:
    """A Markdown table (header, rule, rows) as an HTML table."""
    header = [c.strip() for c in markdown[0].strip("|").split("|")]
    body = [[c.strip().replace("**", "") for c in line.strip("|").split("|")] for line in markdown[2:]]
    table = "<table class=metrics><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in header) + "</tr>"
    table += "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body)
    return table + "</table>"


def render_html(document: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """The whole report page: title, table, settings, filters and the embedded rollouts."""
    from deepresearcher.eval.report import markdown_table, settings_lines

    from deepresearcher.eval.report import BASELINES_NOTE, baseline_tables

    meta = document["meta"]
    table = _html_table(markdown_table(document).splitlines())
    for label, lines in baseline_tables(document):
        table += f"<h2>No-tools baselines: {html.escape(label)}</h2><p>{html.escape(BASELINES_NOTE)}</p>"
        table += _html_table(lines)
    settings = "".join(f"<li>{html.escape(line[2:].replace('`', ''))}</li>" for line in settings_lines(meta))
    data = {"benchmarks": list(document["benchmarks"]), "records": [slim_record(r) for r in records]}
    options = "".join(f'<option value="{o}">{o.replace("_", " ")}</option>' for o in OUTCOMES)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>deepresearcher eval {html.escape(meta['config_hash'])}</title><style>{_CSS}</style></head>
<body><header><h1>deepresearcher evaluation</h1></header><main>
<p>Metrics in percent (mean@{meta['samples']}); outcome colours: green correct, amber partial, red wrong, grey no answer.</p>
{table}<ul class=meta>{settings}</ul>
<div class=filters><label>benchmark <select id=bench><option value="">all</option></select></label>
<label>outcome <select id=outcome><option value="">all</option>{options}</select></label>
<label>text <input id=text type=search placeholder="question, answer or gold"></label>
<span><span id=shown>{len(records)}</span> of {len(records)} rollouts shown</span></div>
<div id=list></div></main>
<script type="application/json" id=data>{_json_script(data)}</script>
<script>{_JS}</script></body></html>
"""
