// Passkey ceremonies for Paywarden's pages, and nothing else: a form with data-passkey="sign-in"
// or "create" asks its data-options URL for a challenge, lets the browser create or use a passkey,
// posts the answer to its data-verify URL, then goes where the server says. A form with
// data-step-up-options first confirms the person with a passkey they already have (a step-up) and
// hands the step-up's id to data-options: adding a passkey needs more than a session.
"use strict";

(function () {
  const form = document.querySelector("form[data-passkey]");
  if (!form) return;
  const status = document.getElementById("passkey-status");
  const problem = document.getElementById("passkey-error");
  const button = form.querySelector("button[type=submit]");

  function say(text) { status.textContent = text; }
  function fail(text) {
    say("");
    problem.textContent = text;
    problem.hidden = false;
    problem.focus();
    button.disabled = false;
  }
  function field(name) {
    const input = form.querySelector("[name=" + name + "]");
    return input ? input.value : undefined;
  }
  const post = window.paywardenPost;

  const supported = window.PublicKeyCredential
    && typeof PublicKeyCredential.parseCreationOptionsFromJSON === "function"
    && typeof PublicKeyCredential.parseRequestOptionsFromJSON === "function";
  if (!supported) {
    button.disabled = true;
    fail("This browser cannot use passkeys. Open this page in a recent Chrome, Edge, Safari or Firefox.");
    button.disabled = true;
    return;
  }

  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    problem.hidden = true;
    button.disabled = true;
    const creating = form.dataset.passkey === "create";
    try {
      say("Asking Paywarden for a challenge…");
      const csrf = field("csrf");
      const request = {csrf: csrf};
      if (form.dataset.stepUpOptions) {
        const check = await post(form.dataset.stepUpOptions, {csrf: csrf});
        say("First confirm it is you: follow your device's prompt to use a passkey you already have…");
        const proof = await navigator.credentials.get({publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(check.publicKey)});
        say("Checking your passkey…");
        const stepped = await post(form.dataset.stepUpVerify, {
          csrf: csrf,
          challengeId: check.challengeId,
          credential: proof.toJSON(),
        });
        request.stepUpId = stepped.stepUpId;
      }
      const options = await post(form.dataset.options, request);
      say(creating ? "Follow your device's prompt to create the passkey…" : "Follow your device's prompt to use your passkey…");
      const credential = creating
        ? await navigator.credentials.create({publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options.publicKey)})
        : await navigator.credentials.get({publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey)});
      say("Checking your passkey…");
      const done = await post(form.dataset.verify, {
        csrf: csrf,
        challengeId: options.challengeId,
        credential: credential.toJSON(),
        name: field("name"),
        next: field("next"),
      });
      say("Done. Taking you on…");
      window.location.assign(done.redirect);
    } catch (error) {
      if (error && (error.name === "NotAllowedError" || error.name === "AbortError")) {
        fail("The passkey request was cancelled or timed out. Try again when you are ready.");
      } else if (error && error.name === "InvalidStateError") {
        fail("This device already holds a passkey for your Paywarden account.");
      } else if (error && error.name === "SecurityError") {
        fail("Passkeys cannot be used on this address. Open Paywarden at its own host name.");
      } else {
        fail(error && error.message ? error.message : "Something went wrong. Please try again.");
      }
    }
  });
})();
