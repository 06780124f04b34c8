"""What the browser tests do with the book's explorers: move every knob (``sweep``), and carry out every "Try it"
(``TRY_ITS``: set its knobs, read its stated answer on the picture). Used by ``test_browser.py`` on each page it
opens and by ``benchmarks/explorers_bench.py``.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from _cdp import Tab

#: Latency budget of one knob move (the page's own script times the update with its style and layout): the
#: median over the knob's positions, best of ``TRIES`` per position, as the book's standard states it. The
#: 95th percentile is reported, not held: the browser test shares two cores with the unit tests and the PDF,
#: and one move in four at 55 ms once failed a run whose median was 24 ms (``make bench`` measures it quietly).
BUDGET_MS = 50.0
TRIES = 3
EXPLORER = re.compile(r'data-explorer="([^"]+)"')

_READY = """(async () => {
  const figs = [...document.querySelectorAll('figure.inferlab-explorer')];
  for (let i = 0; i < 100 && figs.some(f => f.dataset.ready === undefined); i++) {
    await new Promise(r => setTimeout(r, 50));
  }
  return figs.map(f => ({key: f.dataset.explorer, ready: f.dataset.ready,
                         knobs: [...f.querySelectorAll('[data-knob]')].map(k => ({
                           name: k.dataset.knob, n: k.tagName === 'SELECT' ? k.options.length : Number(k.max) + 1,
                           value: Number(k.value)}))}));
})()"""

#: Move knob ``name`` of explorer ``fig`` to position ``pos``: what the page shows after the next paint.
_MOVE = """(async (fig, name, pos) => {
  const figure = document.querySelectorAll('figure.inferlab-explorer')[fig];
  const field = figure.querySelector(`[data-knob="${name}"]`);
  delete figure.dataset.ms;
  field.value = String(pos);
  field.dispatchEvent(new Event('input', {bubbles: true}));
  for (let i = 0; i < 200 && figure.dataset.ms === undefined; i++) await new Promise(r => setTimeout(r, 5));
  const stage = figure.querySelector('.inferlab-explorer-stage');
  return {ms: Number(figure.dataset.ms), state: figure.dataset.state, exact: figure.dataset.exact === 'true',
          html: stage.innerHTML.length + ':' + stage.innerHTML.slice(-4000),
          text: stage.textContent.replace(/\\s+/g, ' '),
          readout: field.parentElement.querySelector('output').textContent,
          note: figure.querySelector('.inferlab-explorer-note').textContent};
})"""


def _move(tab: Tab, fig: int, name: str, pos: int) -> dict:
    return tab.eval(f"{_MOVE}({fig}, {json.dumps(name)}, {pos})")



def sweep(tab: Tab, every_position: bool = False, tries: int = TRIES) -> list[dict]:
    """Every knob of every explorer on the open page to its ends and a middle value (``every_position``: to each
    of its values): per knob, what changed and the best-of-``tries`` latency of each move."""
    rows = []
    figures = tab.eval(_READY)
    for f, fig in enumerate(figures):
        assert fig["ready"] == "1", f"explorer {fig['key']} did not load its data"
        for knob in fig["knobs"]:
            start, last = knob["value"], knob["n"] - 1
            before = _move(tab, f, knob["name"], start)
            wanted = range(last, -1, -1) if every_position else (last, last // 2, 0)
            positions = list(dict.fromkeys(p for p in wanted if p != start)) + [start]
            times, pictures, readouts = [], {before["html"]}, {before["readout"]}
            for pos in positions:
                best = min((_move(tab, f, knob["name"], pos) for _ in range(tries)), key=lambda m: m["ms"])
                times.append(best["ms"])
                pictures.add(best["html"])
                readouts.add(best["readout"])
            # a knob that acts only with another one moved (admission control, on a server that admits one at a
            # time): move it again with each other knob at an end
            for other in (o for o in fig["knobs"] if o is not knob and len(pictures) == 1):
                for end in {0, other["n"] - 1} - {other["value"]}:
                    _move(tab, f, other["name"], end)
                    pictures |= {_move(tab, f, knob["name"], pos)["html"] for pos in positions}
                    _move(tab, f, knob["name"], start)
                    _move(tab, f, other["name"], other["value"])
            rows.append({"explorer": fig["key"], "knob": knob["name"], "positions": knob["n"],
                         "changed": len(pictures) > 1, "relabelled": len(readouts) > 1,
                         "p95_ms": statistics.quantiles(times, n=20, method="inclusive")[-1] if len(times) > 1 else times[0],
                         "median_ms": statistics.median(times), "times_ms": times})
    return rows



@dataclass(frozen=True)
class TryIt:
    """A "Try it" task of ``page`` (the admonition whose text holds ``phrase``): set ``settings`` (knob -> the
    label its readout shows) on explorer ``key``; the picture must then show ``shown(x)``, where ``x`` is the number
    ``answer`` finds in the task's text (its "What you should see"), or ``shown(None)`` when no number is stated."""

    page: str
    key: str
    phrase: str
    settings: dict[str, str]
    answer: str | None
    shown: Callable[[float | None], str]


