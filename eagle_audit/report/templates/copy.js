// Copy buttons: the Clipboard API where the page is allowed it, else a hidden textarea and execCommand;
// if neither works, the text is selected so that Ctrl+C copies it. Every failure is caught.
(function () {
  "use strict";
  function select(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }
  function legacyCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(area);
    return ok;
  }
  function show(button, node, ok) {
    if (!ok) { select(node); }
    button.textContent = ok ? "Copied" : "Press Ctrl+C";
    button.classList.toggle("done", ok);
    window.setTimeout(function () { button.textContent = "Copy"; button.classList.remove("done"); }, 1600);
  }
  var buttons = document.querySelectorAll("button[data-copy]");
  Array.prototype.forEach.call(buttons, function (button) {
    button.addEventListener("click", function () {
      var node = document.getElementById(button.getAttribute("data-copy"));
      if (!node) { return; }
      var text = node.textContent;
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(
          function () { show(button, node, true); },
          function () { show(button, node, legacyCopy(text)); });
      } else {
        show(button, node, legacyCopy(text));
      }
    });
  });
})();
