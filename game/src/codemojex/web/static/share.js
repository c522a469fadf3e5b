// Codemojex · Play: the share grid.
//
// The server builds the text (codemojex.hints.share_grid, the `share` of GET /api/rounds/{id}/guesses):
// the round id, the attempts, one row of 🟩 hit 🟨 near ⬜ miss per attempt; no emoji of the guesses and
// nothing of the secret. This module shows it in a <details> panel, opens the panel once after the
// solve, and copies it to the clipboard (navigator.clipboard, else a selected textarea and "copy").

import { setText } from "/static/common.js";

let openedFor = null; // the round whose solve opened the panel once (the player may close it again)

/** Show `text` (null: hide the panel); `solved` opens the panel the first time for `roundId`. */
export function renderShare(panel, text, { roundId, solved }) {
  panel.hidden = !text;
  setText(panel.querySelector('[data-testid="share-text"]'), text || "");
  if (text && solved && openedFor !== roundId) {
    openedFor = roundId;
    panel.open = true;
  }
}

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.append(area);
  area.select();
  const ok = document.execCommand("copy");
  area.remove();
  if (!ok) throw new Error("copy refused");
}

/** Wire the panel's Copy button: copies the shown text and says so in its status line. */
export function wireShare(panel) {
  const button = panel.querySelector('[data-testid="share-copy"]');
  const status = panel.querySelector('[data-testid="share-copied"]');
  button.addEventListener("click", async () => {
    const text = panel.querySelector('[data-testid="share-text"]').textContent;
    try {
      await copyText(text);
      setText(status, "Copied.");
    } catch {
      setText(status, "Could not copy: select the text and copy it.");
    }
  });
}
