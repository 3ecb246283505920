// Site-wide behaviour. No inline scripts anywhere (the CSP forbids them).
(function () {
  "use strict";
  // An htmx request answered by the login page (session expired) or by an error: load the
  // page for real instead of swapping a fragment of it into the current one.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    if (xhr && xhr.responseURL && xhr.responseURL.indexOf("/accounts/login/") !== -1) {
      event.detail.shouldSwap = false;
      window.location.assign(xhr.responseURL);
    }
  });
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (status === 403 || status === 404 || status >= 500) { window.location.reload(); }
  });
})();
