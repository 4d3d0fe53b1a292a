// The card a payer types or that Stripe.js makes, shared by the hosted pages that save one (the
// checkout page, the customer portal): Tender's own card fields in test mode (standard
// `autocomplete` names; the number goes to the API in process and is never stored or logged here),
// and in live mode the script that mounts Stripe's Payment Element and posts only the
// PaymentMethod's id (`processor_token`): the card never reaches Tender.

/** Tender's card fields (test mode): name, number, expiry and security code. */
export function CardFields({ name }: { name?: string }) {
  return (
    <>
      <label for="cardholder_name">Name on card</label>
      <input id="cardholder_name" name="cardholder_name" autocomplete="cc-name" value={name ?? ""} maxlength={200} />
      <label for="card_number">Card number</label>
      <input id="card_number" name="card_number" autocomplete="cc-number" inputmode="numeric" maxlength={32} required />
      <div class="row">
        <div>
          <label for="exp_month">Month (MM)</label>
          <input id="exp_month" name="exp_month" autocomplete="cc-exp-month" inputmode="numeric" maxlength={2} required />
        </div>
        <div>
          <label for="exp_year">Year (YYYY)</label>
          <input id="exp_year" name="exp_year" autocomplete="cc-exp-year" inputmode="numeric" maxlength={4} required />
        </div>
        <div>
          <label for="cvc">Security code</label>
          <input id="cvc" name="cvc" autocomplete="cc-csc" inputmode="numeric" maxlength={4} required />
        </div>
      </div>
    </>
  );
}

/** Where the live page's own script is served (it drives Stripe's Payment Element). */
export const CHECKOUT_SCRIPT_PATH = "/pay/assets/checkout.js";

/** The live page's script: mounts the Payment Element, then makes the PaymentMethod and posts its id. No inline script: the CSP allows none. */
export const CHECKOUT_SCRIPT = `(function () {
  var form = document.getElementById("checkout-form");
  if (!form || typeof Stripe !== "function") return;
  var error = document.getElementById("checkout-error");
  var stripe = Stripe(form.dataset.publishableKey);
  var options = { mode: form.dataset.mode, paymentMethodCreation: "manual" };
  if (form.dataset.amount) options.amount = Number(form.dataset.amount);
  if (form.dataset.currency) options.currency = form.dataset.currency;
  // A setup session's card asked its holder to authenticate (a SetupIntent in requires_action):
  // Stripe.js runs the bank's check, then the page's return route saves the card.
  var secret = form.dataset.clientSecret;
  if (secret) {
    stripe.handleNextAction({ clientSecret: secret }).then(function () {
      window.location.assign(form.dataset.returnUrl + "?setup_intent=" + encodeURIComponent(secret.split("_secret_")[0]));
    });
    return;
  }
  var elements = stripe.elements(options);
  elements.create("payment").mount("#payment-element");
  var sending = false;
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    if (sending) return;
    sending = true;
    elements.submit().then(function (submitted) {
      if (submitted && submitted.error) throw submitted.error;
      return stripe.createPaymentMethod({ elements: elements });
    }).then(function (result) {
      if (result.error) throw result.error;
      document.getElementById("processor_token").value = result.paymentMethod.id;
      form.submit();
    }).catch(function (failure) {
      sending = false;
      error.textContent = (failure && failure.message) || "The card could not be read.";
    });
  });
})();
`;

/** The card fields as the API takes them (never stored: the API vaults them and keeps brand, last4, expiry and a fingerprint). */
export type TypedCard = { payment_method: "card"; card_number: string; expiration_month: number; expiration_year: number; cvv: string };
type Unread = { ok: false; message: string; name: string };
export type CardInput = { ok: true; card: TypedCard | { processor_token: string }; name: string } | Unread;

/** The card fields of the form, as the API takes them; or the field that is wrong. */
export function readForm(form: Record<string, unknown>): { ok: true; card: TypedCard; name: string } | Unread {
  const text = (key: string) => (typeof form[key] === "string" ? (form[key] as string).trim() : "");
  const name = text("cardholder_name").slice(0, 200);
  const number = text("card_number");
  const month = text("exp_month");
  const year = text("exp_year");
  const cvc = text("cvc");
  if (!number) return { ok: false, message: "Enter the card number.", name };
  if (!/^\d{1,2}$/.test(month)) return { ok: false, message: "Enter the expiry month as a number from 1 to 12.", name };
  if (!/^\d{2}(\d{2})?$/.test(year)) return { ok: false, message: "Enter the expiry year, such as 2030.", name };
  if (!/^\d{3,4}$/.test(cvc)) return { ok: false, message: "Enter the security code: 3 digits, or 4 on American Express.", name };
  const fullYear = year.length === 2 ? 2000 + Number(year) : Number(year);
  return { ok: true, name, card: { payment_method: "card", card_number: number, expiration_month: Number(month), expiration_year: fullYear, cvv: cvc } };
}

/** The live page's answer: the id of the PaymentMethod Stripe.js made (pm_…), never card fields; `alsoAllowed` names the page's own other fields. */
export function readToken(form: Record<string, unknown>, alsoAllowed: readonly string[] = []): { ok: true; card: { processor_token: string }; name: string } | Unread {
  const token = typeof form.processor_token === "string" ? form.processor_token.trim() : "";
  if (!/^pm_[A-Za-z0-9_]{1,200}$/.test(token)) return { ok: false, message: "The card could not be read. Enter it again.", name: "" };
  if (Object.keys(form).some((key) => key !== "processor_token" && !alsoAllowed.includes(key))) return { ok: false, message: "This page takes no card number: enter the card in the form above.", name: "" };
  return { ok: true, card: { processor_token: token }, name: "" };
}
