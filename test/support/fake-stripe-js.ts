// A development-only stand-in for Stripe.js (https://js.stripe.com/v3/), served by the fake Stripe
// (`npm run fake-stripe`) at /v3/ and loaded by a live hosted page when STRIPE_JS_URL points at it
// (honoured only in development, as STRIPE_API_BASE is). It implements just what Tender's pages
// call, against the fake Stripe that serves it: `Stripe(publishableKey)` and, per section below,
// what each page uses: the checkout page's Elements and createPaymentMethod, the 3-D Secure page's
// handleNextAction. The card fields it draws are plain inputs in the page (Stripe's are in its
// frames); a PaymentMethod it makes is one the fake Stripe knows (POST /_fake/payment_methods,
// the fake's Stripe.js tokenization), so the live paths attach and charge it as Stripe would.
export const FAKE_STRIPE_JS = `(function () {
  var script = document.currentScript;
  var origin = script ? new URL(script.src).origin : "";

  function post(path, body) {
    // text/plain: a simple request, so the fake Stripe's CORS answer needs no preflight.
    return fetch(origin + path, { method: "POST", body: JSON.stringify(body) }).then(function (r) { return r.json(); });
  }

  // The fake's control API (POST, text/plain so that no CORS preflight is needed).
  function control(path, body) {
    return post("/_fake" + path, body || {});
  }

  function intentIdOf(clientSecret) {
    var match = /^((?:pi|seti)_[A-Za-z0-9]+)_secret_/.exec(String(clientSecret || ""));
    return match ? match[1] : null;
  }

  function Stripe(publishableKey) {
    if (!/^pk_(live|test)_/.test(String(publishableKey))) throw new Error("Stripe.js stand-in: a publishable key (pk_live_… or pk_test_…) is required");
    var stripe = { _publishableKey: publishableKey };

    // Elements and createPaymentMethod (checkout)
    // Deferred-intent Elements (stripe.elements({ mode, amount, currency, paymentMethodCreation:
    // "manual" })), a Payment Element of card fields, elements.submit() checking them, and
    // stripe.createPaymentMethod({ elements }) making the PaymentMethod at the fake Stripe.
    stripe.elements = function (options) {
      if (!options || ["payment", "subscription", "setup"].indexOf(options.mode) < 0) throw new Error("Stripe.js stand-in: elements() needs mode payment, subscription or setup");
      var fields = null;
      var elements = {
        create: function (type) {
          if (type !== "payment") throw new Error("Stripe.js stand-in: only the payment element is served");
          return {
            mount: function (selector) {
              var host = typeof selector === "string" ? document.querySelector(selector) : selector;
              fields = {};
              [["number", "Card number", "cc-number"], ["exp_month", "Month (MM)", "cc-exp-month"], ["exp_year", "Year (YYYY)", "cc-exp-year"], ["cvc", "Security code", "cc-csc"]].forEach(function (field) {
                var label = document.createElement("label");
                label.textContent = field[1];
                var input = document.createElement("input");
                input.id = "stripe-" + field[0];
                input.setAttribute("autocomplete", field[2]);
                input.setAttribute("inputmode", "numeric");
                label.setAttribute("for", input.id);
                host.appendChild(label);
                host.appendChild(input);
                fields[field[0]] = input;
              });
            },
          };
        },
        submit: function () {
          if (!fields) return Promise.resolve({ error: { type: "validation_error", message: "The payment element is not mounted." } });
          var number = fields.number.value.replace(/[ -]/g, "");
          if (!/^[0-9]{12,19}$/.test(number)) return Promise.resolve({ error: { type: "validation_error", code: "incomplete_number", message: "Your card number is incomplete." } });
          if (!/^[0-9]{1,2}$/.test(fields.exp_month.value) || !/^[0-9]{2,4}$/.test(fields.exp_year.value)) return Promise.resolve({ error: { type: "validation_error", code: "incomplete_expiry", message: "Your card's expiration date is incomplete." } });
          if (!/^[0-9]{3,4}$/.test(fields.cvc.value)) return Promise.resolve({ error: { type: "validation_error", code: "incomplete_cvc", message: "Your card's security code is incomplete." } });
          return Promise.resolve({});
        },
        _card: function () {
          var year = Number(fields.exp_year.value);
          return { number: fields.number.value.replace(/[ -]/g, ""), exp_month: Number(fields.exp_month.value), exp_year: year < 100 ? 2000 + year : year };
        },
      };
      return elements;
    };
    stripe.createPaymentMethod = function (params) {
      if (!params || !params.elements || !params.elements._card) return Promise.resolve({ error: { type: "invalid_request_error", message: "createPaymentMethod needs { elements }." } });
      return post("/_fake/payment_methods", params.elements._card()).then(function (made) {
        if (!made || !made.id) return { error: { type: "card_error", message: (made && made.error && made.error.message) || "The card could not be read." } };
        return { paymentMethod: { id: made.id, object: "payment_method", type: "card" } };
      });
    };

    // handleNextAction (3-D Secure), for a PaymentIntent or a SetupIntent (seti_…_secret_…)
    // Shows the fake bank's challenge over the page, with Complete and Fail, as Stripe's test
    // challenge does; the choice is sent to the fake (POST /_fake/payment_intents/{id}/authenticate,
    // which emits Stripe's event), then the promise resolves with the PaymentIntent as the fake has it.
    stripe.handleNextAction = function (options) {
      var id = intentIdOf(options && options.clientSecret);
      if (!id) return Promise.resolve({ error: { type: "invalid_request_error", message: "handleNextAction needs a PaymentIntent or SetupIntent client secret." } });
      var setup = id.indexOf("seti_") === 0;
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
            control((setup ? "/setup_intents/" : "/payment_intents/") + id + "/authenticate", { outcome: outcome }).then(function (answer) {
              frame.remove();
              resolve(setup ? { setupIntent: answer.setup_intent } : { paymentIntent: answer.payment_intent });
            }, function (error) {
              frame.remove();
              resolve({ error: { type: "api_connection_error", message: String(error) } });
            });
          });
          frame.appendChild(button);
        });
        document.body.appendChild(frame);
      });
    };

    return stripe;
  }

  window.Stripe = Stripe;
})();
`;
