// Codemojex · the economy on the Play page: what the next guess costs and how a player gets more.
//
// Everything comes from GET /api/wallet?round_id=… (its `economy`, the rule, and its `offer`, the
// player's wallet in that round): the page never computes a price the server would not charge. The
// server stays the authority: a guess it refuses anyway (another tab spent the last ticket) is still
// answered 402 insufficient_funds and changes nothing.

const plural = (amount, currency) => `${amount} ${currency}${amount === 1 ? "" : "s"}`;

/** "3 tickets and 50 coins" for [{currency, amount}, …]; "" for none. */
export function amountsText(list) {
  const parts = (list || []).map((p) => plural(p.amount, p.currency));
  if (parts.length <= 1) return parts.join("");
  return `${parts.slice(0, -1).join(", ")} and ${parts[parts.length - 1]}`;
}

/** The wallet's offer for `round` (null when the wallet was read for another round, or none). */
export function offerFor(wallet, round) {
  const offer = wallet && wallet.offer;
  return offer && round && offer.round_id === round.round_id ? offer : null;
}

/** What the next guess in `round` costs: {currency, amount}, null when the player cannot pay, or
 *  undefined while the wallet's offer for this round is not known yet. */
export function nextPrice(wallet, round) {
  const offer = offerFor(wallet, round);
  return offer ? offer.next_price : undefined;
}

/** The price line ("next guess: 1 ticket") and the rule line the page shows before the player types. */
export function describe(wallet, round, formatClock) {
  const offer = offerFor(wallet, round);
  if (!offer) return { price: "", rule: "", broke: false };
  const rule = (wallet.economy && wallet.economy.allowance) || [];
  const reward = amountsText(wallet.economy && wallet.economy.solve_reward);
  const level = amountsText(rule);
  const price = offer.next_price;
  const lines = [];
  if (!price) {
    const next = offer.next_round || {};
    let when = "";
    if (next.opens_ms) when = ` (it opens at ${formatClock(next.opens_ms)})`;
    else if (round.closes_ms) when = ` (this one closes at ${formatClock(round.closes_ms)})`;
    const names = rule.map((p) => `${p.currency}s`).join(" and ") || "funds";
    lines.push(`Out of ${names} for this round. Your first guess of the next round tops you up to ${level}${when}.`);
  } else if (!offer.allowance_taken && offer.top_up.length) {
    lines.push(`Your first guess of this round tops you up to ${level} (+${amountsText(offer.top_up)}).`);
  } else if (level) {
    lines.push(`Every round, your first guess tops you up to ${level}.`);
  }
  if (reward) lines.push(offer.rewarded ? `You earned ${reward} for solving this round.` : `Solving the round earns ${reward}.`);
  return {
    price: price ? `next guess: ${plural(price.amount, price.currency)}` : "you cannot pay for another guess this round",
    rule: lines.join(" "),
    broke: !price,
  };
}
