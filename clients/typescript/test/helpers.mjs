// Shared by the tests: the live server's settings (from scripts/with-server.sh) and
// small local HTTP servers that stand in for the server or sit in front of it.

import http from "node:http";

function need(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(
      `${name} is not set: run the tests through scripts/with-server.sh (see the README's "Tests").`,
    );
  }
  return value;
}

export const env = {
  get baseURL() {
    return need("TASKGATE_BASE_URL");
  },
  get apiKey() {
    return need("TASKGATE_API_KEY");
  },
  get testKey() {
    return need("TASKGATE_TEST_KEY");
  },
  get restrictedKey() {
    return need("TASKGATE_RESTRICTED_KEY");
  },
  get limitedKey() {
    return need("TASKGATE_LIMITED_KEY");
  },
};

/** A unique label for this run, so that tests find their own tasks. */
export function unique(prefix) {
  return `${prefix}-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
}

/**
 * A local HTTP server answering with `handler(req, body, n)` (n counts requests from 0).
 * Returns { url, requests, close }; `requests` records {method, url, headers, body, at}.
 */
export async function stubServer(handler) {
  const requests = [];
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks).toString("utf8");
    const n = requests.length;
    requests.push({ method: req.method, url: req.url, headers: req.headers, body, at: Date.now() });
    try {
      await handler(req, res, body, n);
    } catch (err) {
      res.destroy(err);
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/api/v1`,
    port,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Writes a Taskgate envelope. */
export function sendJSON(res, status, payload, headers = {}) {
  const body = JSON.stringify(payload);
  res.writeHead(status, {
    "Content-Type": "application/json",
    "X-Request-Id": "req_stub",
    ...headers,
  });
  res.end(body);
}

export function okEnvelope(data) {
  return { success: true, data, meta: { request_id: "req_stub", latency_ms: 0.1 } };
}

export function errorEnvelope(type, code, message, extra = {}) {
  return {
    success: false,
    data: null,
    error: { type, code, message, param: null, ...extra },
    meta: { request_id: "req_stub_error", latency_ms: 0.1 },
  };
}

/** A port on which nothing listens (bound, then closed). */
export async function closedPort() {
  const server = http.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Forwards a request to the real server and returns { status, headers, body }. */
export async function forward(req, body) {
  const target = new URL(env.baseURL);
  const path = req.url.replace(/^\/api\/v1/, target.pathname.replace(/\/$/, ""));
  const headers = { ...req.headers };
  delete headers.host;
  delete headers["content-length"];
  delete headers.connection;
  const response = await fetch(`${target.origin}${path}`, {
    method: req.method,
    headers,
    body: req.method === "GET" ? undefined : body,
  });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
