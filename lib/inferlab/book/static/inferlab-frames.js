// Offline sliders: each figure.inferlab-frames holds frames drawn at build time; the range input shows one.
function inferlabFrames() {
  for (const fig of document.querySelectorAll("figure.inferlab-frames")) {
    const frames = fig.querySelectorAll(".inferlab-frame");
    const input = fig.querySelector("input[type=range]");
    const out = fig.querySelector("output");
    const show = () => {
      const i = Number(input.value);
      frames.forEach((frame, k) => { frame.hidden = k !== i; });
      out.textContent = frames[i].dataset.label;
    };
    input.addEventListener("input", show);
    show();
  }
}
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", inferlabFrames);
} else {
  inferlabFrames();
}
