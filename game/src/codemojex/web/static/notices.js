// Codemojex · Play: solve notices.
//
// The event stream's `solved` event (codemojex.web.hub: a player's standing turned solved) is shown to
// everyone watching the round in a polite live region: who, in how many attempts, at what rank; nothing
// of their guesses. The newest few are kept.

import { el } from "/static/common.js";

const KEPT = 3;

/** The text of one notice; `me` is the watching player's id. */
export function noticeText(data, me) {
  const who = data.player_id === me ? "You" : data.name;
  const attempts = `${data.attempts} attempt${data.attempts === 1 ? "" : "s"}`;
  const rank = data.rank ? ` (rank ${data.rank})` : "";
  return `🎉 ${who} solved it in ${attempts}${rank}.`;
}

/** Add a notice for `data` to `region` (the newest last), dropping the oldest past KEPT. */
export function showSolveNotice(region, data, me) {
  region.hidden = false;
  region.append(el("p", { class: "notice", dataset: { testid: "notice", player: data.player_id } }, noticeText(data, me)));
  while (region.children.length > KEPT) region.firstElementChild.remove();
}

/** Forget the notices (a new round). */
export function clearNotices(region) {
  region.replaceChildren();
  region.hidden = true;
}
