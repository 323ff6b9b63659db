"""The trajectory viewer of a report page: every rollout as a readable conversation, in the page itself.

Each rollout shows the question, then turn by turn the policy's thinking, its searches with the hits
they returned, the pages it read with the reader's notes, format errors, and finally the answer next
to the gold answers and scores. The rollouts are embedded as JSON and drawn by inline JavaScript, so
the page needs no server or network. A record is a scored rollout with its ``trajectory`` (the JSON
of ``agent.trajectory.Trajectory``): one line of an eval's ``trajectories.jsonl``, or a training
run's sampled or held-out episode; ``group`` (else ``benchmark``) sorts it into a filter group.

Filters (group, outcome, research behaviour, free text) live in the URL hash, e.g.
``report.html#bench=hotpotqa&outcome=wrong&behaviour=unsupported``, so a filtered view can be linked; ``&open=1``
expands every shown rollout. Behaviours are the tags an eval stored with the rollout (``behaviour.tags``:
grounded, unsupported, abstained, reflected, ...; ``eval.behaviours``). Outcome of a rollout:

- ``correct``: the judge says so; without a judge, cover-EM is 1 (or EM, where cover-EM was not scored);
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

from deepresearcher.agent.tools import page_notes

__all__ = ["OUTCOMES", "VIEWER_CSS", "outcome", "slim_record", "viewer_html"]

OUTCOMES: tuple[str, ...] = ("correct", "partial", "wrong", "no_answer")
_MAX_TEXT = 4000  # characters kept per thought, note or snippet: keeps the file small on huge evals


def outcome(record: dict[str, Any]) -> str:
    """The filter bucket of a scored rollout (see the module docstring)."""
    if record.get("answer") is None:
        return "no_answer"
    correct = next((record[k] for k in ("judge", "cover_em", "em") if record.get(k) is not None), 0)
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
            out.append({"url": item.get("url", ""), "notes": _cut(page_notes(item.get("information"))), "error": item.get("error")})
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
        "group": record.get("group") or record.get("benchmark", ""), "task_id": record.get("task_id", ""),
        "sample": record.get("sample", 0), "reward": record.get("reward"),
        "question": record.get("question", ""), "golds": record.get("golds", []), "answer": record.get("answer"),
        "em": record.get("em"), "f1": record.get("f1"), "cover_em": record.get("cover_em"),
        "deepresearcher_f1": record.get("deepresearcher_f1"),
        "judge": record.get("judge"), "judge_by": record.get("judge_by"), "termination": record.get("termination", ""),
        "format_ok": record.get("format_ok"), "outcome": outcome(record), "turns": turns,
        "behaviours": list((record.get("behaviour") or {}).get("tags", [])),
    }


def _json_script(data: Any) -> str:
    # "</" would close the <script> element early; "<\/" is the same string to JSON.parse.
    return orjson.dumps(data).decode().replace("</", "<\\/").replace("<!--", "<\\!--")


VIEWER_CSS = """
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
"""Styles of the viewer's filters and conversations (the page's own styles are ``reports.page``'s)."""

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
  const det=el('details','traj '+r.outcome); det.dataset.bench=r.group; det.dataset.outcome=r.outcome;
  det.dataset.behaviours=' '+r.behaviours.join(' ')+' ';
  det.dataset.text=(r.question+' '+(r.answer||'')+' '+r.golds.join(' ')).toLowerCase();
  const sum=el('summary',null,r.question);
  if(r.group) sum.appendChild(el('span','badge',r.group)); sum.appendChild(el('span','badge',r.outcome));
  if(r.sample) sum.appendChild(el('span','badge','sample '+r.sample));
  for(const b of r.behaviours) sum.appendChild(el('span','badge',b.replace(/_/g,' ')));
  det.appendChild(sum);
  det.addEventListener('toggle',()=>{ if(det.open && !det.dataset.filled){ det.dataset.filled='1';
    r.turns.forEach((t,i)=>det.appendChild(renderTurn(t,i)));
    const f=el('div','final');
    const a=el('div'); a.appendChild(el('b',null,'answer')); a.appendChild(el('span',null,r.answer===null?'(none: '+r.termination+')':r.answer)); f.appendChild(a);
    const g=el('div'); g.appendChild(el('b',null,'gold')); g.appendChild(el('span',null,r.golds.join(' | '))); f.appendChild(g);
    const s=el('div'); s.appendChild(el('b',null,'score'));
    s.appendChild(el('span',null,'EM '+pct(r.em)+' · F1 '+pct(r.f1)+' · cover-EM '+pct(r.cover_em)+
      (r.deepresearcher_f1===undefined?'':' · DeepResearcher F1 '+pct(r.deepresearcher_f1))+
      (r.judge===null?'':' · judge '+pct(r.judge)+' ('+r.judge_by+')')+
      (r.reward===null||r.reward===undefined?'':' · reward '+Number(r.reward).toFixed(2))+' · ended: '+r.termination+(r.format_ok?'':' · format broken')));
    f.appendChild(s); det.appendChild(f);}});
  return det;
}
const items = doc.records.map(r=>{const n=renderRecord(r); list.appendChild(n); return n;});
const bench=document.getElementById('bench'), outc=document.getElementById('outcome'), text=document.getElementById('text');
const beh=document.getElementById('behaviour');
for(const b of doc.groups){const o=el('option',null,b); o.value=b; bench.appendChild(o);}
function readHash(){const p=new URLSearchParams(location.hash.slice(1));
  bench.value=p.get('bench')||''; outc.value=p.get('outcome')||''; text.value=p.get('q')||''; beh.value=p.get('behaviour')||'';}
