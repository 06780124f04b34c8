/* "Try it live" runs the notebooks in JupyterLite, on Pyodide loaded from its CDN (inferlab.book.sphinx_offline).
   Where Pyodide cannot load (offline, the CDN out of reach) or JupyterLite cannot start at all (the book opened from
   file://), say so in one sentence, with what to do, instead of a spinner or a cell stuck at [*]:

   - on every page of the lite site (sphinx_offline adds this script to each, with the Pyodide URL its kernel loads):
     a bar along the bottom of the page (over the status bar, where the kernel's state shows; JupyterLab's menus stay
     free), at once from file://, else when Pyodide does not answer within TIMEOUT_MS;
   - in the book's "Try it live" banner: at once from file://; else Pyodide is checked when the reader points at or
     focuses the link (no request leaves the page before), and a click waits for that check: where Pyodide cannot
     load, the banner says so instead of opening a page that cannot run (a second click opens it all the same).

   The outcome is also written to the banner's (or the lite page's root element's) data-pyodide attribute:
   checking, ok, unreachable or file. */
(function () {
  "use strict";
  var TIMEOUT_MS = 10000;
  var BANNER_TIMEOUT_MS = 5000;

  function host(url) {
    try { return new URL(url, document.baseURI).host || url; } catch (e) { return url; }
  }

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }

  /* "run `make lab` in a clone of the book's repository", the repository linked where it is known */
  function makeLab(repository) {
    var repo = repository ? '<a href="' + escapeHtml(repository) + '">the book\'s repository</a>'
                          : "the book's repository";
    return "run <code>make lab</code> in a clone of " + repo;
  }

  /* The one sentence for each outcome, as HTML: where this page is the lite app, or the book's banner. */
  function sentence(kind, where, url, repository) {
    var todo = makeLab(repository);
    if (kind === "file") {
      return (where === "lite" ? "JupyterLite cannot start from files opened on disk (file://)"
                               : "needs the book served over the web, as JupyterLite cannot start from file://")
        + ": open the book online, or " + todo + ".";
    }
    return (where === "lite"
      ? "Pyodide, the Python these notebooks run on in your browser, could not be loaded from "
        + escapeHtml(host(url)) + ", so no cell can run here"
      : "needs Pyodide from " + escapeHtml(host(url)) + ", which this browser cannot reach now")
      + ": open the book again when online, or " + todo + ".";
  }

  /* Resolves true when ``url`` answers with a success (fetched as the kernel's module import fetches it: CORS),
     false on a network error, an HTTP error or no answer within ``timeout``. */
  function probe(url, timeout) {
    return new Promise(function (resolve) {
      var done = false;
      var ctrl = typeof AbortController === "function" ? new AbortController() : null;
      function finish(ok) {
        if (done) { return; }
        done = true;
        clearTimeout(timer);
        if (!ok && ctrl) { ctrl.abort(); }
        resolve(ok);
      }
      var timer = setTimeout(function () { finish(false); }, timeout);
      try {
        fetch(url, {method: "HEAD", mode: "cors", cache: "no-store", credentials: "omit",
                    signal: ctrl ? ctrl.signal : undefined})
          .then(function (r) { finish(!!r.ok); }, function () { finish(false); });
      } catch (e) {
        finish(false);
      }
    });
  }

  /* The lite app: a bar along the bottom of the page, over JupyterLab and its loading indicator. */
  function liteBar(kind, url, repository) {
    var bar = document.getElementById("inferlab-lite-status");
    if (!bar) {
      bar = document.createElement("div");
      bar.id = "inferlab-lite-status";
      bar.setAttribute("role", "alert");
      bar.style.cssText = "position:fixed;bottom:0;left:0;right:0;z-index:100000;padding:0.6em 2.6em 0.6em 1em;"
        + "font:15px/1.4 -apple-system,BlinkMacSystemFont,'Segoe UI',Helvetica,Arial,sans-serif;"
        + "background:#fff3cd;color:#3d3000;border-top:2px solid #d9a400;";
      var text = document.createElement("span");
      text.className = "inferlab-lite-status-text";
      var close = document.createElement("button");
      close.type = "button";
      close.setAttribute("aria-label", "Dismiss");
      close.textContent = "\u00d7";
      close.style.cssText = "position:absolute;top:0.3em;right:0.6em;border:0;background:none;font-size:1.4em;"
        + "cursor:pointer;color:inherit;";
      close.addEventListener("click", function () { bar.remove(); });
      bar.appendChild(text);
      bar.appendChild(close);
      document.body.appendChild(bar);
    }
    bar.querySelector(".inferlab-lite-status-text").innerHTML = sentence(kind, "lite", url, repository);
  }

  function onLitePage(script) {
    var url = script.getAttribute("data-pyodide-url");
    var repository = script.getAttribute("data-repository");
    var root = document.documentElement;
    function show(kind) {
      root.setAttribute("data-pyodide", kind);
      if (kind === "ok") { return; }
      if (document.body) { liteBar(kind, url, repository); }
      else { document.addEventListener("DOMContentLoaded", function () { liteBar(kind, url, repository); }); }
    }
    if (location.protocol === "file:") { show("file"); return; }
    if (!url) { return; }
    root.setAttribute("data-pyodide", "checking");
    probe(url, TIMEOUT_MS).then(function (ok) { show(ok ? "ok" : "unreachable"); });
  }

  function onBanner(banner) {
    var link = banner.querySelector("a");
    var url = banner.getAttribute("data-pyodide-url");
    var repository = banner.getAttribute("data-repository");
    if (!link || !url) { return; }
    function explain(kind) {
      banner.setAttribute("data-pyodide", kind);
      var note = document.createElement("span");
      note.className = "inferlab-try-live-status";
      note.innerHTML = " " + sentence(kind, "banner", url, repository);
      while (link.nextSibling) { banner.removeChild(link.nextSibling); }
      banner.appendChild(note);
    }
    if (location.protocol === "file:") { explain("file"); return; }
    var check = null;
    function start() {
      if (!check) {
        banner.setAttribute("data-pyodide", "checking");
        check = probe(url, BANNER_TIMEOUT_MS).then(function (ok) {
          if (ok) { banner.setAttribute("data-pyodide", "ok"); } else { explain("unreachable"); }
          return ok;
        });
      }
      return check;
    }
    ["pointerenter", "focus", "touchstart"].forEach(function (name) {
      link.addEventListener(name, start, {passive: true});
    });
    var told = false;
    link.addEventListener("click", function (event) {
      var state = banner.getAttribute("data-pyodide");
      if (state === "ok" || told || event.ctrlKey || event.metaKey || event.shiftKey || event.button) { return; }
      event.preventDefault();
      start().then(function (ok) {
        told = true;
        if (ok) { location.href = link.href; }
      });
    });
  }

  var script = document.currentScript;
  if (script && script.hasAttribute("data-inferlab-lite")) {
    onLitePage(script);
    return;
  }
  function banners() {
    var found = document.querySelectorAll("div.inferlab-try-live[data-pyodide-url]");
    for (var i = 0; i < found.length; i++) { onBanner(found[i]); }
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", banners); }
  else { banners(); }
})();
