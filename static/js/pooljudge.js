// Site-wide behaviour. No inline scripts anywhere (the CSP forbids them).
(function () {
  "use strict";
  // Finished job polls stop themselves (HTTP 286); nothing else is needed here yet.
})();
