// Explorers in the static book (inferlab.book.static_explorers). Each figure.inferlab-explorer holds its default
// picture and its knobs; its data file, _static/explorers/<key>.js, holds every state the library drew at build
// time as distinct SVG lines and, per state, runs of line indices. Moving a knob puts the state's lines back
// together: nothing is computed here. Loaded with <script src>, so it works from file:// too.
(() => {
  const pending = {};  // key -> {promise, resolve, reject}

  async function unpack(packed) {
    const bytes = Uint8Array.from(atob(packed), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  function entry(key) {
    if (!pending[key]) {
      const e = {};
      e.promise = new Promise((resolve, reject) => { e.resolve = resolve; e.reject = reject; });
      pending[key] = e;
    }
    return pending[key];
  }

  // called by each data file
  window.inferlabExplorerData = (key, packed) => { unpack(packed).then(entry(key).resolve, entry(key).reject); };

  function load(key, file) {
    const e = entry(key);
    if (!e.requested) {
      e.requested = true;
      const root = document.documentElement.dataset.content_root || "";
      const script = document.createElement("script");
      script.src = `${root}_static/${file}`;
      script.onerror = () => e.reject(new Error(`explorer data ${script.src} did not load`));
      document.head.appendChild(script);
    }
    return e.promise;
  }

  // The drawn state for the knobs' positions: that combination where it was drawn, else the drawn one that
  // agrees with the most knobs, the one just moved first (the note under the picture names the others).
  function nearest(data, index, want, moved) {
    const exact = index.get(want.join(","));
    if (exact !== undefined) return exact;
    let best = 0;
    let score = -1;
    data.picks.forEach((pick, s) => {
      if (moved >= 0 && pick[moved] !== want[moved]) return;
      const agree = pick.reduce((n, v, i) => n + (v === want[i]), 0);
      if (agree > score) { best = s; score = agree; }
    });
    return best;
  }

  function wire(fig, data) {
    const stage = fig.querySelector(".inferlab-explorer-stage");
    const note = fig.querySelector(".inferlab-explorer-note");
    const fields = [...fig.querySelectorAll("[data-knob]")];
    if (fields.length !== data.knobs.length || fields.some((f, i) => f.dataset.knob !== data.knobs[i].name)) {
      throw new Error(`explorer ${fig.dataset.explorer}: the page's knobs are not those of its data file`);
    }
    const index = new Map(data.picks.map((pick, s) => [pick.join(","), s]));
    const show = (event) => {
      const start = performance.now();
      const want = fields.map((f) => Number(f.value));
      const s = nearest(data, index, want, fields.indexOf(event ? event.target : null));
      const shown = data.picks[s];
      fields.forEach((f, i) => {
        f.parentElement.querySelector("output").textContent = data.knobs[i].labels[want[i]];
      });
      const elsewhere = data.knobs.filter((k, i) => shown[i] !== want[i]);
      note.textContent = elsewhere.length ? "This combination was not drawn when the book was built; shown with " +
        data.knobs.map((k, i) => (shown[i] !== want[i] ? `${k.label} = ${k.labels[shown[i]]}` : null))
          .filter(Boolean).join(", ") + " (every combination is live in the notebook)." : "";
      const run = data.runs[s];
      const lines = [];
      for (let j = 0; j < run.length; j += 2) {
        for (let k = run[j]; k < run[j] + run[j + 1]; k++) lines.push(data.lines[k]);
      }
      stage.innerHTML = lines.join("\n");
      void stage.offsetHeight;  // style and layout now, so that the time below includes them
      fig.dataset.state = String(s);
      fig.dataset.exact = String(!elsewhere.length);
      // the time of the update, layout included (read by the browser test and make bench); the paint follows
      fig.dataset.ms = (performance.now() - start).toFixed(2);
    };
    for (const field of fields) {
      field.disabled = false;
      field.addEventListener("input", show);
    }
    fig.dataset.ready = "1";
  }

  function init() {
    for (const fig of document.querySelectorAll("figure.inferlab-explorer[data-explorer]")) {
      load(fig.dataset.explorer, fig.dataset.file).then((data) => wire(fig, data)).catch((err) => {
        fig.dataset.ready = "0";
        const note = document.createElement("p");
        note.className = "inferlab-explorer-missing";
        note.textContent = "The knobs of this picture could not load their data; the picture shows the defaults.";
        fig.appendChild(note);
        console.error(err);
      });
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
