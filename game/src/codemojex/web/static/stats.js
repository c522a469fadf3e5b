// Codemojex · Play: the player's stats (GET /api/me/stats, codemojex.streaks): rounds played, solved,
// best attempts, current and best streak. A streak counts the player's played rounds, in round order,
// that they solved; a closed round they did not solve ends it, a round still open does not yet.

import { setText } from "/static/common.js";

const FIELDS = {
  played: "stat-played",
  solved: "stat-solved",
  best_attempts: "stat-best",
  current_streak: "stat-streak",
  best_streak: "stat-best-streak",
};

/** Fetch the stats with `call` (the page's authorised API call) and show them in `panel`. */
export async function refreshStats(call, panel) {
  const stats = await call("GET", "/api/me/stats");
  for (const [field, testid] of Object.entries(FIELDS)) {
    const value = stats[field];
    setText(panel.querySelector(`[data-testid="${testid}"]`), value === null || value === undefined ? "–" : value);
  }
  panel.hidden = false;
}
