// Live validation of a topic's retry expression: as the operator types, ask
// the management API (POST /manage/v1/expressions/check/, session auth, CSRF
// header) whether it parses, and show the error (with its position) under the
// field. The form still validates on the server; this only answers sooner.
(function () {
  "use strict";
  const field = document.getElementById("id_retry_expression");
  const out = document.getElementById("expression-check");
  if (!field || !out) { return; }
  const url = field.form.dataset.checkUrl;
  const csrf = field.form.querySelector("input[name=csrfmiddlewaretoken]").value;
  let timer = null;
  let sequence = 0;

  function show(text, state) {
    out.textContent = text;
    out.className = "expression-check " + state;
  }

  async function check() {
    const expression = field.value;
    const mine = ++sequence;
    if (!expression.trim()) { show("", ""); return; }
    try {
      const response = await fetch(url, {
        method: "POST",
        credentials: "same-origin",
        headers: {"Content-Type": "application/json", "X-CSRFToken": csrf},
        body: JSON.stringify({expression: expression, status: 200, body: ""}),
      });
      const answer = await response.json();
      if (mine !== sequence) { return; }  // a newer check is on its way
      if (!response.ok) { show("could not check: HTTP " + response.status, "bad"); return; }
      if (answer.valid) { show("✓ valid expression", "ok"); } else { show("✗ " + answer.error, "bad"); }
    } catch (error) {
      show("could not check: " + error, "bad");
    }
  }

  field.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(check, 250);
  });
  if (field.value.trim()) { check(); }
})();
