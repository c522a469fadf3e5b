// Codemojex: helpers shared by the pages (Play, History, Proof, Dashboard).
//
// - the player session in localStorage (cmx.token, cmx.player_id, cmx.name, cmx.token_expires_ms,
//   cmx.token_life_ms) and join(), renewToken() (rotate a token past half its life) and logout();
// - small DOM builders (el, clear) so server text only ever lands in textContent;
// - feedback marks (hit / near / miss → ✓ / ↔ / ✕ on green / yellow / grey), short ids.
// It re-exports the parts kept in modules of their own, so a page imports them all from here:
// api.js (api(), ApiError, isRetryable), friendly_errors.js (friendlyError), time.js (clock and
// duration texts, serverClock, every). Those import only api.js, never this module.

import { api, ApiError, isRetryable } from "/static/api.js";

export { api, ApiError, isRetryable } from "/static/api.js";
export { friendlyError } from "/static/friendly_errors.js";
export { formatClock, formatClockMs, formatDuration, formatRelative, serverClock, every } from "/static/time.js";

// ---------------------------------------------------------------------------------------------
// The player session

const KEYS = {
  token: "cmx.token",
  player_id: "cmx.player_id",
  name: "cmx.name",
  token_expires_ms: "cmx.token_expires_ms",
  token_life_ms: "cmx.token_life_ms",
};

function storageGet(key) {
  try {
    return localStorage.getItem(key);
  } catch {
    return null;
  }
}

function storageSet(key, value) {
  try {
    if (value === null || value === undefined) localStorage.removeItem(key);
    else localStorage.setItem(key, String(value));
  } catch {
    /* private mode: the session lasts as long as the page */
  }
}

/** The stored player session {token, player_id, name, token_expires_ms, token_life_ms}, or null. */
export function getSession() {
  const token = storageGet(KEYS.token);
  if (!token) return null;
  return {
    token,
    player_id: storageGet(KEYS.player_id) || "",
    name: storageGet(KEYS.name) || "",
    token_expires_ms: Number(storageGet(KEYS.token_expires_ms)) || 0,
    token_life_ms: Number(storageGet(KEYS.token_life_ms)) || 0,
  };
}

export function saveSession({ token, player_id, name, token_expires_ms = 0, token_life_ms = 0 }) {
  storageSet(KEYS.token, token);
  storageSet(KEYS.player_id, player_id);
  storageSet(KEYS.name, name);
  storageSet(KEYS.token_expires_ms, token_expires_ms || null);
  storageSet(KEYS.token_life_ms, token_life_ms || null);
}

export function clearSession() {
  Object.values(KEYS).forEach((key) => storageSet(key, null));
}

/**
 * Register a player (POST /api/players) and store the session; returns {session, recovery_code} (the
 * code is shown once and never stored here).
 */
export async function join(name) {
  const player = await api("POST", "/api/players", { body: { name } });
  const session = {
    token: player.token,
    player_id: player.player_id,
    name: player.name,
    token_expires_ms: player.token_expires_ms || 0,
    token_life_ms: player.token_expires_ms ? player.token_expires_ms - player.created_ms : 0,
  };
  saveSession(session);
  return { session, recovery_code: player.recovery_code || null };
}

/**
 * Rotate the session's token (POST /api/me/token) when less than half its life is left, or its end is
 * unknown (a session stored before tokens ended). A lost reply is retried once with the same old
 * token: the server answers the same new token. Returns the (possibly renewed) session; a 401 throws.
 */
export async function renewToken(session) {
  const left = session.token_expires_ms - Date.now();
  if (session.token_expires_ms && session.token_life_ms && left > session.token_life_ms / 2) return session;
  let issued;
  try {
    issued = await api("POST", "/api/me/token", { token: session.token });
  } catch (err) {
    if (!isRetryable(err)) throw err;
    issued = await api("POST", "/api/me/token", { token: session.token });
  }
  const life = session.token_life_ms || Math.max(0, issued.token_expires_ms - Date.now());
  const renewed = { ...session, token: issued.token, token_expires_ms: issued.token_expires_ms, token_life_ms: life };
  saveSession(renewed);
  return renewed;
}

