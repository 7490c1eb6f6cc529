// Loaded with NODE_OPTIONS=--import before the MCP conformance suite: adds an agent token to every
// request the suite sends to the server under test, since its `server` command has no option for
// authentication. The suite speaks through two doors, both wrapped here: globalThis.fetch (the MCP
// SDK client) and undici's `request` (dns-rebinding-protection, which sets its own Host header).
// Requests to any other origin go out untouched, so the token never leaves the server under test.
//
// Environment: PAYWARDEN_CONFORMANCE_URL (the server's MCP URL), PAYWARDEN_CONFORMANCE_TOKEN,
// PAYWARDEN_CONFORMANCE_ENTRY (the suite's dist/index.js, to find the very undici it imports).
import { createRequire } from "node:module";

const token = process.env.PAYWARDEN_CONFORMANCE_TOKEN;
const target = process.env.PAYWARDEN_CONFORMANCE_URL;
const entry = process.env.PAYWARDEN_CONFORMANCE_ENTRY;
if (!token || !target || !entry) {
  throw new Error(
    "conformance_bearer.mjs needs PAYWARDEN_CONFORMANCE_TOKEN, PAYWARDEN_CONFORMANCE_URL and PAYWARDEN_CONFORMANCE_ENTRY",
  );
}
const origin = new URL(target).origin;
const authorization = `Bearer ${token}`;

function isTarget(url) {
  try {
    return new URL(String(url)).origin === origin;
  } catch {
    return false;
  }
}

const originalFetch = globalThis.fetch;
globalThis.fetch = function fetchWithBearer(input, init = {}) {
  const url = input instanceof Request ? input.url : input;
  if (!isTarget(url)) {
    return originalFetch(input, init);
  }
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  headers.set("authorization", authorization);
  return originalFetch(input, { ...init, headers });
};

// The suite does `import { request } from "undici"`. undici is CommonJS: patch its exports object
// before the suite's import reads it, and the suite gets the wrapper.
const undici = createRequire(entry)("undici");
const originalRequest = undici.request;
undici.request = function requestWithBearer(url, options = {}, ...rest) {
  if (!isTarget(url) || typeof options !== "object" || options === null) {
    return originalRequest.call(this, url, options, ...rest);
  }
  if (options.headers !== undefined && (Array.isArray(options.headers) || typeof options.headers !== "object")) {
    throw new Error("conformance_bearer.mjs: undici headers given in a form this wrapper does not handle");
  }
  const headers = { ...(options.headers ?? {}) };
  for (const name of Object.keys(headers)) {
    if (name.toLowerCase() === "authorization") delete headers[name];
  }
  headers.authorization = authorization;
  return originalRequest.call(this, url, { ...options, headers }, ...rest);
};
