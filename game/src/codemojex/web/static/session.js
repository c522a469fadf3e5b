// Codemojex · the Play page's join form, "Log out" and "New recovery code" (an ES module play.js builds
// with createSession).
//
// Join takes a name (a taken name is answered with a suggestion, filled in) and shows the new player's
// recovery code once (accounts.js). "Log out" warns first (accounts.js: the recovery code, the join
// screen's recovery sign-in), then revokes the token on the server before forgetting it here; showJoin
// is also where any 401 lands (play.js call), the old name filled in.

import { ApiError, join, logout, showMessage, friendlyError } from "/static/common.js";
import { showRecoveryCode, hideRecoveryCode, confirmSignOut, newRecoveryCode } from "/static/accounts.js";

/** The join form over ``state`` and ``ui``: ``stopRound()`` ends the round shown, ``startGame()`` plays. */
export function createSession({ state, ui, stopRound, startGame }) {
  function showJoin(text) {
    stopRound();
    state.session = null;
    state.round = null;
    ui.game.hidden = true;
    ui.joinForm.hidden = false;
    showMessage(ui.message, text || "", text ? "warn" : "info");
    ui.name.focus();
  }

  async function onJoin(event) {
    event.preventDefault();
    const name = ui.name.value.trim();
    if (!name) {
      showMessage(ui.message, "Type a name first.", "error");
      return;
    }
    ui.joinButton.disabled = true;
    try {
      const joined = await join(name);
      state.session = joined.session;
      showMessage(ui.message, "");
      showRecoveryCode(joined.recovery_code);
      startGame();
    } catch (err) {
      const suggestion = err instanceof ApiError && err.body && err.body.error ? err.body.error.suggestion : null;
      if (err instanceof ApiError && err.code === "name_taken" && suggestion) ui.name.value = suggestion;
      showMessage(ui.message, friendlyError(err), "error");
    } finally {
      ui.joinButton.disabled = false;
    }
  }

  async function onLeave() {
    if (!(await confirmSignOut(state.session))) return;
    ui.leave.disabled = true;
    try {
      await logout(state.session);
      hideRecoveryCode();
      showJoin("Logged out: this player's token no longer works anywhere.");
    } catch (err) {
      showMessage(ui.message, friendlyError(err), "error");
    } finally {
      ui.leave.disabled = false;
    }
  }

  async function onNewRecovery() {
    if (!window.confirm("Make a new recovery code? The one you have now stops working.")) return;
    try {
      showRecoveryCode(await newRecoveryCode(state.session));
    } catch (err) {
      showMessage(ui.message, friendlyError(err), "error");
    }
  }

  /** The form's, "Log out"'s and "New recovery code"'s listeners. */
  function wire() {
    ui.form.addEventListener("submit", onJoin);
    ui.leave.addEventListener("click", onLeave);
    ui.newRecovery.addEventListener("click", onNewRecovery);
  }

  return { showJoin, wire };
}