/** Log out: revoke the token on the server (DELETE /api/me/token), then forget the session here. */
export async function logout(session) {
  try {
    if (session) await api("DELETE", "/api/me/token", { token: session.token });
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 401)) throw err; // already gone: nothing to revoke
  }
  clearSession();
}

/** n random lower-case letters (for generated names). */
export function randomLetters(n) {
  const alphabet = "abcdefghijklmnopqrstuvwxyz";
  const bytes = new Uint8Array(n);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => alphabet[b % alphabet.length]).join("");
}

/** A fresh idempotency key (crypto.randomUUID where available, else random hex). */
export function newIdempotencyKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// ---------------------------------------------------------------------------------------------
// DOM helpers: build elements with textContent, never innerHTML with server text.

/** Escape text for HTML (for the rare place a string must be HTML). */
export function escapeHtml(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

/**
 * el("td", {class: "num", dataset: {testid: "x"}, title: "t"}, "text", childNode, ...):
 * attributes are set with setAttribute (dataset keys become data-*), children as text nodes or nodes.
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "dataset") {
      for (const [key, data] of Object.entries(value)) {
        if (data !== null && data !== undefined) node.dataset[key] = String(data);
      }
    } else if (name === "class") {
      node.className = value;
    } else if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else if (value === true) {
      node.setAttribute(name, "");
    } else {
      node.setAttribute(name, String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Remove every child of node. */
export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

/** Set a node's textContent only when it changed (keeps selections and avoids repaints). */
export function setText(node, text) {
  const value = String(text ?? "");
  if (node && node.textContent !== value) node.textContent = value;
}

export const $ = (selector, root = document) => root.querySelector(selector);
export const byTestId = (id, root = document) => root.querySelector(`[data-testid="${id}"]`);

/** Show a message in a message element; kind is "info" | "ok" | "error". */
export function showMessage(node, text, kind = "info") {
  if (!node) return;
  node.textContent = text || "";
  node.dataset.kind = kind;
  node.hidden = !text;
}

// ---------------------------------------------------------------------------------------------
// Feedback marks

// Each mark has a symbol of its own as well as a colour, so hit, near and miss differ in shape for a
// reader who cannot tell the colours apart (or prints in grayscale), and a name read out in words.
export const MARKS = {
  hit: { symbol: "✓", title: "hit: the right emoji in the right place" },
  near: { symbol: "↔", title: "near: in the code, but elsewhere" },
  miss: { symbol: "✕", title: "miss: not (or no more) in the code" },
};

/** One feedback cell: <span data-testid="mark" class="mark hit" role="img" aria-label="position 1: hit">✓</span>. */
export function markCell(mark, position) {
  const known = MARKS[mark] ? mark : "miss";
  return el("span", {
    class: `mark ${known}`,
    role: "img",
    title: `position ${position + 1} ${MARKS[known].title}`,
    "aria-label": `position ${position + 1}: ${known}`,
    dataset: { testid: "mark", mark: known, position },
  }, MARKS[known].symbol);
}

/** The feedback row of a scored guess: one mark cell per position. */
export function renderMarks(marks) {
  return el("span", { class: "marks", role: "group", "aria-label": "feedback" }, (marks || []).map((mark, i) => markCell(mark, i)));
}

/** "🟩×3 🟨×1" for hits / nears counts. */
export function countsText(hits, nears) {
  return `🟩×${hits ?? 0} 🟨×${nears ?? 0}`;
}

/** The short form of a branded id for narrow places: "JOB…X7K2QZ" (the full id goes in title). */
export function shortId(id) {
  const text = String(id || "");
  return text.length > 12 ? `${text.slice(0, 3)}…${text.slice(-6)}` : text;
}
