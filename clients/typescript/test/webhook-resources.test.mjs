// tg.webhookEndpoints and tg.webhookDeliveries: what each method sends (against a stub),
// and one delivery end to end: the real server posts to a receiver of the test's own on
// loopback, and verifyWebhook accepts it with the endpoint's secret.

import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";

import Taskgate, { verifyWebhook } from "../dist/index.js";
import { okEnvelope, sendJSON, stubServer, unique } from "./helpers.mjs";

const ENDPOINT = {
  id: "whe_01JD2W3KX7ABCDEFGHJKMNPQRS",
  object: "webhook_endpoint",
  url: "https://example.com/hook",
  events: ["task.succeeded"],
  description: null,
  enabled: true,
  disabled_reason: null,
  mode: "live",
  created_at: "2026-11-21T13:45:12.345Z",
};
const DELIVERY = {
  id: "whd_01JD2W3KX7ABCDEFGHJKMNPQRS",
  object: "webhook_delivery",
  message_id: "msg_01JD2W3KX7ABCDEFGHJKMNPQRS_succeeded",
  endpoint_id: ENDPOINT.id,
  event_type: "task.succeeded",
  task_id: "task_01JD2W3KX7ABCDEFGHJKMNPQRS",
  mode: "live",
  status: "succeeded",
  attempts: [],
  next_attempt_at: null,
  created_at: "2026-11-21T13:45:12.345Z",
};

test("webhook resources send the documented requests", async () => {
  const answers = [
    [201, { ...ENDPOINT, secret: "whsec_a" }],
    [200, { object: "list", items: [ENDPOINT], has_more: true, next_cursor: ENDPOINT.id }],
    [200, { object: "list", items: [{ ...ENDPOINT, id: "whe_2" }], has_more: false, next_cursor: null }],
    [200, { ...ENDPOINT, enabled: false, disabled_reason: "owner" }],
    [200, { secret: "whsec_b" }],
    [200, { secret: "whsec_c" }],
    [202, { ...DELIVERY, event_type: "webhook.test", task_id: null }],
    [200, { id: ENDPOINT.id, object: "webhook_endpoint", deleted: true }],
    [200, { object: "list", items: [DELIVERY], has_more: false, next_cursor: null }],
    [202, { ...DELIVERY, status: "pending" }],
    [200, { secret: "whsec_d" }],
    [200, { secret: "whsec_e" }],
  ];
  const stub = await stubServer((req, res, body, n) => sendJSON(res, answers[n][0], okEnvelope(answers[n][1])));
  try {
    const tg = new Taskgate({ baseURL: stub.url, apiKey: "tg_stub", maxRetries: 0 });
    const made = await tg.webhookEndpoints.create({ url: ENDPOINT.url, events: ["task.succeeded"] });
    assert.equal(made.secret, "whsec_a");
    const all = await tg.webhookEndpoints.list({ limit: 1 }).toArray();
    assert.deepEqual(
      all.map((e) => e.id),
      [ENDPOINT.id, "whe_2"],
    );
    const changed = await tg.webhookEndpoints.update(ENDPOINT.id, { enabled: false, description: null });
    assert.equal(changed.disabled_reason, "owner");
    assert.equal(await tg.webhookEndpoints.secret(ENDPOINT.id), "whsec_b");
    assert.equal(await tg.webhookEndpoints.rotateSecret(ENDPOINT.id), "whsec_c");
    assert.equal((await tg.webhookEndpoints.test(ENDPOINT.id)).event_type, "webhook.test");
    assert.equal((await tg.webhookEndpoints.delete(ENDPOINT.id)).deleted, true);
    const log = await tg.webhookDeliveries.list({ endpointId: ENDPOINT.id, status: "failed" }).toArray();
    assert.equal(log[0].id, DELIVERY.id);
    assert.equal((await tg.webhookDeliveries.retry(DELIVERY.id)).status, "pending");
    assert.equal(await tg.webhookEndpoints.signingSecret(), "whsec_d");
    assert.equal(await tg.webhookEndpoints.rotateSigningSecret(), "whsec_e");

    const e = `/api/v1/webhook_endpoints/${ENDPOINT.id}`;
    assert.deepEqual(
      stub.requests.map((r) => `${r.method} ${r.url}`),
      [
        "POST /api/v1/webhook_endpoints",
        "GET /api/v1/webhook_endpoints?limit=1",
        `GET /api/v1/webhook_endpoints?limit=1&cursor=${ENDPOINT.id}`,
        `PATCH ${e}`,
        `GET ${e}/secret`,
        `POST ${e}/rotate_secret`,
        `POST ${e}/test`,
        `DELETE ${e}`,
        `GET /api/v1/webhook_deliveries?endpoint_id=${ENDPOINT.id}&status=failed`,
        `POST /api/v1/webhook_deliveries/${DELIVERY.id}/retry`,
        "GET /api/v1/webhooks/secret",
        "POST /api/v1/webhooks/secret/rotate",
      ],
    );
    assert.deepEqual(JSON.parse(stub.requests[0].body), { url: ENDPOINT.url, events: ["task.succeeded"] });
    assert.deepEqual(JSON.parse(stub.requests[3].body), { enabled: false, description: null });
  } finally {
    await stub.close();
  }
});

test("call sends its webhook", async () => {
  const stub = await stubServer((req, res) => sendJSON(res, 200, okEnvelope({ id: "task_x", status: "succeeded" })));
  try {
    const tg = new Taskgate({ baseURL: stub.url, apiKey: "tg_stub", maxRetries: 0 });
    await tg.call({ api: "sentiment", input: { text: "hi" }, webhook: { url: ENDPOINT.url, events: ["task.failed"] } });
    assert.deepEqual(JSON.parse(stub.requests[0].body).webhook, { url: ENDPOINT.url, events: ["task.failed"] });
  } finally {
    await stub.close();
  }
});

test("a live delivery reaches a receiver and verifies", async () => {
  const got = [];
  let arrived;
  const receiver = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    got.push({ body: Buffer.concat(chunks).toString("utf8"), headers: req.headers });
    res.writeHead(200).end();
    arrived?.();
  });
  await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${receiver.address().port}/hook`;
  const tg = new Taskgate();
  const marker = unique("webhook");
  const endpoint = await tg.webhookEndpoints.create({ url, events: ["task.succeeded"], description: marker });
  try {
    assert.match(endpoint.secret, /^whsec_/);
    assert.equal((await tg.webhookEndpoints.get(endpoint.id)).secret, undefined);
    const task = await tg.call({ api: "sentiment", input: { text: "webhooks are nice" }, metadata: { marker } });
    const deadline = Date.now() + 15_000;
    let event;
    while (!event) {
      for (const m of got.splice(0)) {
        const e = verifyWebhook(m.body, m.headers, endpoint.secret);
        if (e.data.id === task.id) event = e;
      }
      if (event) break;
      assert.ok(Date.now() < deadline, "no delivery within 15 s");
      await new Promise((resolve) => {
        arrived = resolve;
        setTimeout(resolve, 200);
      });
    }
    assert.equal(event.type, "task.succeeded");
    assert.deepEqual(event.data.metadata, { marker });
    const log = await tg.webhookDeliveries.list({ taskId: task.id }).toArray();
    assert.deepEqual(
      log.map((d) => d.endpoint_id),
      [endpoint.id],
    );
  } finally {
    await tg.webhookEndpoints.delete(endpoint.id);
    receiver.closeAllConnections();
    await new Promise((resolve) => receiver.close(resolve));
  }
});
