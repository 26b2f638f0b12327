// The inbox without a reload: the expiry countdowns tick, and a confirmation decided elsewhere
// (another tab, the command line, REST, another process) leaves the list within two seconds.
// The poll is not a use of the sign-in: a tab left open does not keep it alive past its idle
// timeout, and the page says so when it has ended.
// Times ("5 minutes ago") stay current, with the exact time in the reader's own zone as their
// title; "now" is the server's clock when the page was made, plus the time since (the server
// decides expiries, so its clock is the one that counts). The bulk bar counts the ticked cards.
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

  var loaded = Date.now();
  var serverNow = parseFloat(document.body.dataset.now || "");
  var units = [[90 * 60, 60, "minute"], [36 * 3600, 3600, "hour"], [Infinity, 86400, "day"]];

  function ago(at, now) {  // the same words as present.ago on the server
    var seconds = now - at, span = Math.abs(seconds);
    if (span < 45) return "just now";
    var unit = units.filter(function (u) { return span < u[0]; })[0];
    var count = Math.max(1, Math.round(span / unit[1]));
    var said = count + " " + unit[2] + (count === 1 ? "" : "s");
    return seconds > 0 ? said + " ago" : "in " + said;
  }

  function times() {
    var now = (isNaN(serverNow) ? loaded / 1000 : serverNow) + (Date.now() - loaded) / 1000;
    document.querySelectorAll("time.relative[datetime]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      if (isNaN(at)) return;
      el.textContent = ago(at / 1000, now);
      el.title = new Date(at).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "long" });
    });
  }

  function picked() {
    var out = document.getElementById("picked");
    if (out) out.textContent = String(document.querySelectorAll("input.pick:checked").length);
  }

  times();
  setInterval(times, 30000);
  document.addEventListener("change", function (event) {
    if (event.target.classList && event.target.classList.contains("pick")) picked();
  });
  picked();

  if (document.querySelector("time.countdown")) setInterval(tick, 1000);
  if (document.querySelector("article.confirmation")) setInterval(poll, 1500);
})();
