// Softchat docs: the recipe language selector. Everything is readable without it.
(function () {
  "use strict";
  var KEY = "softchat-docs-language";
  function saved() { try { return localStorage.getItem(KEY) || "all"; } catch (e) { return "all"; } }
  function save(lang) { try { localStorage.setItem(KEY, lang); } catch (e) { /* file:// may refuse */ } }
  function apply(lang) {
    var found = false;
    document.querySelectorAll(".recipe[data-lang]").forEach(function (el) {
      if (el.getAttribute("data-lang") === lang) { found = true; }
    });
    if (!found) { lang = "all"; }
    document.querySelectorAll(".recipe[data-lang], table.symbols tr[data-lang]").forEach(function (el) {
      el.hidden = lang !== "all" && el.getAttribute("data-lang") !== lang;
    });
    document.querySelectorAll(".lang-select button").forEach(function (b) {
      b.setAttribute("aria-pressed", b.getAttribute("data-choice") === lang ? "true" : "false");
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".recipes").forEach(function (box) {
      var choices = [["all", "All languages"]];
      box.querySelectorAll(".recipe[data-lang]").forEach(function (r) {
        var h = r.querySelector("h3");
        choices.push([r.getAttribute("data-lang"), h ? h.textContent : r.getAttribute("data-lang")]);
      });
      var bar = document.createElement("div");
      bar.className = "lang-select";
      bar.setAttribute("role", "group");
      bar.setAttribute("aria-label", "Recipe language");
      choices.forEach(function (c) {
        var b = document.createElement("button");
        b.type = "button";
        b.textContent = c[1];
        b.setAttribute("data-choice", c[0]);
        b.addEventListener("click", function () { save(c[0]); apply(c[0]); });
        bar.appendChild(b);
      });
      box.insertBefore(bar, box.firstChild);
    });
    apply(saved());
  });
})();
