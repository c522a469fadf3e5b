// Codemojex · the HTTP API client shared by every page (common.js re-exports it).
//
// api() fetches JSON from the HTTP API (docs/http-api.md) and throws ApiError on a refusal (the
// contract's error code, its problem, the body) or on a network failure (status 0, code "network");
// isRetryable() says whether a call's effect is unknown, so it may be retried with the same
// Idempotency-Key. A leaf: it imports nothing.

/** An error answered by the API (or a network failure, status 0, code "network"). */
export class ApiError extends Error {
  constructor(message, { status = 0, code = "network", problem = null, body = null } = {}) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.problem = problem;
    this.body = body;
  }
}

/** True when the call's effect is unknown and it may be retried with the same Idempotency-Key. */
export function isRetryable(err) {
  return err instanceof ApiError && (err.status === 0 || err.code === "unavailable");
}

async function readJson(response) {
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function errorFrom(response, body) {
  const shape = body && typeof body === "object" && body.error && typeof body.error === "object" ? body.error : null;
  const code = (shape && shape.code) || `http_${response.status}`;
  const message = (shape && shape.message) || response.statusText || `HTTP ${response.status}`;
  const problem = (shape && shape.problem) || (body && body.problem) || null;
  return new ApiError(message, { status: response.status, code, problem, body });
}

/**
 * Call the API: api("POST", "/api/players", {body: {name}}) → the parsed JSON (null when empty).
 * `token` sends `Authorization: Bearer <token>`; `headers` adds more. Throws ApiError.
 */
export async function api(method, path, { body, token, headers, signal } = {}) {
  const init = { method, headers: { Accept: "application/json", ...(headers || {}) }, signal, cache: "no-store" };
  if (token) init.headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (cause) {
    if (cause && cause.name === "AbortError") throw cause;
    throw new ApiError("the server could not be reached", { status: 0, code: "network" });
  }
  const parsed = await readJson(response);
  if (!response.ok) throw errorFrom(response, parsed);
  return parsed;
}
