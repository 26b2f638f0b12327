// The inbox without a reload: the expiry countdowns tick, and a confirmation decided elsewhere
// (another tab, the command line, REST, another process) leaves the list within two seconds.
// The poll is not a use of the sign-in: a tab left open does not keep it alive past its idle
// timeout, and the page says so when it has ended.
// Everything here is optional: the forms work without it.
(function () {
  "use strict";
  var root = document.querySelector('link[rel="stylesheet"]').getAttribute("href").replace(/\/static\/inbox\.css$/, "");

  function tick() {
    document.querySelectorAll("time.countdown").forEach(function (el) {
      var left = Math.max(0, parseInt(el.dataset.seconds, 10) - 1);
      el.dataset.seconds = String(left);
      el.textContent = left > 0 ? Math.floor(left / 60) + " min " + (left % 60) + " s" : "expired";
      if (left === 0) {
        var article = el.closest("article");
        if (article) article.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      }
    });
  }

  function poll() {
    var shown = document.querySelectorAll("article.confirmation[data-id]");
    if (!shown.length) return;
    var ids = Array.prototype.map.call(shown, function (a) { return a.dataset.id; });
    fetch(root + "/pending.json?ids=" + encodeURIComponent(ids.join(",")),
          { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.status === 401 ? { signed_in: false } : r.ok ? r.json() : null; })
      .then(function (body) {
        if (!body) return;
        if (!body.signed_in) {  // the sign-in ended: unused too long, signed out, key revoked
          var ended = document.getElementById("live");
          ended.hidden = false;
          ended.textContent = "Your sign-in has ended (unused for a while, or signed out" +
            " elsewhere). Sign in again to decide.";
          return;
        }
        var still = new Set(body.ids);
        var gone = 0;
        shown.forEach(function (article) {
          if (!still.has(article.dataset.id)) { article.remove(); gone += 1; }
        });
        if (gone) {
          var live = document.getElementById("live");
          live.hidden = false;
          live.textContent = gone + (gone === 1 ? " confirmation left" : " confirmations left") +
            " the list: decided elsewhere or expired. History says who decided and how.";
        }
      })
      .catch(function () {});
  }

  if (document.querySelector("article.confirmation")) {
    setInterval(tick, 1000);
    setInterval(poll, 1500);
  }
})();
