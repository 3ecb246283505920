// The judging screen (docs/judging-protocol.md): one keystroke per judgment, the prefetched next
// document shown at once, verdicts sent one at a time and in order, keys typed while nothing is on
// screen kept for the document they were meant for (or refused, visibly), topic breaks, and an
// aria-live status. Without JavaScript the same page is a plain form that posts and redirects.
(function () {
  "use strict";

  // --- Active time: seconds the tab was visible and focused on this document. -------------------
  var activeMs = 0;
  var since = null;
  function isActive() { return document.visibilityState === "visible" && document.hasFocus(); }
  function pause() { if (since !== null) { activeMs += performance.now() - since; since = null; } }
  function resume() { if (since === null && isActive()) { since = performance.now(); } }
  function resetTimer() { activeMs = 0; since = null; resume(); }
  function currentActiveMs() {
    return Math.round(activeMs + (since !== null ? performance.now() - since : 0));
  }
  document.addEventListener("visibilitychange", function () { isActive() ? resume() : pause(); });
  window.addEventListener("focus", resume);
  window.addEventListener("blur", pause);

  // --- State. ------------------------------------------------------------------------------------
  // "doc": a document is on screen and takes keys; "waiting": the next document has not arrived,
  // keys wait for it; "break": a new topic's card is shown, label keys do nothing until Enter.
  var mode = "doc";
  var queue = [];    // verdicts and skips to send, oldest first (queue[0] is in flight when sending)
  var sending = false;
  var failures = 0;
  var waiting = [];  // actions typed in "waiting" mode, for the document that comes next
  var pendingNav = null;
  var RETRIES = 6;

  function $(selector, root) { return (root || document).querySelector(selector); }
  function panel() { return document.getElementById("judge"); }
  function form() { return document.getElementById("judge-form"); }
  function narrow() { return window.matchMedia("(max-width: 820px), (max-height: 560px)").matches; }

  function typing(target) {
    var tag = target && target.tagName;
    return tag === "TEXTAREA" || tag === "SELECT" || (tag === "INPUT" && target.type !== "checkbox");
  }

  // --- What the page says. -----------------------------------------------------------------------
  var fade = null;
  function announce(text) {
    var status = document.getElementById("judge-status");
    if (!status || !text) { return; }
    // Emptied first, so that the same sentence twice is announced twice.
    status.textContent = "";
    status.classList.add("shown");
    window.setTimeout(function () { status.textContent = text; }, 30);
    window.clearTimeout(fade);
    fade = window.setTimeout(function () { status.classList.remove("shown"); }, 6000);
  }

  var notice = null; // a refusal stays on screen until the next action
  function keyList(actions) {
    return actions.map(function (a) { return a.kind === "skip" ? "skip" : a.key; }).join(", ");
  }
  function showQueue() {
    // What is not saved yet, for the page (and for tests that wait until everything is).
    document.body.dataset.unsaved = String(queue.length + waiting.length);
    var box = document.getElementById("judge-queue");
    if (!box) { return; }
    var text = "";
    if (notice) {
      text = notice;
    } else if (waiting.length) {
      text = "Waiting for the next document: " + keyList(waiting) + " will apply to it.";
    } else if (queue.length > 1 || (queue.length && mode === "waiting")) {
      text = "Saving " + queue.length + "…";
    }
    box.textContent = text;
    box.hidden = !text;
    box.classList.toggle("refused", !!notice);
  }
  function refuse(actions, reason) {
    if (!actions.length) { return; }
    notice = "Not applied: " + keyList(actions) + " — " + reason;
    announce(notice);
    showQueue();
  }

  // --- Showing a document. -----------------------------------------------------------------------
  function reveal() {
    // Every swap: the document (or the topic break) starts at its title, in the pane and, on a
    // phone where the window scrolls, in the window; focus goes where reading is.
    var pane = $(".doc-pane");
    if (!pane) {
      var heading = $("#judge h1");
      window.scrollTo(0, 0);
      if (heading) { heading.focus({ preventScroll: true }); }
      return;
    }
    pane.scrollTop = 0;
    var title = $(".topic-break h2", pane) || $(".doc-view .doc-title", pane) || pane;
    if (narrow()) {
      var top = title.getBoundingClientRect().top + window.pageYOffset - 8;
      window.scrollTo(0, Math.max(0, top));
    } else {
      window.scrollTo(0, 0);
    }
    pane.focus({ preventScroll: true });
  }

  function setField(name, value) {
    var field = $('#judge-form input[name="' + name + '"]');
    if (field) { field.value = value; }
  }

  function setLink(name, href) {
    var link = $('#judge [data-nav="' + name + '"]');
    if (link && href) { link.setAttribute("href", href); link.removeAttribute("aria-disabled"); }
  }

  function showUpcoming(template) {
    // The prefetched document becomes the current one: its text, its form state, its links.
    var judge = panel();
    var f = form();
    var data = template.dataset;
    var left = judge.dataset.url;
    $(".doc-view", judge).replaceChildren(template.content.cloneNode(true));
    template.remove();
    judge.dataset.item = data.token;
    judge.dataset.url = data.url;
    judge.classList.remove("waiting");
    f.action = data.url;
    setField("submission", data.submission);
    setField("version", "0");
    setField("served", data.served);
    setField("active_ms", "");
    setField("note", "");
    f.querySelectorAll('input[type="checkbox"]').forEach(function (box) { box.checked = false; });
    f.querySelectorAll(".label-button").forEach(function (button) {
      button.classList.remove("chosen");
      button.setAttribute("aria-pressed", "false");
    });
    f.querySelectorAll(".conflict, .error").forEach(function (box) { box.remove(); });
    var skip = $(".skip-button", f);
    if (skip) { skip.formAction = data.skip; skip.disabled = false; skip.removeAttribute("title"); }
    setLink("previous", left);
    setLink("next", data.next);
    setLink("revise", data.revise);
    setLink("keys", data.keys);
    window.history.replaceState(null, "", data.url);
    var card = document.getElementById("upcoming-topic");
    judge.dataset.topic = data.topic;
    mode = "doc";
    if (card) {
      var old = $(".topic-card", judge);
      var fresh = card.content.firstElementChild;
      if (old && fresh) { old.replaceWith(document.importNode(fresh, true)); }
      card.remove();
      guidelinesFor(data.topic);
      topicChanged();
    }
    resetTimer();
    reveal();
  }

  function guidelinesFor(id) {
    // The guidelines panel's part for the topic: the new topic's narrative.
    var part = $("#guidelines .guidelines-topic");
    var narrative = $("#judge .topic-card .topic-narr p:last-child");
    if (!part) { return; }
    part.replaceChildren();
    if (narrative) {
      var heading = document.createElement("h3");
      heading.textContent = "For topic " + id;
      var text = document.createElement("p");
      text.textContent = narrative.textContent;
      part.append(heading, text);
    }
  }

  function topicChanged() {
    var card = $("#judge .topic-card");
    var title = card ? $("h1", card).textContent : "";
    var id = panel().dataset.topic;
    if (panel().dataset.breaks === "on") {
      startBreak(card);
    } else {
      announce("New topic: " + id + " — " + title);
    }
  }

  function startBreak(card) {
    // A new topic: its title, description and narrative, and nothing to judge until Enter.
    var pane = $("#judge .doc-pane");
    var id = panel().dataset.topic;
    var section = document.createElement("section");
    section.className = "topic-break";
    section.setAttribute("aria-labelledby", "break-title");
    var eyebrow = document.createElement("p");
    eyebrow.className = "eyebrow";
    eyebrow.textContent = "New topic · Topic " + id;
    var heading = document.createElement("h2");
    heading.id = "break-title";
    heading.tabIndex = -1;
    heading.textContent = card ? $("h1", card).textContent : "Topic " + id;
    section.append(eyebrow, heading);
    if (card) {
      ["topic-desc", "topic-narr"].forEach(function (name) {
        var part = $("." + name, card);
        if (part) { section.append(part.cloneNode(true)); }
      });
    }
    var hint = document.createElement("p");
    hint.className = "break-actions";
    var begin = document.createElement("button");
    begin.type = "button";
    begin.className = "primary begin-topic";
    begin.innerHTML = "<kbd>Enter</kbd> ";
    begin.append("Begin topic " + id);
    var note = document.createElement("span");
    note.className = "muted";
    note.textContent = "Read the topic first: label keys do nothing until you begin.";
    hint.append(begin, " ", note);
    section.append(hint);
    $(".doc-view", pane).hidden = true;
    pane.prepend(section);
    panel().classList.add("at-break");
    form().querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = true; });
    mode = "break";
    announce("New topic: " + id + " — " + heading.textContent + ". Press Enter to begin.");
    if (waiting.length) {
      refuse(waiting.splice(0), "topic " + id + " begins: read it, then press Enter.");
    }
  }

  function endBreak() {
    var section = $("#judge .topic-break");
    if (section) { section.remove(); }
    $("#judge .doc-view").hidden = false;
    panel().classList.remove("at-break");
    form().querySelectorAll("button[type=submit]").forEach(function (b) {
      b.disabled = b.classList.contains("skip-button") && $("#judge-form input[name=version]").value !== "0";
    });
    mode = "doc";
    announce("Topic " + panel().dataset.topic + ": first document.");
    resetTimer();
    reveal();
  }

  function replacePanel(fresh) {
    // A whole panel from the server (a document the page did not hold, a conflict, the done
    // panel): it replaces the old one; a new topic still gets its break.
    var before = panel().dataset.topic;
    panel().replaceWith(fresh);
    var judge = panel();
    mode = judge.classList.contains("done-panel") ? "done" : "doc";
    if (judge.dataset.url) { window.history.replaceState(null, "", judge.dataset.url); }
    resetTimer();
    if (mode === "doc" && before && judge.dataset.topic !== before) {
      topicChanged();
    }
    reveal();
  }

  function updateProgress(ack) {
    var progress = $("#judge .judge-progress");
    if (!progress || ack.dataset.topic !== panel().dataset.topic) { return; }
    var bar = $("progress", progress);
    var text = $(".progress-text", progress);
    if (bar) { bar.max = Number(ack.dataset.total); bar.value = Number(ack.dataset.judged); }
    if (text) {
      text.textContent = ack.dataset.judged + " of " + ack.dataset.total + " judged in topic " + ack.dataset.topic;
    }
  }

  // --- Acting on the document on screen. ---------------------------------------------------------
  function act(action) {
    notice = null;
    if (mode === "waiting") { waiting.push(action); showQueue(); return; }
    if (mode === "done") { refuse([action], "no document is left to judge."); return; }
    if (mode !== "doc") { return; }
    var f = form();
    var skip = $(".skip-button", f);
    if (action.kind === "skip" && (!skip || skip.disabled)) {
      refuse([action], "this document is judged already; choose a label to revise it.");
      return;
    }
    var fields = new FormData(f);
    fields.set("active_ms", String(currentActiveMs()));
    if (action.kind === "label") {
      fields.set("label", action.value);
      f.querySelectorAll(".label-button").forEach(function (button) {
        var chosen = button.value === action.value;
        button.classList.toggle("chosen", chosen);
        button.setAttribute("aria-pressed", chosen ? "true" : "false");
      });
    }
    var entry = {
      url: action.kind === "skip" ? skip.formAction : f.action,
      fields: fields,
      kind: action.kind,
      key: action.key,
      next: null,
    };
    queue.push(entry);
    var upcoming = document.getElementById("upcoming");
    if (upcoming && upcoming.dataset.token) {
      entry.next = upcoming.dataset.token;
      showUpcoming(upcoming);
    } else {
      // Nothing prefetched yet (it comes with the previous verdict's answer), or nothing else
      // is open ("none": the answer brings the document to show, or the done panel).
      if (upcoming) { entry.next = ""; }
      mode = "waiting";
      panel().classList.add("waiting");
    }
    showQueue();
    pump();
  }

  function flushWaiting() {
    while (waiting.length && mode === "doc") { act(waiting.shift()); }
    if (waiting.length && mode === "done") {
      refuse(waiting.splice(0), "no document is left to judge.");
    }
    showQueue();
  }

  // --- Sending, one at a time, in order. ---------------------------------------------------------
  function pump() {
    if (sending) { return; }
    if (!queue.length) {
      showQueue();
      if (pendingNav) { window.location.href = pendingNav; }
      return;
    }
    sending = true;
    var entry = queue[0];
    var body = new URLSearchParams();
    entry.fields.forEach(function (value, name) { body.append(name, value); });
    body.set("upcoming", entry.next || "");
    fetch(entry.url, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "HX-Request": "true", "X-CSRFToken": entry.fields.get("csrfmiddlewaretoken") || "" },
    }).then(function (response) {
      return response.text().then(function (text) {
        return { status: response.status, text: text, after: response.headers.get("Retry-After") };
      });
    }).then(function (answer) {
      if (answer.status >= 500 || answer.status === 429) {
        // Not confirmed (docs/judging-protocol.md): the same request again, after Retry-After.
        var busy = new Error("server " + answer.status);
        busy.after = Number(answer.after) * 1000 || 0;
        throw busy;
      }
      sending = false;
      failures = 0;
      queue.shift();
      received(answer.status, answer.text);
      pump();
    }).catch(function (error) {
      // The same request again (same submission id: a replay stores nothing twice).
      sending = false;
      failures += 1;
      if (failures <= RETRIES) {
        announce("Not confirmed yet: retrying…");
        var wait = Math.min(8000, 400 * Math.pow(2, failures - 1));
        window.setTimeout(pump, Math.max(wait, (error && error.after) || 0));
      } else {
        failures = 0;
        notice = "Not saved yet: no answer from the server. Your " + queue.length +
          " judgment(s) are kept; press Retry.";
        showQueue();
        offerRetry();
      }
    });
  }

  function offerRetry() {
    var box = document.getElementById("judge-queue");
    if (!box || $("button", box)) { return; }
    var button = document.createElement("button");
    button.type = "button";
    button.className = "retry";
    button.textContent = "Retry";
    button.addEventListener("click", function () { notice = null; button.remove(); pump(); });
    box.append(" ", button);
    announce(notice);
  }

  function showReveal(revealed) {
    // Reveal after deciding: the models' labels on the document just judged (only ever sent
    // with the answer to its verdict), above the document now on screen; an answer without
    // one clears the last. On a phone the window was scrolled to the title: bring it in view.
    var box = document.getElementById("judge-reveal");
    if (!box) { return; }
    box.replaceChildren();
    box.hidden = !revealed;
    if (!revealed) { return; }
    box.append.apply(box, Array.prototype.slice.call(revealed.childNodes));
    var top = box.getBoundingClientRect().top;
    if (narrow() && top < 0) { window.scrollBy(0, top - 8); }
  }

  function received(status, text) {
    var holder = document.createElement("template");
    holder.innerHTML = text;
    var answer = holder.content;
    var ack = $("#judge-answer", answer);
    var fresh = $("#judge", answer);
    var revealed = $("#judge-reveal-answer", answer);
    if (revealed) { revealed.remove(); }
    if (ack) { ack.remove(); }
    if (status === 409 || status === 400) {
      // Back to the document the server refused, with its notice; what was typed after it
      // belonged to documents the page no longer shows.
      var later = queue.splice(0).concat(waiting.splice(0));
      var alert = fresh && $("[role=alert]", fresh);
      if (fresh) { replacePanel(fresh); }
      announce(alert ? alert.textContent.replace(/\s+/g, " ").trim() : "Not saved.");
      refuse(later, "the page went back to a document that was not saved.");
      return;
    }
    if (!ack) {
      // Not an answer of the judging screen (a login page after the session ended, say).
      queue.splice(0);
      refuse(waiting.splice(0), "not saved.");
      notice = "Not saved: the server's answer was not understood (logged out?). Reload the page.";
      showQueue();
      return;
    }
    announce(ack.textContent);
    if (fresh) {
      // The page had no document it could show: the server sends the one to show, whole.
      if (mode !== "waiting") {
        refuse(queue.splice(0).concat(waiting.splice(0)),
          "the document on screen was no longer yours to judge.");
      }
      // A verdict still queued moved on to this document: its answer should prefetch after it.
      var pending = queue.length ? queue[queue.length - 1] : null;
      if (pending && pending.next === null && fresh.dataset.item) { pending.next = fresh.dataset.item; }
      replacePanel(fresh);
      showReveal(revealed);
      updateProgress(ack);
      flushWaiting();
      return;
    }
    showReveal(revealed);
    updateProgress(ack);
    var judge = panel();
    judge.querySelectorAll("#upcoming, #upcoming-topic").forEach(function (old) { old.remove(); });
    var upcoming = $("#upcoming", answer);
    var card = $("#upcoming-topic", answer);
    if (upcoming) { judge.append(upcoming); }
    if (card) { judge.append(card); }
    if (mode === "waiting" && upcoming) {
      var last = queue.length ? queue[queue.length - 1] : null;
      if (upcoming.dataset.token) {
        if (last && last.next === null) { last.next = upcoming.dataset.token; }
        showUpcoming(upcoming);
        flushWaiting();
      } else if (last && last.next === null) {
        last.next = "";
      }
    }
    showQueue();
  }

  // --- Commands. ---------------------------------------------------------------------------------
  function navigate(href) {
    if (!href) { return; }
    if (!queue.length && !sending) { window.location.href = href; return; }
    pendingNav = href;
    notice = "Saving, then opening…";
    showQueue();
  }

  function toggleHelp() {
    var dialog = document.getElementById("keys-help");
    if (!dialog) { return; }
    if (dialog.open) { dialog.close(); } else { dialog.showModal(); }
  }

  function termsHidden(hidden) {
    document.body.classList.toggle("terms-hidden", hidden);
    var toggle = $(".terms-toggle");
    if (toggle) { toggle.setAttribute("aria-pressed", hidden ? "false" : "true"); }
    try { window.localStorage.setItem("pooljudge.terms", hidden ? "off" : "on"); } catch (e) { /* private mode */ }
  }

  function toggleBox(name) {
    var box = $('#judge-form input[name="' + name + '"]');
    if (box && mode === "doc") { box.checked = !box.checked; }
  }

  function command(key) {
    // Commands bound from the keys list the page renders (assess/keys.py): a label took a
    // command's letter when it has no key here.
    var row = $('#keys-help [data-command][data-key="' + (key === '"' ? '\\"' : key) + '"]');
    return row ? row.dataset.command : null;
  }

  function labelFor(key) {
    var buttons = document.querySelectorAll("#judge-form .label-button");
    for (var i = 0; i < buttons.length; i++) {
      if (buttons[i].dataset.key === key) { return buttons[i]; }
    }
    return null;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (typing(event.target)) {
      if (event.key === "Escape") { event.target.blur(); }
      return;
    }
    if (event.key === "Escape") {
      var panelOpen = document.getElementById("guidelines");
      if (panelOpen && panelOpen.open) { panelOpen.open = false; }
      return;
    }
    var dialog = document.getElementById("keys-help");
    if (event.key === "?") { event.preventDefault(); toggleHelp(); return; }
    if (dialog && dialog.open) { return; }
    var judge = panel();
    if (!judge) { return; }
    if (judge.classList.contains("done-panel")) {
      if (event.key === "[" && judge.dataset.lastUrl) { event.preventDefault(); navigate(judge.dataset.lastUrl); }
      return;
    }
    var button = labelFor(event.key);
    var name = button ? "label" : command(event.key);
    if (mode === "break") {
      if (event.key === "Enter") { event.preventDefault(); endBreak(); return; }
      if (name === "label" || name === "skip") {
        // Label keys do nothing on a topic break; say so rather than stay silent.
        event.preventDefault();
        refuse([{ kind: name, key: event.key }], "read the new topic, then press Enter to begin.");
        return;
      }
    }
    if (!name) { return; }
    if (name === "label") {
      event.preventDefault();
      act({ kind: "label", value: button.value, key: event.key });
      return;
    }
    switch (name) {
      case "skip": event.preventDefault(); act({ kind: "skip", key: event.key }); break;
      case "previous": event.preventDefault(); navigate($('#judge [data-nav="previous"]').getAttribute("href")); break;
      case "next": event.preventDefault(); navigate($('#judge [data-nav="next"]').getAttribute("href")); break;
      case "revise": event.preventDefault(); navigate($('#judge [data-nav="revise"]').getAttribute("href")); break;
      case "unsure": event.preventDefault(); toggleBox("unsure"); break;
      case "unreadable": event.preventDefault(); toggleBox("unreadable"); break;
      case "note": event.preventDefault(); var note = $("#judge-form input[name=note]"); if (note) { note.focus(); } break;
      case "guidelines":
        event.preventDefault();
        var g = document.getElementById("guidelines");
        if (g) {
          g.open = !g.open;
          // On a phone the panel sits below the document: bring it into view when opened.
          if (g.open && narrow()) { g.scrollIntoView({ block: "start" }); }
        }
        break;
      case "highlight": event.preventDefault(); termsHidden(!document.body.classList.contains("terms-hidden")); break;
      default: break;
    }
  });

  // Taps and clicks on the labels and Skip go through the same queue as keys.
  document.addEventListener("submit", function (event) {
    if (event.target.id !== "judge-form") { return; }
    event.preventDefault();
    var submitter = event.submitter;
    if (submitter && submitter.classList.contains("skip-button")) {
      act({ kind: "skip", key: "skip" });
    } else if (submitter && submitter.classList.contains("label-button")) {
      act({ kind: "label", value: submitter.value, key: submitter.dataset.key });
    }
  });

  document.addEventListener("click", function (event) {
    var target = event.target.closest ? event.target : null;
    if (!target) { return; }
    if (target.closest(".help-toggle")) { event.preventDefault(); toggleHelp(); return; }
    if (target.closest(".begin-topic")) { event.preventDefault(); endBreak(); return; }
    if (target.closest(".terms-toggle")) { termsHidden(!document.body.classList.contains("terms-hidden")); return; }
    var rubric = target.closest(".rubric-toggle");
    if (rubric) {
      var open = form().classList.toggle("rubric-open");
      rubric.setAttribute("aria-expanded", open ? "true" : "false");
      return;
    }
    var nav = target.closest('#judge a[data-nav="previous"], #judge a[data-nav="next"], #judge a[data-nav="revise"]');
    if (nav && (queue.length || sending)) { event.preventDefault(); navigate(nav.getAttribute("href")); }
  });

  window.addEventListener("beforeunload", function (event) {
    if (queue.length) { event.preventDefault(); event.returnValue = ""; }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var stored = null;
    try { stored = window.localStorage.getItem("pooljudge.terms"); } catch (e) { /* private mode */ }
    termsHidden(stored === "off");
    showQueue();
    var judge = panel();
    mode = judge && judge.classList.contains("done-panel") ? "done" : "doc";
    resetTimer();
    var pane = $(".doc-pane");
    if (pane) { pane.focus({ preventScroll: true }); }
  });
})();
