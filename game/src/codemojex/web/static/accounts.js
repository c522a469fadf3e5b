// Codemojex · Play page: what keeps an account reachable (docs/http-api.md, "Recovery codes").
//
// - the recovery code: shown once after joining (or when the player asks for a new one, which
//   replaces the old one), with a Copy button; never stored in the browser;
// - "Sign in with a recovery code" on the join screen (POST /api/recover): a new token for this
//   browser; the player's other devices stay signed in unless the box is ticked;
// - the warning before "Log out": without the recovery code the player cannot be reached again, and
//   a new code can be shown before the token is revoked;
// - the name field counts what the server counts: code points after NFKC, not UTF-16 units.

import { api, ApiError, saveSession, byTestId, showMessage, friendlyError, setText } from "/static/common.js";

export const MAX_NAME = 32; // codemojex.names.MAX_NAME: code points after NFKC

const ui = {
  message: byTestId("message"),
  name: byTestId("name"),
  nameCount: byTestId("name-count"),
  recoverForm: byTestId("recover-form"),
  recoveryInput: byTestId("recovery-input"),
  signOutOthers: byTestId("sign-out-others"),
  recoverButton: byTestId("recover"),
  panel: byTestId("recovery-panel"),
  code: byTestId("recovery-code"),
  copy: byTestId("copy-recovery"),
  done: byTestId("recovery-done"),
  dialog: byTestId("signout-dialog"),
  dialogNewCode: byTestId("signout-new-code"),
  dialogCodeLine: byTestId("signout-code-line"),
  dialogCode: byTestId("signout-code"),
  dialogConfirm: byTestId("signout-confirm"),
  dialogCancel: byTestId("signout-cancel"),
};

/** The length the server gives a name: code points of its NFKC form, trimmed. */
export function nameLength(text) {
  return [...String(text).normalize("NFKC").trim()].length;
}

function renderNameCount() {
  const n = nameLength(ui.name.value);
  setText(ui.nameCount, n ? `${n}/${MAX_NAME}` : "");
  ui.nameCount.classList.toggle("over", n > MAX_NAME);
}

/** Show a recovery code once (the panel stays until the player says it is saved). */
export function showRecoveryCode(code) {
  if (!code) return;
  setText(ui.code, code);
  ui.panel.hidden = false;
}

function hideRecoveryCode() {
  setText(ui.code, "");
  ui.panel.hidden = true;
}

async function copyCode(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    setText(button, "Copied");
  } catch {
    const range = document.createRange(); // no clipboard permission: select it for Ctrl-C
    range.selectNodeContents(ui.code);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    setText(button, "Selected: press Ctrl-C");
  }
  setTimeout(() => setText(button, "Copy"), 2000);
}

/** Make a new recovery code for the session's player (the old one stops working); returns it. */
export async function newRecoveryCode(session) {
  const reply = await api("POST", "/api/me/recovery", { token: session.token });
  return reply.recovery_code;
}

async function onRecover(event, onSignedIn) {
  event.preventDefault();
  const code = ui.recoveryInput.value.trim();
  if (!code) return;
  ui.recoverButton.disabled = true;
  try {
    const reply = await api("POST", "/api/recover", {
      body: { code, sign_out_others: Boolean(ui.signOutOthers.checked) },
    });
    const session = {
      token: reply.token,
      player_id: reply.player_id,
      name: reply.name,
      token_expires_ms: reply.token_expires_ms,
      token_life_ms: Math.max(0, reply.token_expires_ms - Date.now()),
    };
    saveSession(session);
    ui.recoveryInput.value = "";
    showMessage(ui.message, `Signed in as ${reply.name}.`, "info");
    onSignedIn(session);
  } catch (err) {
    const text = err instanceof ApiError && err.code === "bad_recovery_code"
      ? "That recovery code does not sign anyone in: check it, or make a new one on a device still signed in."
      : friendlyError(err);
    showMessage(ui.message, text, "error");
  } finally {
    ui.recoverButton.disabled = false;
  }
}

/**
 * Ask before logging out: resolves true to go on, false to stay. The dialog can show a new recovery
 * code first (the old one stops working), so the player leaves with a code that works.
 */
export function confirmSignOut(session) {
  setText(ui.dialogCode, "");
  ui.dialogCodeLine.hidden = true;
  ui.dialogNewCode.disabled = false;
  return new Promise((resolve) => {
    const finish = (answer) => {
      ui.dialog.removeEventListener("cancel", onCancel);
      ui.dialogConfirm.removeEventListener("click", onConfirm);
      ui.dialogCancel.removeEventListener("click", onStay);
      ui.dialogNewCode.removeEventListener("click", onNewCode);
      if (ui.dialog.open) ui.dialog.close();
      resolve(answer);
    };
    const onCancel = () => finish(false);
    const onConfirm = () => finish(true);
    const onStay = () => finish(false);
    const onNewCode = async () => {
      ui.dialogNewCode.disabled = true;
      try {
        setText(ui.dialogCode, await newRecoveryCode(session));
        ui.dialogCodeLine.hidden = false;
      } catch (err) {
        setText(ui.dialogCode, friendlyError(err));
        ui.dialogCodeLine.hidden = false;
        ui.dialogNewCode.disabled = false;
      }
    };
    ui.dialog.addEventListener("cancel", onCancel);
    ui.dialogConfirm.addEventListener("click", onConfirm);
    ui.dialogCancel.addEventListener("click", onStay);
    ui.dialogNewCode.addEventListener("click", onNewCode);
    ui.dialog.showModal();
    ui.dialogCancel.focus();
  });
}

/** Wire the join screen's recovery form, the code panel and the name counter. */
export function initAccounts({ onSignedIn }) {
  ui.name.addEventListener("input", renderNameCount);
  ui.recoverForm.addEventListener("submit", (event) => onRecover(event, onSignedIn));
  ui.copy.addEventListener("click", () => copyCode(ui.code.textContent, ui.copy));
  ui.done.addEventListener("click", hideRecoveryCode);
}

export { hideRecoveryCode };
