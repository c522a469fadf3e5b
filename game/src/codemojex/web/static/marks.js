// Codemojex · Play: keyboard marks.
//
// What the player's own scored guesses prove about each key: the `keys` of
// GET /api/rounds/{id}/guesses ("in" or "out"; derived on the server by codemojex.hints, from the
// player's guesses and feedback only). Each on-screen key gets data-mark ("in", "out" or "" unknown), a
// sign that is not a colour (✓ in, ✗ out) and the words in its aria-label and title.

const SIGNS = { in: "✓", out: "✗" };
const WORDS = { in: "in the code", out: "not in the code" };

/** Mark the key buttons of `keyboard` by `keys` (key -> "in" | "out"); an absent key is unknown. */
export function markKeys(keyboard, keys) {
  keyboard.querySelectorAll('[data-testid="key"]').forEach((button) => {
    const mark = Object.prototype.hasOwnProperty.call(keys || {}, button.dataset.key) ? keys[button.dataset.key] : "";
    const known = Object.prototype.hasOwnProperty.call(SIGNS, mark) ? mark : "";
    if (button.dataset.baseLabel === undefined) {
      button.dataset.baseLabel = button.getAttribute("aria-label") || button.dataset.key;
      button.dataset.baseTitle = button.title || "";
    }
    button.dataset.mark = known;
    let sign = button.querySelector(".key-mark");
    if (!sign) {
      sign = document.createElement("span");
      sign.className = "key-mark";
      sign.setAttribute("aria-hidden", "true");
      button.append(sign);
    }
    sign.textContent = known ? SIGNS[known] : "";
    const suffix = known ? `, ${WORDS[known]}` : "";
    button.setAttribute("aria-label", `${button.dataset.baseLabel}${suffix}`);
    button.title = `${button.dataset.baseTitle}${suffix}`;
  });
}
