// Tenure dashboard refresher. The pages work without it; with it, a page marked
// data-refresh reloads its content at the interval picked in the header, and stops
// while the tab is hidden. No other script runs, nothing is inline (strict CSP).
(function () {
  "use strict";
  var KEY = "tenure.refresh";
  var timer = null;
  var busy = false;

  function seconds(select) {
    var n = parseInt(select.value, 10);
    return isNaN(n) ? 0 : n;
  }

  // Leaves the page alone while someone is choosing or typing in it.
  function userIsBusy(main) {
    var active = document.activeElement;
    if (active && main.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName)) {
      return true;
    }
    return main.querySelector("input[type=checkbox]:checked") !== null;
  }

  function reload() {
    var main = document.getElementById("content");
    if (!main || busy || document.hidden || userIsBusy(main)) return;
    busy = true;
    fetch(window.location.href, { headers: { "Accept": "text/html" }, credentials: "same-origin" })
      .then(function (res) { return res.ok ? res.text() : null; })
      .then(function (text) {
        if (text === null) return;
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.getElementById("content");
        if (fresh && !userIsBusy(main)) main.replaceChildren.apply(main, Array.from(fresh.childNodes));
      })
      .catch(function () { /* the next tick tries again */ })
      .then(function () { busy = false; });
  }

  function schedule(select) {
    if (timer !== null) { clearInterval(timer); timer = null; }
    var s = seconds(select);
    if (s > 0 && !document.hidden) timer = setInterval(reload, s * 1000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (!document.body.hasAttribute("data-refresh")) return;
    var select = document.getElementById("refresh");
    if (!select) return;
    var saved = null;
    try { saved = window.localStorage.getItem(KEY); } catch (e) { saved = null; }
    if (saved !== null && select.querySelector("option[value='" + saved.replace(/[^0-9]/g, "") + "']")) {
      select.value = saved;
    } else if (select.querySelector("option[value='5']")) {
      select.value = "5";
    }
    select.parentElement.hidden = false;
    select.addEventListener("change", function () {
      try { window.localStorage.setItem(KEY, select.value); } catch (e) { /* private mode */ }
      schedule(select);
    });
    document.addEventListener("visibilitychange", function () {
      if (document.hidden) {
        if (timer !== null) { clearInterval(timer); timer = null; }
      } else {
        reload();
        schedule(select);
      }
    });
    schedule(select);
  });
})();