function apply(){let shown=0; const q=text.value.trim().toLowerCase();
  for(const n of items){const ok=(!bench.value||n.dataset.bench===bench.value)&&(!outc.value||n.dataset.outcome===outc.value)&&(!q||n.dataset.text.includes(q))
    &&(!beh.value||n.dataset.behaviours.includes(' '+beh.value+' '));
    n.hidden=!ok; if(ok) shown++;}
  document.getElementById('shown').textContent=String(shown);}
function writeHash(){const p=new URLSearchParams(); if(bench.value) p.set('bench',bench.value); if(outc.value) p.set('outcome',outc.value);
  if(beh.value) p.set('behaviour',beh.value);
  if(text.value.trim()) p.set('q',text.value.trim()); const o=new URLSearchParams(location.hash.slice(1)).get('open'); if(o) p.set('open',o); history.replaceState(null,'','#'+p.toString()); apply();}
bench.onchange=writeHash; outc.onchange=writeHash; beh.onchange=writeHash; text.oninput=writeHash;
window.addEventListener('hashchange',()=>{readHash(); apply();});
readHash(); apply();
if(new URLSearchParams(location.hash.slice(1)).get('open')) for(const n of items) if(!n.hidden) n.open=true;
document.body.dataset.ready='1';
})();
"""


def viewer_html(records: list[dict[str, Any]], group_label: str = "benchmark") -> str:
    """The viewer's HTML: filters, the list the script fills, the embedded records and the script."""
    slim = [slim_record(r) for r in records]
    data = {"groups": list(dict.fromkeys(r["group"] for r in slim if r["group"])), "records": slim}
    options = "".join(f'<option value="{o}">{o.replace("_", " ")}</option>' for o in OUTCOMES)
    tags = sorted({tag for r in slim for tag in r["behaviours"]})
    behaviours = "".join(f'<option value="{html.escape(t)}">{html.escape(t.replace("_", " "))}</option>' for t in tags)
    hidden = "" if tags else " hidden"
    return f"""<p>Outcome colours: green correct, amber partial, red wrong, grey no answer.</p>
<div class=filters><label>{html.escape(group_label)} <select id=bench><option value="">all</option></select></label>
<label>outcome <select id=outcome><option value="">all</option>{options}</select></label>
<label{hidden}>behaviour <select id=behaviour><option value="">all</option>{behaviours}</select></label>
<label>text <input id=text type=search placeholder="question, answer or gold"></label>
<span><span id=shown>{len(slim)}</span> of {len(slim)} rollouts shown</span></div>
<div id=list></div>
<script type="application/json" id=data>{_json_script(data)}</script>
<script>{_JS}</script>"""
