// rsk ui: refreshes the page's live part (#live) from the server, at most every data-every ms and never
// while the tab is hidden or while the human is filling in a form. The server renders and escapes every
// part; this script only swaps what it sent. No inline script exists on the page (its CSP forbids it).
//
// Cards never move under the human's hand: while the pointer rests on the cards (on a device with a mouse) or
// a form has the focus or an edit, a change waits (body.held says so); and after any change, and after the
// page loads, Approve and Deny stay disabled for SETTLE_MS, so a click aimed at what was there a moment ago
// (a card the agent withdrew moved the others up; a double click on Approve landed on the next page) does
// nothing.
"use strict";
(function () {
  if (document.body && document.body.getAttribute("data-bounce") === "1") {
    // opened from another site, so the browser left the session cookie out: open it again from here (a URL
    // that differs only in its #fragment would not load again: the fragment waits in sessionStorage)
    if (location.hash) {
      sessionStorage.setItem("rsk-hash", location.hash);
    }
    location.replace(location.pathname + location.search);
    return;
  }
  var hash = sessionStorage.getItem("rsk-hash");
  if (hash) {
    sessionStorage.removeItem("rsk-hash");
    location.hash = hash;
  }
  var live = document.getElementById("live");
  if (!live) {
    return;
  }
  var every = Math.max(2000, Number(live.getAttribute("data-every")) || 2000);
  var src = live.getAttribute("data-src");
  var digest = live.getAttribute("data-digest") || "";
  var timer = null;
  var SETTLE_MS = 1500;
  var settling = null;
  var mouse = !!(window.matchMedia && window.matchMedia("(hover: hover)").matches);

  function settle() {
    var buttons = live.querySelectorAll("form.act button");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].disabled = true;
    }
    document.body.classList.add("settling");
    clearTimeout(settling);
    settling = setTimeout(function () {
      var now = live.querySelectorAll("form.act button");
      for (var j = 0; j < now.length; j++) {
        now[j].disabled = false;
      }
      document.body.classList.remove("settling");
    }, SETTLE_MS);
  }

  function typing() {
    var active = document.activeElement;
    if (active && live.contains(active) && /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(active.tagName)) {
      return true;
    }
    var fields = live.querySelectorAll("input[type=text], input[type=number]");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value !== fields[i].defaultValue) {
        return true;
      }
    }
    return false;
  }

  function engaged() {
    // the human is at the cards: typing, a form focused, or (with a mouse) pointing at a card's acts
    if (typing()) {
      return true;
    }
    return mouse && live.querySelector("form.act") !== null && live.matches(":hover");
  }

  function openDetails() {
    var open = {};
    var all = live.querySelectorAll("details[id]");
    for (var i = 0; i < all.length; i++) {
      open[all[i].id] = all[i].open;
    }
    return open;
  }

  function restore(open) {
    var all = live.querySelectorAll("details[id]");
    for (var i = 0; i < all.length; i++) {
      if (Object.prototype.hasOwnProperty.call(open, all[i].id)) {
        all[i].open = open[all[i].id];
      }
    }
  }

  function title() {
    var waiting = live.querySelector("[data-pending]");
    if (waiting) {
      var n = Number(waiting.getAttribute("data-pending")) || 0;
      document.title = (n ? "(" + n + ") " : "") + document.title.replace(/^\(\d+\) /, "");
    }
  }

  function schedule() {
    clearTimeout(timer);
    timer = document.hidden ? null : setTimeout(tick, every);
  }

  function tick() {
    if (document.hidden) {
      schedule();
      return;
    }
    fetch(src, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 403) {
          document.body.classList.add("signed-out");
          return null;
        }
        var next = r.headers.get("x-rsk-digest") || "";
        if (!r.ok || next === digest) {
          return null;
        }
        return r.text().then(function (html) {
          if (engaged()) {
            document.body.classList.add("held");
            return;
          }
          var open = openDetails();
          live.innerHTML = html;
          restore(open);
          settle();
          title();
          digest = next;
          document.body.classList.remove("held");
        });
      })
      .catch(function () {})
      .then(schedule);
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) {
      tick();
    } else {
      clearTimeout(timer);
    }
  });
  settle();
  title();
  schedule();
})();
