// Toolgate console: progressive enhancement only; every page works
// without it. No network requests, no inline handlers (CSP).
"use strict";
document.addEventListener("submit", function (ev) {
  // One submission per form: disable its buttons once it is sent, so a
  // double click cannot approve or replay twice.
  var form = ev.target;
  if (!(form instanceof HTMLFormElement)) return;
  if (form.dataset.sent === "1") { ev.preventDefault(); return; }
  form.dataset.sent = "1";
  setTimeout(function () {
    form.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = true; });
  }, 0);
});
