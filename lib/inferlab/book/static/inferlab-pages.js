/* Pages on any screen (inferlab.book.sphinx_offline): what is wider than the column (a figure at its legible size
   on a phone, a long display equation) scrolls sideways with a visible cue; search snippets show math as text. */
(() => {
  "use strict";
  const SCROLLERS = ".inferlab-figure-scroll, div.math, mjx-container[display=true]";

  /* Mark each scroller that overflows (a shadow and a line "Scroll sideways" show then) and whether it is at its end. */
  const mark = () => {
    for (const el of document.querySelectorAll(SCROLLERS)) {
      const over = el.scrollWidth > el.clientWidth + 1;
      el.classList.toggle("inferlab-scrollable", over);
      const math = el.matches("mjx-container") ? el.closest("div.math") : null;  // the theme scrolls the container
      if (math) { math.classList.toggle("inferlab-has-scroller", over); }
      el.classList.toggle("inferlab-at-end", over && el.scrollLeft + el.clientWidth >= el.scrollWidth - 1);
      if (over && !el.dataset.inferlabCue) {
        el.dataset.inferlabCue = "1";
        el.tabIndex = 0;  // a keyboard reader can scroll it too
        el.addEventListener("scroll", () => el.classList.toggle(
          "inferlab-at-end", el.scrollLeft + el.clientWidth >= el.scrollWidth - 1), {passive: true});
      }
    }
  };
  let pending = 0;
  const later = () => { cancelAnimationFrame(pending); pending = requestAnimationFrame(mark); };
  addEventListener("resize", later);
  addEventListener("load", () => {
    mark();
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) { MathJax.startup.promise.then(mark); }
  });
  document.addEventListener("DOMContentLoaded", mark);

  /* TeX as a reader would read it: \(D_w / b\) -> "D_w / b", \mathrm{ovh} -> "ovh", \times -> "×". */
  const SYMBOLS = {times: "×", cdot: "·", le: "≤", leq: "≤", ge: "≥", geq: "≥", approx: "≈", infty: "∞",
    to: "→", rightarrow: "→", ldots: "…", dots: "…", cdots: "…", alpha: "α", beta: "β", gamma: "γ", delta: "δ",
    Delta: "Δ", epsilon: "ε", lambda: "λ", mu: "μ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ", theta: "θ",
    sum: "Σ", min: "min", max: "max", log: "log", quad: " ", qquad: " ", ",": " ", ";": " ", "!": "", "%": "%"};
  const plainTex = (tex) => tex
    .replace(/\\(?:mathrm|mathit|mathbf|text|operatorname|textrm|mathsf)\s*\{([^{}]*)\}/g, "$1")
    .replace(/\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, "($1)/($2)")
    .replace(/\\(?:left|right|big|Big|bigg|Bigg)\b/g, "")
    .replace(/\\([A-Za-z]+)\s*|\\(.)/g, (m, word, mark) => {
      const name = word || mark;
      return name in SYMBOLS ? SYMBOLS[name] : name;
    })
    .replace(/[{}]/g, "").replace(/\s+/g, " ").trim();

  /* Sphinx's search builds each snippet from the page's HTML, where math is still TeX: read it as text first. */
  const patchSearch = () => {
    if (typeof Search === "undefined" || !Search.htmlToText || Search.inferlabPlain) { return; }
    const original = Search.htmlToText;
    Search.htmlToText = (htmlString, anchor) => {
      const doc = new DOMParser().parseFromString(htmlString, "text/html");
      for (const el of doc.querySelectorAll(".math")) {
        el.textContent = " " + plainTex(el.textContent.replace(/^\s*(\\\(|\\\[|\$\$?)|(\\\)|\\\]|\$\$?)\s*$/g, "")) + " ";
      }
      return original(doc.documentElement.outerHTML, anchor);
    };
    Search.inferlabPlain = true;
  };
  patchSearch();
  document.addEventListener("DOMContentLoaded", patchSearch);
  window.inferlabPlainTex = plainTex;
})();
