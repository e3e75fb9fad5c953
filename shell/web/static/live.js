// The live updates of the Tasks page and of a task's page (progressive enhancement: without this
// script each page is whole, and a reload shows what is new). The page marks what may change with
// `data-live` (the Tasks page its counts and its list, a task's page its record); the first such
// region says where the stream starts (`data-after`: the last event when the page was read, on a
// task's page the task's last) and, on a task's page, of which task (`data-task-id`). The stream is untyped (every event a plain
// `message`, its type in its data), so no list of the ledger's event types is needed here and a
// new type is never missed; on a reconnect the browser sends `Last-Event-ID`, so none is missed.
// When an event of a task comes, the page is fetched again at its own address (the server applies
// its filters, search and cursor as it did), at most once a second however busy the ledger, and
// each region's fresh content is put in place. A region holding a form field being filled in is
// left alone until focus leaves it, so that typing is never lost; the status line says so.
"use strict";
(function () {
  var regions = Array.prototype.slice.call(document.querySelectorAll("[data-live]"));
  if (regions.length === 0 || typeof EventSource === "undefined") {
    return;
  }
  var first = regions[0];
  var query = "typed=false&after=" + encodeURIComponent(first.getAttribute("data-after") || "0");
  var taskId = first.getAttribute("data-task-id");
  if (taskId) {
    query += "&task_id=" + encodeURIComponent(taskId);
  }
  var source = new EventSource("/v1/events/stream?" + query);
  var MIN_GAP_MS = 1000;
  var last = 0;
  var timer = null;
  var fetching = false;
  var again = false;
  var held = false;
  var kind = "an event";

  function say(text) {
    var status = document.getElementById("live-status");
    if (status) {
      status.textContent = text;
    }
  }

  function typing() {
    var active = document.activeElement;
    return !!(active && active.form && active.value && regions.some(function (region) {
      return region.contains(active);
    }));
  }

  function refresh() {
    timer = null;
    if (fetching) {
      again = true;
      return;
    }
    if (typing()) {
      held = true;
      say("New event " + kind + ": it shows once you leave the field, or on a reload.");
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
        regions.forEach(function (region) {
          var replacement = fresh.getElementById(region.id);
          if (replacement) {
            region.innerHTML = replacement.innerHTML;
          }
        });
        held = false;
        say("Updated live: " + kind + ".");
      })
      .catch(function () {
        say("New event " + kind + ": reload the page to see it.");
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
      var event = JSON.parse(message.data);
      if (!event.task_id) {
        return; // not a task's event (a token issued, a checkpoint): no page here changes
      }
      kind = event.event_type || kind;
    } catch (ignored) {
      // not the ledger's JSON: refresh all the same
    }
    schedule();
  };
  document.addEventListener("focusout", function () {
    if (held) {
      schedule();
    }
  });
})();