_TASK_TEXT = """((phrase) => {
  const tasks = [...document.querySelectorAll('div.admonition')].filter(a => /Try it/.test(
      (a.querySelector('.admonition-title') || {}).textContent || ''));
  const task = tasks.find(a => a.textContent.replace(/\\s+/g, ' ').includes(phrase));
  return task ? task.textContent.replace(/\\s+/g, ' ') : null;
})"""

_SET = """(async (key, settings) => {
  const find = () => document.querySelector(`figure.inferlab-explorer[data-explorer="${key}"]`);
  for (let i = 0; i < 100 && !(find() && find().dataset.ready === '1'); i++) await new Promise(r => setTimeout(r, 50));
  const fig = find();
  if (!fig) return {error: `no explorer ${key} on the page`};
  for (const [name, label] of Object.entries(settings)) {
    const field = fig.querySelector(`[data-knob="${name}"]`);
    const out = field.parentElement.querySelector('output');
    const n = field.tagName === 'SELECT' ? field.options.length : Number(field.max) + 1;
    let found = false;
    for (let i = 0; i < n && !found; i++) {
      field.value = String(i);
      field.dispatchEvent(new Event('input', {bubbles: true}));
      found = out.textContent === label;
    }
    if (!found) return {error: `no position of ${name} reads ${label}`};
  }
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return {exact: fig.dataset.exact === 'true',
          text: [...fig.querySelectorAll('.inferlab-explorer-stage text')].map(t => t.textContent.trim()).join(' | ')};
})"""


#: Every knob of every explorer on the page back to the position the page opened with (its HTML value).
_RESET = """(async () => {
  for (const field of document.querySelectorAll('figure.inferlab-explorer [data-knob]')) {
    const start = field.tagName === 'SELECT'
      ? String([...field.options].findIndex(o => o.defaultSelected)) : field.defaultValue;
    if (field.value !== start) {
      field.value = start;
      field.dispatchEvent(new Event('input', {bubbles: true}));
    }
  }
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
})()"""


def _lit(text: str) -> Callable[[float | None], str]:
    return lambda _: text


