// ngrp view: keyboard navigation, layout toggle, auto-submitting filters. No run text is ever written as
// HTML here: the pages are rendered (and escaped) on the server; this script only moves focus and classes.
(function () {
  "use strict";
  var page = document.body.getAttribute("data-page");

  function typing(event) {
    var t = event.target;
    return t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA" || t.isContentEditable);
  }
  function go(id) {
    var link = document.getElementById(id);
    if (link && link.href) { window.location.href = link.href; return true; }
    return false;
  }

  // filters: a select or checkbox change submits the form
  var form = document.querySelector("form.filters");
  if (form) {
    form.querySelectorAll("select, input[type=checkbox]").forEach(function (el) {
      el.addEventListener("change", function () { form.submit(); });
    });
  }

  // task layout: stacked or side by side, remembered
  var rollouts = document.getElementById("rollouts");
  var layout = document.getElementById("layout");
  function setLayout(side) {
    if (!rollouts) { return; }
    rollouts.classList.toggle("side", side);
    try { localStorage.setItem("ngrp-view-layout", side ? "side" : "stacked"); } catch (e) { /* private mode */ }
  }
  if (rollouts) {
    var saved = null;
    try { saved = localStorage.getItem("ngrp-view-layout"); } catch (e) { saved = null; }
    setLayout(saved === "side");
  }
  if (layout) { layout.addEventListener("click", function () { setLayout(!rollouts.classList.contains("side")); }); }
  function toggleReasoning() {
    var all = document.querySelectorAll("details.reasoning");
    var open = Array.prototype.some.call(all, function (d) { return !d.open; });
    all.forEach(function (d) { d.open = open; });
  }
  var reasoningAll = document.getElementById("reasoning-all");
  if (reasoningAll) { reasoningAll.addEventListener("click", toggleReasoning); }

  // table rows: j/k move the highlight, Enter opens
  var rows = Array.prototype.slice.call(document.querySelectorAll("table.tasks tbody tr[data-task-index]"));
  var current = -1;
  function highlight(i) {
    if (!rows.length) { return; }
    if (current >= 0) { rows[current].classList.remove("current"); }
    current = Math.max(0, Math.min(rows.length - 1, i));
    rows[current].classList.add("current");
    rows[current].scrollIntoView({block: "nearest"});
  }
  function openCurrent() {
    if (current < 0) { return false; }
    var link = rows[current].querySelector("a");
    if (link) { window.location.href = link.href; }
    return true;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (typing(event)) {
      if (event.key === "Escape") { event.target.blur(); }
      return;
    }
    var key = event.key, done = false;
    if (page === "tasks" || page === "compare") {
      if (key === "j" || key === "ArrowDown") { highlight(current + 1); done = true; }
      else if (key === "k" || key === "ArrowUp") { highlight(current - 1); done = true; }
      else if (key === "Enter" || key === "o") { done = openCurrent(); }
      else if (key === "n") { done = go("page-next"); }
      else if (key === "p") { done = go("page-prev"); }
      else if (key === "/") {
        var search = document.querySelector("input[name=q]");
        if (search) { search.focus(); done = true; }
      }
    } else if (page === "task") {
      if (key === "j" || key === "ArrowRight" || key === "n") { done = go("next"); }
      else if (key === "k" || key === "ArrowLeft" || key === "p") { done = go("prev"); }
      else if (key === "u" || key === "Escape") { done = go("back"); }
      else if (key === "s") { setLayout(!rollouts.classList.contains("side")); done = true; }
      else if (key === "r") { toggleReasoning(); done = true; }
    } else if (page === "compare_task") {
      if (key === "u" || key === "Escape") { done = go("back"); }
    }
    if (done) { event.preventDefault(); }
  });
}());
