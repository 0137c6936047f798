// rsk ui: refreshes the page's live part (#live) from the server, at most every data-every ms and never
// while the tab is hidden or while the human is filling in a form. The server renders and escapes every
// part; this script only swaps what it sent. No inline script exists on the page (its CSP forbids it).
//
// Cards never move under the human's hand: while the pointer rests on the cards (on a device with a mouse) or
// a form has the focus or an edit, a change waits (body.held says so); and after any change, and after the
// page loads, Approve and Deny stay disabled for SETTLE_MS, so a click aimed at what was there a moment ago
// (a double click on Approve that lands on the next page) does nothing. A change that would move the cards
// shown (one left the list: the agent withdrew it, or it was decided elsewhere) never lands by itself: the
// card that left is greyed in its place and the rest stay put until the human asks for the new list.
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
  var waiting = null; // a change that would move the cards, until the human asks for it
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

  function title(root) {
    var waiting = (root || live).querySelector("[data-pending]");
    if (waiting) {
      var n = Number(waiting.getAttribute("data-pending")) || 0;
      document.title = (n ? "(" + n + ") " : "") + document.title.replace(/^\(\d+\) /, "");
    }
  }

  function apply(html, next) {
    var open = openDetails();
    live.innerHTML = html;
    restore(open);
    settle();
    title();
    digest = next;
    waiting = null;
    document.body.classList.remove("held");
    var notice = document.getElementById("changed");
    if (notice) {
      notice.hidden = true;
    }
  }

  function pendingIds(root) {
    var out = [];
    var all = root.querySelectorAll("article.card.pending");
    for (var i = 0; i < all.length; i++) {
      out.push(all[i].id);
    }
    return out;
  }

  function onlyAdded(before, after) {
    // the cards shown stay where they are: none left, none moved; new ones come after them
    if (after.length < before.length) {
      return false;
    }
    for (var i = 0; i < before.length; i++) {
      if (before[i] !== after[i]) {
        return false;
      }
    }
    return true;
  }

  function stale(before, after, html, next) {
    // a card left the list (withdrawn, decided elsewhere): the cards below it would move up. Nothing moves
    // until the human asks; the card that left is greyed where it is and its buttons are off.
    waiting = { html: html, next: next };
    for (var i = 0; i < before.length; i++) {
      if (after.indexOf(before[i]) < 0) {
        var card = document.getElementById(before[i]);
        if (card && !card.classList.contains("gone")) {
          card.classList.add("gone");
          var buttons = card.querySelectorAll("button");
          for (var j = 0; j < buttons.length; j++) {
            buttons[j].disabled = true;
          }
          var badge = card.querySelector(".badge");
          if (badge) {
            badge.textContent = "no longer waits";
          }
        }
      }
    }
    var notice = document.getElementById("changed");
    if (!notice) {
      notice = document.createElement("div");
      notice.id = "changed";
      notice.setAttribute("role", "status");
      var text = document.createElement("span");
      text.textContent = "A card no longer waits (withdrawn or decided elsewhere). The others stay where they are. ";
      var show = document.createElement("button");
      show.type = "button";
      show.textContent = "Show the cards now";
      show.addEventListener("click", function () {
        if (waiting) {
          apply(waiting.html, waiting.next);
        }
      });
      notice.appendChild(text);
      notice.appendChild(show);
      document.body.appendChild(notice);
    }
    notice.hidden = false;
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
          var incoming = document.createElement("template"); // parsed inert: nothing in it runs or loads
          incoming.innerHTML = html;
          var before = pendingIds(live);
          var after = pendingIds(incoming.content);
          if (!onlyAdded(before, after)) {
            stale(before, after, html, next);
            title(incoming.content);
            return;
          }
          apply(html, next);
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