C = "chapters/"
TRY_ITS = [
    TryIt(C + "8-1-1-request-lifecycle.html", "timeline.request_explorer", "inserted prefills",
          {"inserted_prefills": "1", "queue_s": "0.05"}, r"at most about ([\d.]+) s", lambda x: "meets the 7 s deadline"),
    TryIt(C + "8-1-1-request-lifecycle.html", "timeline.request_explorer", "inserted prefills",
          {"inserted_prefills": "1", "queue_s": "0.1"}, None, _lit("misses the 7 s deadline")),
    TryIt(C + "8-1-2-memory-capacity.html", "timeline.capacity_explorer", "shared prefix",
          {"shared_prefix_tokens": "6144"}, r"Sharing the prefix fits (\d+)", lambda x: f"{x:.0f} fit"),
    TryIt(C + "8-1-2-memory-capacity.html", "timeline.capacity_explorer", "shared prefix",
          {"dtype_bytes": "1"}, r"one byte per element fits (\d+)", lambda x: f"{x:.0f} fit"),
    TryIt(C + "8-1-3-latency-metrics.html", "timeline.batch_explorer", "slider to 32",
          {"batch": "32"}, r"step of about ([\d.]+) ms", lambda x: f"step about {x:.2f} ms"),
    TryIt(C + "8-2-1-weight-reuse.html", "roofline.weight_reuse_explorer", "context to 32768",
          {"context_tokens": "32768", "bandwidth_scale": "0.5"}, r"= ?(\d+): it compares", lambda x: f"b_KV = {x:.0f}"),
    TryIt(C + "8-2-2-continuous-batching.html", "schedule.example_explorer", "max running",
          {"max_running": "4", "policy": "continuous"}, r"gap grows to ([\d,]+) ms", lambda x: f"longest gap {x:.0f} ms"),
    TryIt(C + "8-2-2-continuous-batching.html", "schedule.example_explorer", "max running",
          {"chunk_tokens": "512"}, r"gap falls to ([\d,]+) ms", lambda x: f"longest gap {x:.0f} ms"),
    TryIt(C + "8-2-3-chunked-prefill.html", "schedule.chunk_explorer", "16,384",
          {"history_tokens": "16384"}, r"ms to ([\d.]+) ms", lambda x: f"{x:.1f} ms"),
    TryIt(C + "8-2-4-token-budget.html", "schedule.budget_rule_explorer", "100 ms limit",
          {"gap_limit_ms": "100"}, r"([\d,]+) tokens, about", lambda x: f"{x:,.0f} tokens"),
    TryIt(C + "8-2-4-token-budget.html", "schedule.padding_explorer", "every 8 rows",
          {"step": "8"}, r"About ([\d.]+)% instead", lambda x: f"padding {x:.1f} %"),
    TryIt(C + "8-3-1-paged-allocation.html", "blocks_explorers.paged_allocation_explorer", "unused positions",
          {"block_size": "16"}, r"unused room is (\d+) positions", lambda x: f"{x:.0f} unused"),
    TryIt(C + "8-3-2-sharing-and-copy-on-write.html", "blocks_explorers.branch_sharing_explorer", "1528",
          {"branches": "16"}, r"16 branches (\d+)%", lambda x: f"({x:.0f}% fewer)"),
    TryIt(C + "8-3-2-sharing-and-copy-on-write.html", "blocks_explorers.branch_sharing_explorer", "1528",
          {"prefix_tokens": "1528"}, r"prefix, (\d+) blocks instead", lambda x: f"{x:.0f} physical blocks"),
    TryIt(C + "8-3-2-sharing-and-copy-on-write.html", "blocks_explorers.shared_batch_explorer", "shrinks to 2048",
          {"prefix_tokens": "2048"}, r"only (\d+) fit", lambda x: f"{x:.0f} requests fit"),
    TryIt(C + "8-3-2-sharing-and-copy-on-write.html", "blocks_explorers.copy_on_write_explorer", "Step through the fork",
          {"step": "2"}, None, _lit("#3 | free")),  # three of the four blocks in use
    TryIt(C + "8-3-2-sharing-and-copy-on-write.html", "blocks_explorers.refcount_explorer", "four states",
          {"step": "2"}, None, _lit("refs 0, the step still reads them (draining)")),
    TryIt(C + "8-3-3-prefix-reuse.html", "blocks_explorers.snapshot_explorer", "2048 tokens",
          {"interval": "2048"}, r"only (\d+) tokens are recomputed", lambda x: f"recompute {x:.0f} here"),
    TryIt(C + "8-3-4-cache-admission-and-eviction.html", "blocks_explorers.value_explorer", "maintenance to zero",
          {"link_gb_per_s": "8"}, r"only near .{0,40}?= ?(\d+\.\d+)", lambda x: f"{100 * x:.0f}."),  # 0.58: 58.2%
    TryIt(C + "8-3-4-cache-admission-and-eviction.html", "blocks_explorers.keep_or_recompute_explorer", "slowest link",
          {"link_gb_per_s": "8"}, r"At 8 GB/s only the prefixes beyond (\d+)K", lambda x: f"from {2 * x:.0f}K tokens up"),
    TryIt(C + "8-3-4-cache-admission-and-eviction.html", "blocks_explorers.keep_or_recompute_explorer", "slowest link",
          {"link_gb_per_s": "4"}, None, _lit("keeping pays at no length")),
    TryIt(C + "8-3-4-cache-admission-and-eviction.html", "blocks_explorers.keep_or_recompute_explorer", "slowest link",
          {"link_gb_per_s": "64", "maintain_per_fetch": "10"}, r"exceeds about (\d+) transfers",
          lambda x: "from 8K tokens up" if x < 10 else "at every length"),
    TryIt(C + "8-3-4-cache-admission-and-eviction.html", "blocks_explorers.cache_choice_explorer", "three B",
          {"p_a": "0.45"}, None, _lit("keep 3 x B")),
    TryIt(C + "8-3-4-cache-admission-and-eviction.html", "blocks_explorers.pool_explorer", "pool sizes",
          {"pool_gib": "2.5"}, None, _lit("LRU 4,499")),
    TryIt(C + "8-3-4-cache-admission-and-eviction.html", "blocks_explorers.pool_explorer", "pool sizes",
          {"pool_gib": "4.0"}, None, _lit("LRU 16,899 · value per byte 16,899 · value per byte, no hint 16,899")),
    TryIt(C + "8-4-1-weight-quantization.html", "quant.weight_fit_explorer", "longest context",
          {"context_tokens": "9216"}, None, _lit("no room")),
    TryIt(C + "8-4-1-weight-quantization.html", "quant.weight_fit_explorer", "reserved for system",
          {"context_tokens": "8192", "reserved_gib": "5.5"}, r"slider.s ([\d.]+) GiB is the first step",
          lambda x: "left by the file | request fits" if x == 5.5 else f"the page names {x} GiB"),
    TryIt(C + "8-4-1-weight-quantization.html", "quant.weight_fit_explorer", "reserved for system",
          {"context_tokens": "8192", "reserved_gib": "6"}, None, _lit("left by the file | no room")),
    TryIt(C + "8-4-2-kv-compression.html", "quant.kv_format_explorer", "net saving",
          {"context_tokens": "3072"}, r"it loses ([\d.]+) ms", lambda x: f"-{x:.3f} ms"),
    TryIt(C + "8-4-2-kv-compression.html", "quant.kv_format_explorer", "net saving",
          {"fmt": "q4_0", "conversion_ms": "0.7"}, r"still gains ([\d.]+) ms", lambda x: f"+{x:.3f} ms"),
    TryIt(C + "8-4-3-offloading-and-prefetch.html", "quant.offload_explorer", "two buffers",
          {"link_gb_per_s": "138"}, r"compute time \(([\d.]+) ms\)", lambda x: f"{x:.1f} ms per step"),
    TryIt(C + "8-4-3-offloading-and-prefetch.html", "quant.offload_explorer", "two buffers",
          {"link_gb_per_s": "104", "n_buffers": "2"}, r"compute time \(([\d.]+) ms\)", lambda x: f"{x:.1f} ms per step"),
    TryIt(C + "8-4-3-offloading-and-prefetch.html", "quant.compression_explorer", "450 GB/s",
          {"ratio": "0.5", "link_gb_per_s": "450"}, r"becomes (\d+) GB/s", lambda x: f"pays above {x:.1f} GB/s"),
    TryIt(C + "8-4-4-quality-under-compression.html", "quant.retrieval_explorer", "512-record",
          {"kv": "q8_0"}, r"\((\d+) and \d+ of 32\)", lambda x: f"{x:.0f}/32 correct"),
    TryIt(C + "8-4-4-quality-under-compression.html", "quant.retrieval_explorer", "512-record",
          {"records": "n512"}, r"same (\d+) of 16", lambda x: f"{x:.0f}/16 correct"),
    TryIt(C + "8-5-1-draft-and-verify.html", "speculative.acceptance_explorer", "decay to 0.8",
          {"accept": "0.9", "drafts": "8"}, r"= ([\d.]+) tokens, and", lambda x: f"E[N] = {x:.2f}"),
    TryIt(C + "8-5-1-draft-and-verify.html", "speculative.acceptance_explorer", "decay to 0.8",
          {"accept": "0.9", "drafts": "8", "decay": "0.8"}, r"mean falls to ([\d.]+)", lambda x: f"E[N] = {x:.2f}"),
    TryIt(C + "8-5-2-round-cost.html", "speculative.round_cost_explorer", "verification time",
          {"accept": "0.5", "drafts": "4"}, r"about ([\d.]+) ms\. A cheaper", lambda x: f"yours: {x:.1f} ms"),
    TryIt(C + "8-5-2-round-cost.html", "speculative.round_cost_explorer", "verification time",
          {"accept": "0.5", "verify_ms": "15"}, r"to about ([\d.]+) ms\. Sixteen", lambda x: f"yours: {x:.1f} ms"),
    TryIt(C + "8-5-4-draft-length.html", "speculative.draft_length_explorer", "decay per position",
          {"accept": "0.85"}, r"batch 1 the best length is (\d+) drafts", lambda x: f"best m = {x:.0f}"),
    TryIt(C + "8-5-4-draft-length.html", "speculative.draft_length_explorer", "decay per position",
          {"accept": "0.85", "decay": "0.8"}, r"shortens it to (\d+)", lambda x: f"best m = {x:.0f}"),
    TryIt(C + "8-5-4-draft-length.html", "speculative.draft_length_explorer", "decay per position",
          {"accept": "0.85", "batch": "256"}, r"at 256 it is (\d+)", lambda x: f"best m = {x:.0f}"),
    TryIt(C + "8-5-3-draft-sources.html", "speculative.draft_source_explorer", "fixed cost per forward",
          {"overhead_ms": "9.5"}, r"ties at about ([\d.]+) ms of extra cost per forward",
          lambda x: "faster than plain decode" if x > 9.5 else "slower than plain decode"),
    TryIt(C + "8-5-3-draft-sources.html", "speculative.draft_source_explorer", "fixed cost per forward",
          {"overhead_ms": "10"}, r"ties at about ([\d.]+) ms of extra cost per forward",
          lambda x: "slower than plain decode" if x < 10 else "faster than plain decode"),
    TryIt(C + "8-5-3-draft-sources.html", "speculative.draft_source_explorer", "fixed cost per forward",
          {"source": "draft model, parallel", "overhead_ms": "50"}, r"parallel drafting .{0,60}?ties at about ([\d.]+) ms",
          lambda x: "faster than plain decode" if x > 50 else "slower than plain decode"),
    TryIt(C + "8-6-1-arrivals-and-admission.html", "serving.arrivals_explorer", "admission control",
          {"rate_per_s": "16", "kv_budget_gib": "1"}, r"(\d+) of the forty miss", lambda x: f"{40 - x:.0f} of 40 on time"),
    TryIt(C + "8-6-1-arrivals-and-admission.html", "serving.arrivals_explorer", "admission control",
          {"rate_per_s": "16", "kv_budget_gib": "1"}, r"s to ([\d.]+) s and", lambda x: f"{x:.1f} s each"),
    TryIt(C + "8-6-1-arrivals-and-admission.html", "serving.arrivals_explorer", "admission control",
          {"policy": "one at a time", "admission_control": "reject if late"}, r"turns (\d+) of the forty away",
          lambda x: f"{40 - x:.0f} of 40 on time"),
    TryIt(C + "8-6-2-goodput.html", "serving.goodput_explorer", "accuracy",
          {"deadline_s": "6"}, r"rises from [\d.]+ to ([\d.]+) per second", lambda x: f"{x:.2f}"),
    TryIt(C + "8-6-3-choosing-a-configuration.html", "serving.config_explorer", "tokens per round",
          {"tokens_per_round": "1.5"}, None, _lit("cheapest feasible: D")),
    TryIt(C + "8-6-3-choosing-a-configuration.html", "serving.config_explorer", "tokens per round",
          {"tokens_per_round": "1.25"}, None, _lit("no configuration")),
    TryIt(C + "8-6-3-choosing-a-configuration.html", "serving.amdahl_explorer", "80 %",
          {"decode_share": "0.8", "max_speedup": "64"}, None, _lit("your f = 80%")),
]


def reset(tab: Tab) -> None:
    """Every knob of the open page back where the page opened it."""
    tab.eval(_RESET)


def try_it(tab: Tab, task: TryIt) -> str | None:
    """Carry out ``task`` on the open page (its knobs from where the page opened them): what went wrong, or None."""
    reset(tab)
    result = tab.eval(f"{_SET}({json.dumps(task.key)}, {json.dumps(task.settings)})")
    if "error" in result:
        return f"{task.key} {task.settings}: {result['error']}"
    if not result["exact"]:
        return f"{task.key} {task.settings}: the settings were not drawn"
    number = None
    if task.answer is not None:
        stated = tab.eval(f"{_TASK_TEXT}({json.dumps(task.phrase)})")
        if not stated:
            return f"no 'Try it' says {task.phrase!r}"
        match = re.search(task.answer, stated)
        if not match:
            return f"{task.key} {task.settings}: the answer's number not found in: {stated}"
        number = float(match.group(1).replace(",", ""))
    expected = task.shown(number)
    if expected not in result["text"]:
        return f"{task.key} {task.settings}: the picture does not show {expected!r}: {result['text'][:900]}"
    return None
