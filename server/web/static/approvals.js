// The decision buttons of the approval page and of a policy change's page: each asks Paywarden for
// a challenge bound to that decision on this payment (or change, over the versions the page shows:
// the form's `basis`), lets the browser sign it with the member's passkey (user verification
// required), posts the answer, then shows the page again with the outcome.
"use strict";

(function () {
  const forms = document.querySelectorAll("form[data-decision]");
  if (!forms.length) return;
  const status = document.getElementById("passkey-status");
  const problem = document.getElementById("passkey-error");
  const buttons = document.querySelectorAll("form[data-decision] button[type=submit]");

  function say(text) { status.textContent = text; }
  function busy(on) { buttons.forEach(function (button) { button.disabled = on; }); }
  function fail(text) {
    say("");
    problem.textContent = text;
    problem.hidden = false;
    problem.focus();
    busy(false);
  }
  const post = window.paywardenPost;
  const WORDS = {approve: "approval", deny: "denial", reject: "rejection"};

  if (!(window.PublicKeyCredential && typeof PublicKeyCredential.parseRequestOptionsFromJSON === "function")) {
    busy(true);
    fail("This browser cannot use passkeys. Open this page in a recent Chrome, Edge, Safari or Firefox.");
    busy(true);
    return;
  }

  forms.forEach(function (form) {
    form.addEventListener("submit", async function (event) {
      event.preventDefault();
      problem.hidden = true;
      busy(true);
      const decision = form.dataset.decision;
      const csrf = form.querySelector("[name=csrf]").value;
      const basis = form.querySelector("[name=basis]");
      const request = {csrf: csrf, decision: decision};
      if (basis) request.basis = basis.value;
      try {
        say("Asking Paywarden for a challenge…");
        const options = await post(form.dataset.options, request);
        say("Confirm the " + WORDS[decision] + " with your passkey…");
        const credential = await navigator.credentials.get({
          publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey),
        });
        say("Checking your passkey…");
        const done = await post(form.dataset.verify, {
          csrf: csrf,
          decision: decision,
          challengeId: options.challengeId,
          credential: credential.toJSON(),
        });
        say("Done.");
        window.location.assign(done.redirect);
      } catch (error) {
        if (error && (error.name === "NotAllowedError" || error.name === "AbortError")) {
          fail("The passkey request was cancelled or timed out. Nothing was decided. Try again when you are ready.");
        } else if (error && error.name === "SecurityError") {
          fail("Passkeys cannot be used on this address. Open Paywarden at its own host name.");
        } else {
          fail(error && error.message ? error.message : "Something went wrong. Nothing was decided. Please try again.");
        }
      }
    });
  });
})();
