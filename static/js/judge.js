// The judging screen: one keystroke per judgment, active-time measurement, and an instant swap
// to the next document (prefetched into <template id="upcoming">) while the verdict is saved.
// Without JavaScript the same page works as a plain form that posts and redirects.
(function () {
  "use strict";

  var activeMs = 0;
  var since = null; // when the current active stretch began (tab visible and focused)

  function isActive() {
    return document.visibilityState === "visible" && document.hasFocus();
  }
  function pause() {
    if (since !== null) { activeMs += performance.now() - since; since = null; }
  }
  function resume() {
    if (since === null && isActive()) { since = performance.now(); }
  }
  function resetTimer() {
    activeMs = 0; since = null; resume();
  }
  function currentActiveMs() {
    return Math.round(activeMs + (since !== null ? performance.now() - since : 0));
  }
  document.addEventListener("visibilitychange", function () { isActive() ? resume() : pause(); });
  window.addEventListener("focus", resume);
  window.addEventListener("blur", pause);

  function form() { return document.getElementById("judge-form"); }

  function typing(target) {
    var tag = target && target.tagName;
    return tag === "TEXTAREA" || tag === "SELECT" || (tag === "INPUT" && target.type !== "checkbox");
  }

  function showUpcoming() {
    // Optimistic swap: show the prefetched next document at once; the server's answer (the same
    // document, with fresh form tokens) replaces the whole panel a moment later.
    var upcoming = document.getElementById("upcoming");
    var pane = document.querySelector(".doc-pane");
    if (!upcoming || !pane) { return; }
    pane.replaceChildren(upcoming.content.cloneNode(true));
    pane.scrollTop = 0;
    document.getElementById("judge").classList.add("saving");
  }

  function stampActiveTime() {
    var field = document.querySelector("#judge-form .active-ms");
    if (field) { field.value = String(currentActiveMs()); }
  }

  function choose(button) {
    var f = form();
    if (!f || button.disabled) { return; }
    stampActiveTime();
    // A real click, so htmx (and a browser without it) sends the button's label with the form.
    button.click();
  }

  function toggleHelp() {
    var dialog = document.getElementById("keys-help");
    if (!dialog) { return; }
    if (dialog.open) { dialog.close(); } else { dialog.showModal(); }
  }

  document.addEventListener("submit", function (event) {
    if (event.target.id !== "judge-form") { return; }
    stampActiveTime();
    var unjudged = document.querySelector("#judge-form input[name=version]");
    // Prefetched documents are only shown when this verdict moves on to a new document.
    if (window.htmx && unjudged && unjudged.value === "0") { showUpcoming(); }
  }, true);

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (typing(event.target)) {
      if (event.key === "Escape") { event.target.blur(); }
      return;
    }
    var dialog = document.getElementById("keys-help");
    if (event.key === "?") { event.preventDefault(); toggleHelp(); return; }
    if (dialog && dialog.open) { return; }
    if (event.key === "[" || event.key === "]") {
      var link = document.querySelector('[data-nav="' + (event.key === "[" ? "previous" : "next") + '"]');
      if (link && link.tagName === "A") { event.preventDefault(); link.click(); }
      return;
    }
    var buttons = document.querySelectorAll("#judge-form .label-button");
    for (var i = 0; i < buttons.length; i++) {
      if (buttons[i].dataset.key === event.key) {
        event.preventDefault();
        choose(buttons[i]);
        return;
      }
    }
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest(".help-toggle")) { toggleHelp(); }
  });

  // A new document is on screen: restart the active-time clock and put focus where reading is.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "judge" || document.getElementById("judge")) {
      resetTimer();
      var pane = document.querySelector(".doc-pane");
      if (pane) { pane.scrollTop = 0; pane.focus({ preventScroll: true }); }
    }
  });
  // A failed save (network error): put the document back and say so, nothing is lost.
  document.addEventListener("htmx:sendError", function () {
    var judge = document.getElementById("judge");
    if (judge) { judge.classList.remove("saving"); judge.classList.add("offline"); }
    window.alert("The judgment could not be sent (no connection?). Nothing was saved; try again.");
    window.location.reload();
  });

  document.addEventListener("DOMContentLoaded", function () {
    resetTimer();
    var pane = document.querySelector(".doc-pane");
    if (pane) { pane.focus({ preventScroll: true }); }
  });
})();
