// The Tasks page's live updates (progressive enhancement: without this script the page is whole,
// and a reload shows what is new). It follows the ledger's whole event stream, untyped (every
// event a plain `message`), from the last event sealed when the page was read; when events of
// tasks come it fetches the page again, at its own address (so with its filters, search and
// cursor, which the server applies as it did), at most once a second, and puts the fresh
// counts and list in place: a new task that matches appears, a status changes, the counts
// move. The filter form is never replaced, so what is being typed there stays.
"use strict";
(function () {
  var counts = document.getElementById("task-counts");
  var list = document.getElementById("task-list");
  if (!counts || !list || typeof EventSource === "undefined") {
    return;
  }
  var after = counts.getAttribute("data-after") || "0";
  var source = new EventSource("/v1/events/stream?typed=false&after=" + encodeURIComponent(after));
  var MIN_GAP_MS = 1000;
  var last = 0;
  var timer = null;
  var fetching = false;
  var again = false;

  function say(text) {
    var status = document.getElementById("live-status");
    if (status) {
      status.textContent = text;
    }
  }

  function refresh() {
    timer = null;
    if (fetching) {
      again = true;
      return;
    }
    fetching = true;
    last = Date.now();
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (!response.ok) {
          throw new Error(String(response.status));
        }
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        var freshCounts = fresh.getElementById("task-counts");
        var freshList = fresh.getElementById("task-list");
        if (freshCounts && freshList) {
          counts.innerHTML = freshCounts.innerHTML;
          list.innerHTML = freshList.innerHTML;
          say("Updated live.");
        }
      })
      .catch(function () {
        say("Tasks changed: reload the page to see them.");
      })
      .then(function () {
        fetching = false;
        if (again) {
          again = false;
          schedule();
        }
      });
  }

  function schedule() {
    if (timer !== null) {
      return;
    }
    timer = window.setTimeout(refresh, Math.max(0, last + MIN_GAP_MS - Date.now()));
  }

  source.onmessage = function (message) {
    try {
      if (!JSON.parse(message.data).task_id) {
        return; // not a task's event (a token issued, a checkpoint): the list is the same
      }
    } catch (ignored) {
      // not the ledger's JSON: refresh all the same
    }
    schedule();
  };
})();
