// A stand-in for Stripe.js (https://js.stripe.com/v3/), served by the fake Stripe at /v3/ (test
// and `npm run fake-stripe`), which hosted pages load instead of Stripe's when STRIPE_JS_URL points
// at it (development only). It implements only what Tender's pages call, against the fake Stripe
// that serves it: no card data and no secret key ever pass through it. Plain browser JavaScript
// (no build step), kept as a string: the fake serves it as is.
export const FAKE_STRIPE_JS = `"use strict";
(function () {
  var script = document.currentScript;
  var origin = script && script.src ? new URL(script.src).origin : "";

  // The fake's control API (POST, text/plain so that no CORS preflight is needed).
  function control(path, body) {
    return fetch(origin + "/_fake" + path, { method: "POST", headers: { "Content-Type": "text/plain" }, body: JSON.stringify(body || {}) }).then(function (res) {
      return res.json();
    });
  }

  function intentIdOf(clientSecret) {
    var match = /^(pi_[A-Za-z0-9]+)_secret_/.exec(String(clientSecret || ""));
    return match ? match[1] : null;
  }

  function Stripe(publishableKey) {
    if (!/^pk_(test|live)_/.test(String(publishableKey || ""))) throw new Error("Stripe(): a publishable key (pk_…) is required");
    return {
      // handleNextAction (3-D Secure)
      // Shows the fake bank's challenge over the page, with Complete and Fail, as Stripe's test
      // challenge does; the choice is sent to the fake (POST /_fake/payment_intents/{id}/authenticate,
      // which emits Stripe's event), then the promise resolves with the PaymentIntent as the fake has it.
      handleNextAction: function (options) {
        var id = intentIdOf(options && options.clientSecret);
        if (!id) return Promise.resolve({ error: { type: "invalid_request_error", message: "handleNextAction needs a PaymentIntent client secret." } });
        return new Promise(function (resolve) {
          var frame = document.createElement("section");
          frame.className = "card";
          frame.setAttribute("data-fake-stripe-challenge", id);
          var title = document.createElement("h1");
          title.textContent = "Your bank's check (fake Stripe)";
          var text = document.createElement("p");
          text.textContent = "This stands in for Stripe's 3-D Secure challenge: choose how it ends.";
          frame.appendChild(title);
          frame.appendChild(text);
          ["complete", "fail"].forEach(function (outcome) {
            var button = document.createElement("button");
            button.type = "button";
            button.textContent = outcome === "complete" ? "Complete authentication" : "Fail authentication";
            if (outcome === "fail") button.className = "secondary";
            button.addEventListener("click", function () {
              frame.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
              control("/payment_intents/" + id + "/authenticate", { outcome: outcome }).then(function (answer) {
                frame.remove();
                resolve({ paymentIntent: answer.payment_intent });
              }, function (error) {
                frame.remove();
                resolve({ error: { type: "api_connection_error", message: String(error) } });
              });
            });
            frame.appendChild(button);
          });
          document.body.appendChild(frame);
        });
      },
    };
  }

  window.Stripe = Stripe;
})();
`;
