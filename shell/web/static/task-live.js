// The task page's live updates (progressive enhancement: without this script the page is whole,
// and a reload shows what is new). It follows the ledger's event stream for this task from the
// last event the page shows; on each event it fetches the page again and puts its record in
// place, unless a field of a form is being filled in (then it says so and waits for the next).
"use strict";
(function () {
  var record = document.getElementById("task-record");
  if (!record || typeof EventSource === "undefined") {
    return;
  }
  var taskId = record.getAttribute("data-task-id");
  var after = record.getAttribute("data-after") || "0";
  // Untyped (`typed=false`): every event comes as a plain `message`, whatever its type, so that
  // no list of the ledger's event types is needed here (a new one is never missed).
  var url = "/v1/events/stream?typed=false&task_id=" + encodeURIComponent(taskId) + "&after=" + encodeURIComponent(after);
  var source = new EventSource(url);
  var pending = false;

  function say(text) {
    var status = document.getElementById("live-status");
    if (status) {
      status.textContent = text;
    }
  }

  function busy() {
    var active = document.activeElement;
    return !!(active && active.form && record.contains(active) && active.value);
  }

  function refresh(kind) {
    if (busy()) {
      pending = true;
      say("New event " + kind + ": reload the page to see it.");
      return;
    }
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (!response.ok) {
          throw new Error(String(response.status));
        }
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("task-record");
        if (fresh) {
          record.innerHTML = fresh.innerHTML;
          record.setAttribute("data-after", fresh.getAttribute("data-after") || after);
          pending = false;
          say("Updated live: " + kind + ".");
        }
      })
      .catch(function () {
        say("New event " + kind + ": reload the page to see it.");
      });
  }

  source.onmessage = function (message) {
    var kind = "an event";
    try {
      kind = JSON.parse(message.data).event_type || kind;
    } catch (ignored) {
      // not the ledger's JSON: refresh all the same
    }
    refresh(kind);
  };
  document.addEventListener("focusout", function () {
    if (pending) {
      refresh("(held while you typed)");
    }
  });
})();
