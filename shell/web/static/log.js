// The Log page while a verify run walks the log: ask the server how far it is every second
// and show it; at the end, load the page again for the result and its findings.
(function () {
  "use strict";
  const run = document.getElementById("verify-run");
  if (!run || run.dataset.running !== "true") {
    return;
  }
  const bar = document.getElementById("verify-progress");
  const count = document.getElementById("verify-count");
  async function poll() {
    const answer = await fetch("/log/verify/progress", { credentials: "same-origin" });
    if (!answer.ok) {
      return;
    }
    const state = (await answer.json()).run;
    if (state === null) {
      return;
    }
    bar.max = Math.max(1, state.total);
    bar.value = state.done;
    count.textContent = state.done + " of " + state.total + " events";
    if (state.running) {
      window.setTimeout(poll, 1000);
    } else {
      window.location.reload();
    }
  }
  window.setTimeout(poll, 1000);
})();
