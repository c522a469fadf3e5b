// Codemojex · the Play page's guess board: the six slots, the on-screen keyboard, the cursor, the
// position locks and the keys typed (an ES module play.js builds with createBoard).
//
// Keys 1–9 (or a click) fill the slot under the cursor, which then moves to the next unlocked slot;
// Backspace, Delete, ←/→ and Escape edit; R fills the slots with the newest guess (prefillLast); Enter
// submits. A proven hit can be locked to its position (PUT/DELETE /api/rounds/{round}/locks/{i}): the
// server fills it in for every guess, so the slot is skipped here. The board reads and writes the
// shared state; submitting and refreshing the guesses are the callbacks it is given.

import { el, clear, setText, showMessage, friendlyError } from "/static/common.js";
import {
  LENGTH, emptySlots, roundPath, isClosed, isSolved, canType, canPay, isLocked, lastGuess, currentGuess,
} from "/static/play_state.js";

/**
 * The board over ``state`` and ``ui``: ``call`` is the player's API call, ``submit()`` sends the guess,
 * ``refreshGuesses()`` reloads the guesses (and the locks) after a lock changes.
 */
export function createBoard({ state, ui, call, submit, refreshGuesses }) {
  const locked = (i) => isLocked(state, i);
  const typing = () => canType(state);
  const unlockedPositions = () => [...Array(LENGTH).keys()].filter((i) => !locked(i));

  /** Keep the cursor on an unlocked slot (or at LENGTH, past the end). */
  function normalizeCursor() {
    if (state.cursor < LENGTH && locked(state.cursor)) {
      const next = unlockedPositions().find((i) => i > state.cursor);
      state.cursor = next === undefined ? LENGTH : next;
    }
    for (const i of Object.keys(state.locks)) state.slots[Number(i)] = null;
  }

  function nextUnlocked(from) {
    const next = unlockedPositions().find((i) => i > from);
    return next === undefined ? LENGTH : next;
  }

  function prevUnlocked(from) {
    const prev = unlockedPositions().filter((i) => i < from).pop();
    return prev === undefined ? -1 : prev;
  }

  function firstUnlocked() {
    const first = unlockedPositions()[0];
    return first === undefined ? LENGTH : first;
  }

  function pickKey(key) {
    if (!typing()) return;
    if (state.cursor >= LENGTH) {
      showMessage(ui.message, "All six are filled: press Ctrl+Enter or Submit (Backspace to change).", "info");
      return;
    }
    state.slots[state.cursor] = key;
    state.cursor = nextUnlocked(state.cursor);
    renderSlots();
  }

  /** Backspace: clear the unlocked slot before the cursor and move the cursor there. */
  function backspace() {
    const prev = prevUnlocked(state.cursor);
    if (prev < 0) return;
    state.slots[prev] = null;
    state.cursor = prev;
    renderSlots();
  }

  function deleteHere() {
    if (state.cursor < LENGTH) state.slots[state.cursor] = null;
    renderSlots();
  }

  function moveCursor(step) {
    const target = step < 0 ? prevUnlocked(state.cursor) : nextUnlocked(state.cursor);
    if (target < 0) return;
    state.cursor = target;
    renderSlots();
  }

  function clearSlots() {
    state.slots = emptySlots();
    state.cursor = firstUnlocked();
    renderSlots();
  }

  /** Fill the unlocked slots with the last guess, to edit it (locked positions stay the server's). */
  function prefillLast() {
    const last = lastGuess(state);
    if (!typing() || !last) return;
    for (let i = 0; i < LENGTH; i += 1) state.slots[i] = locked(i) ? null : last[i];
    state.cursor = LENGTH;
    renderSlots();
  }

  function onSlotClick(event) {
    const slot = event.target.closest('[data-testid="slot"]');
    if (!slot || !typing()) return;
    const i = Number(slot.dataset.position);
    if (locked(i)) return;
    state.cursor = i;
    renderSlots();
  }

  function onKeyClick(event) {
    const key = event.target.closest('[data-testid="key"]');
    if (key) pickKey(key.dataset.key);
  }

  // Enter submits while no control has the focus; on a focused control (an on-screen key, a slot, a
  // button: reached with Tab) Enter and Space do what that control does, so a key types itself.
  // Ctrl+Enter (or ⌘+Enter) submits wherever the focus is. A mouse click on a key or slot leaves the
  // focus where it was (onBoardMousedown), so Enter after clicking six keys still submits.
  function onKeydown(event) {
    if (ui.game.hidden || !state.round) return;
    if (document.querySelector("dialog[open]")) return; // the sign-out warning has the keyboard
    if (event.key === "Enter" && event.target.closest?.('[data-testid="recovery-panel"]')) return;
    const tag = event.target && event.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !event.altKey) {
      event.preventDefault();
      submit();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const onControl = event.target instanceof Element && event.target.closest("button, a[href], [tabindex]");
    if ((event.key === "Enter" || event.key === " ") && onControl) return;
    const actions = {
      Backspace: backspace,
      Delete: deleteHere,
      ArrowLeft: () => moveCursor(-1),
      ArrowRight: () => moveCursor(1),
      Escape: () => typing() && clearSlots(),
      Enter: submit,
      r: prefillLast,
      R: prefillLast,
    };
    if (/^[1-9]$/.test(event.key)) {
      const key = (state.round.keyboard || [])[Number(event.key) - 1];
      if (key) pickKey(key);
      event.preventDefault();
    } else if (actions[event.key]) {
      event.preventDefault();
      if (event.key === "Enter" || typing()) actions[event.key]();
    }
  }

  function renderKeyboard() {
    clear(ui.keyboard);
    setText(ui.keyCount, String(Math.min(9, (state.round.keyboard || []).length)));
    (state.round.keyboard || []).forEach((key, i) => {
      ui.keyboard.append(el("button", {
        type: "button", class: "key", title: `${key} (key ${i + 1})`, "aria-label": `key ${i + 1}: ${key}`,
        dataset: { testid: "key", key, index: i + 1 },
      }, el("span", { class: "hint", "aria-hidden": "true" }, i + 1), key));
    });
  }

  function slotColumn(i) {
    const isLock = locked(i);
    const key = isLock ? state.locks[String(i)] : state.slots[i];
    const active = !isLock && i === state.cursor && typing();
    const slot = el("button", {
      type: "button",
      class: `slot${active ? " active" : ""}`,
      "aria-label": `position ${i + 1}: ${key || "empty"}${isLock ? " (locked)" : ""}`,
      "aria-current": active ? "true" : null,
      "aria-disabled": isLock ? "true" : null,
      dataset: { testid: "slot", position: i, filled: key ? 1 : 0, locked: isLock ? 1 : 0, active: active ? 1 : 0 },
    },
    el("span", { class: "pos", "aria-hidden": "true" }, i + 1),
    key || "",
    isLock ? el("span", { class: "lock", "aria-hidden": "true" }, "🔒") : null);
    return el("div", { class: "slot-col" }, slot, lockToggle(i, isLock));
  }

  function lockToggle(i, isLock) {
    const proven = state.proven[String(i)];
    if (!isLock && !proven) return el("span", { class: "lock-spacer", "aria-hidden": "true" });
    const label = isLock ? `Unlock position ${i + 1}` : `Lock position ${i + 1} to ${proven} (a proven hit)`;
    return el("button", {
      type: "button", class: "lock-toggle", title: label, "aria-label": label, disabled: typing() ? null : true,
      dataset: { testid: "lock-toggle", position: i, locked: isLock ? 1 : 0 },
    }, isLock ? "🔒" : "🔓", el("span", { class: "wide-only" }, isLock ? " unlock" : " lock"));
  }

  /** Redraw the slots; a slot or lock toggle that had the focus (reached with Tab) keeps it. */
  function renderSlots() {
    const focused = ui.slots.contains(document.activeElement) ? document.activeElement.dataset : null;
    clear(ui.slots);
    for (let i = 0; i < LENGTH; i += 1) ui.slots.append(slotColumn(i));
    renderInputEnabled();
    if (focused && focused.testid) {
      const again = ui.slots.querySelector(`[data-testid="${focused.testid}"][data-position="${focused.position}"]`);
      if (again && !again.disabled) again.focus();
    }
  }

  /** A mouse press on a key or slot does not take the focus (Enter then still submits); Tab does. */
  function onBoardMousedown(event) {
    if (event.target instanceof Element && event.target.closest('[data-testid="key"], [data-testid="slot"]')) event.preventDefault();
  }

  function renderInputEnabled() {
    const canTypeNow = typing();
    ui.keyboard.querySelectorAll("button").forEach((b) => { b.disabled = !canTypeNow; });
    ui.clearButton.disabled = !canTypeNow;
    ui.prefill.disabled = !canTypeNow || !lastGuess(state);
    const complete = currentGuess(state) !== null;
    const paying = canPay(state) || isClosed(state) || isSolved(state); // broke: say so on the button, before any typing
    ui.submit.disabled = !canTypeNow || !complete || !paying;
    ui.submit.textContent = state.submitting ? "Submitting…" : state.retry ? "Retry guess"
      : paying ? "Submit guess" : "Out of funds until the next round";
  }

  async function onLockToggle(event) {
    const button = event.target.closest('[data-testid="lock-toggle"]');
    if (!button || !state.round) return;
    const i = Number(button.dataset.position);
    const wasLocked = button.dataset.locked === "1";
    button.disabled = true;
    try {
      if (wasLocked) {
        const key = state.locks[String(i)];
        await call("DELETE", roundPath(state, `/locks/${i}`));
        delete state.locks[String(i)];
        state.slots[i] = key || null; // keep the key in the slot: the player may still want it
        showMessage(ui.message, `Position ${i + 1} unlocked.`, "info");
      } else {
        const result = await call("PUT", roundPath(state, `/locks/${i}`));
        state.locks[String(i)] = result && result.key ? result.key : state.proven[String(i)];
        showMessage(ui.message, `Position ${i + 1} locked to ${state.locks[String(i)]}: it is filled in for every guess.`, "ok");
      }
      normalizeCursor();
      renderSlots();
      refreshGuesses().catch(() => {});
    } catch (err) {
      showMessage(ui.message, friendlyError(err), "error");
      button.disabled = false;
    }
  }

  /** The board's own listeners: keys, slots and lock toggles, Clear and "↺ Last guess". */
  function wire() {
    ui.keyboard.addEventListener("click", onKeyClick);
    ui.keyboard.addEventListener("mousedown", onBoardMousedown);
    ui.slots.addEventListener("mousedown", onBoardMousedown);
    ui.slots.addEventListener("click", (event) => {
      if (event.target.closest('[data-testid="lock-toggle"]')) onLockToggle(event);
      else onSlotClick(event);
    });
    ui.clearButton.addEventListener("click", clearSlots);
    ui.prefill.addEventListener("click", prefillLast);
  }

  return { wire, onKeydown, renderKeyboard, renderSlots, renderInputEnabled, normalizeCursor, clearSlots };
}
