// verifyWebhook: Standard Webhooks 1.0 signatures, checked against the specification's
// reference vector and the official `standardwebhooks` npm package (a dev dependency).
// Needs no server.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Webhook } from "standardwebhooks";

import { TaskgateError, WebhookVerificationError, verifyWebhook } from "../dist/index.js";

// The example of the specification's reference libraries' tests (and of
// crates/taskgate-core/src/webhook.rs).
const REF = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};

const EVENT = {
  type: "task.succeeded",
  timestamp: "2026-01-01T00:00:00.000Z",
  data: {
    id: "task_01JGQ4YZ0A8E6W3V9X2B5N7MKQ",
    object: "task",
    api: "sentiment",
    mode: "live",
    status: "succeeded",
    output: { label: "positive", note: "très bien ✓" },
    usage: { units: 1, cost_usd: "0.000100" },
    metadata: {},
    created_at: "2025-12-31T23:59:58.120Z",
  },
};
const BODY = JSON.stringify(EVENT);
const T = 1767225600;

const newSecret = () => `whsec_${randomBytes(32).toString("base64")}`;

/** Headers for `body` as the official package signs it, at `at` (Unix seconds; now by default). */
function signed(secret, body, { id = "msg_test", at = Math.floor(Date.now() / 1000) } = {}) {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(at),
    "webhook-signature": new Webhook(secret).sign(id, new Date(at * 1000), body),
  };
}

/** Sets the receiver's clock (Unix seconds) for the rest of test `t`. */
function clock(t, at) {
  t.mock.method(Date, "now", () => at * 1000);
}

function rejects(fn, pattern) {
  assert.throws(fn, (err) => {
    assert.ok(err instanceof WebhookVerificationError, `${err}`);
    assert.ok(err instanceof TaskgateError);
    assert.equal(err.name, "WebhookVerificationError");
    if (pattern) assert.match(err.message, pattern);
    return true;
  });
}

test("the reference vector", (t) => {
  clock(t, REF.timestamp);
  const headers = { "webhook-id": REF.id, "webhook-timestamp": String(REF.timestamp), "webhook-signature": REF.signature };
  const event = verifyWebhook(REF.body, headers, REF.secret);
  assert.deepEqual(event, { test: 2432232314, messageId: REF.id });
  assert.deepEqual(verifyWebhook(Buffer.from(REF.body), headers, REF.secret), event);
  // The key without its prefix, as the official libraries allow.
  assert.deepEqual(verifyWebhook(REF.body, headers, REF.secret.slice("whsec_".length)), event);
  rejects(() => verifyWebhook('{"test": 2432232315}', headers, REF.secret), /no matching signature/);
  rejects(() => verifyWebhook(REF.body, { ...headers, "webhook-id": `${REF.id}x` }, REF.secret));
  rejects(() => verifyWebhook(REF.body, { ...headers, "webhook-timestamp": String(REF.timestamp + 1) }, REF.secret));
});

test("a round trip signed by the official standardwebhooks package", () => {
  const secret = newSecret();
  const headers = signed(secret, BODY, { id: "msg_01JGQ4Z4V6X8WB3N2Y7K5M9RTD" });
  const official = new Webhook(secret).verify(BODY, headers);
  const bytes = new TextEncoder().encode(BODY);
  for (const payload of [BODY, Buffer.from(BODY), bytes, bytes.buffer.slice(0)]) {
    const event = verifyWebhook(payload, headers, secret);
    const { messageId, ...body } = event;
    assert.deepEqual(body, official);
    assert.deepEqual(body, EVENT);
    assert.equal(messageId, "msg_01JGQ4Z4V6X8WB3N2Y7K5M9RTD");
    assert.equal(event.type, "task.succeeded");
    assert.equal(event.data.output.note, "très bien ✓");
    assert.equal(event.data.output_omitted, undefined);
  }
});

test("headers: a Fetch Headers, Node's lowercase req.headers, any case", () => {
  const secret = newSecret();
  const headers = signed(secret, BODY);
  const upper = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), v]));
  for (const h of [new Headers(headers), headers, upper, { ...headers, "content-type": "application/json", "x-none": undefined }]) {
    assert.equal(verifyWebhook(BODY, h, secret).type, "task.succeeded");
  }
});

test("rotation: two signatures, only the second valid, is accepted", (t) => {
  clock(t, T);
  const [next, old, other] = [newSecret(), newSecret(), newSecret()];
  const both = `${signed(old, BODY, { at: T })["webhook-signature"]} ${signed(next, BODY, { at: T })["webhook-signature"]}`;
  const headers = { ...signed(next, BODY, { at: T }), "webhook-signature": both };
  assert.equal(verifyWebhook(BODY, headers, next).type, "task.succeeded");
  // The old secret's holder accepts it too; a third secret does not.
  assert.equal(verifyWebhook(BODY, headers, old).type, "task.succeeded");
  rejects(() => verifyWebhook(BODY, headers, other), /no matching signature/);
  // Unknown versions and junk are skipped.
  const junk = { ...headers, "webhook-signature": `v2,abc v1,!!! nonsense ${both}` };
  assert.equal(verifyWebhook(BODY, junk, next).type, "task.succeeded");
  // Two header lines: a Fetch Headers joins them with ", ", Node's req.headers may give an array.
  const lines = new Headers(signed(next, BODY, { at: T }));
  lines.set("webhook-signature", signed(old, BODY, { at: T })["webhook-signature"]);
  lines.append("webhook-signature", signed(next, BODY, { at: T })["webhook-signature"]);
  assert.equal(verifyWebhook(BODY, lines, next).type, "task.succeeded");
  const array = { ...headers, "webhook-signature": both.split(" ") };
  assert.equal(verifyWebhook(BODY, array, next).type, "task.succeeded");
});

test("a test event and a task whose output was omitted", () => {
  const secret = newSecret();
  const { output, ...task } = EVENT.data;
  const omitted = JSON.stringify({ ...EVENT, data: { ...task, output_omitted: true } });
  const event = verifyWebhook(omitted, signed(secret, omitted), secret);
  assert.equal(event.data.output_omitted, true);
  assert.equal(event.data.output, undefined);
  const testBody = JSON.stringify({ type: "webhook.test", timestamp: "2026-01-01T00:00:00Z", data: { mode: "test" } });
  const testEvent = verifyWebhook(testBody, signed(secret, testBody), secret);
  assert.equal(testEvent.type, "webhook.test");
  assert.deepEqual(testEvent.data, { mode: "test" });
});

test("rejects a tampered body and a wrong secret", () => {
  const secret = newSecret();
  const headers = signed(secret, BODY);
  rejects(() => verifyWebhook(BODY.replace("positive", "negative"), headers, secret), /no matching signature/);
  rejects(() => verifyWebhook(`${BODY} `, headers, secret), /no matching signature/);
  rejects(() => verifyWebhook(BODY, headers, newSecret()), /no matching signature/);
});

test("rejects stale and future timestamps; 5 minutes either way is accepted", (t) => {
  const secret = newSecret();
  const headers = signed(secret, BODY, { at: T });
  for (const now of [T - 300, T, T + 300]) {
    clock(t, now);
    assert.equal(verifyWebhook(BODY, headers, secret).type, "task.succeeded");
    t.mock.restoreAll();
  }
  clock(t, T + 301);
  rejects(() => verifyWebhook(BODY, headers, secret), /too old/);
  t.mock.restoreAll();
  clock(t, T - 301);
  rejects(() => verifyWebhook(BODY, headers, secret), /too new/);
  t.mock.restoreAll();
  clock(t, T + 3600);
  assert.equal(verifyWebhook(BODY, headers, secret, { tolerance: 3600 }).type, "task.succeeded");
  assert.throws(() => verifyWebhook(BODY, headers, secret, { tolerance: -1 }), RangeError);
  for (const bad of ["", "abc", "1767225600.5", "-1767225600", "+1767225600", "1767225600000000000", "0x10"]) {
    rejects(() => verifyWebhook(BODY, { ...headers, "webhook-timestamp": bad }, secret));
  }
});

test("rejects missing headers", () => {
  const secret = newSecret();
  const headers = signed(secret, BODY);
  for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
    const without = { ...headers };
    delete without[name];
    rejects(() => verifyWebhook(BODY, without, secret), new RegExp(`missing webhook header\\(s\\): ${name}`));
    rejects(() => verifyWebhook(BODY, { ...headers, [name]: "" }, secret), /missing/);
    const fetchHeaders = new Headers(headers);
    fetchHeaders.delete(name);
    rejects(() => verifyWebhook(BODY, fetchHeaders, secret), /missing/);
  }
  rejects(() => verifyWebhook(BODY, {}, secret), /missing/);
});

test("rejects secrets that are not whsec_ and base64, and bodies that are not JSON objects", () => {
  const headers = signed(newSecret(), BODY);
  for (const bad of ["", "whsec_", "whsec_not base64!", "tg_live_abc-def", "whsec_%%%%", "whsec_a"]) {
    rejects(() => verifyWebhook(BODY, headers, bad), /secret/);
  }
  const secret = newSecret();
  for (const body of ["not json", "[1, 2]", "null"]) {
    rejects(() => verifyWebhook(body, signed(secret, body), secret), /JSON/);
  }
});

test("the Go client's vectors (signed by the official Python package) give the same verdicts", (t) => {
  const doc = JSON.parse(readFileSync(new URL("../../go/testdata/webhooks.json", import.meta.url), "utf8"));
  assert.ok(doc.cases.length >= 15);
  for (const c of doc.cases) {
    clock(t, c.now);
    if (c.valid) {
      const event = verifyWebhook(c.payload, c.headers, c.secret);
      assert.equal(event.type, c.type, c.name);
      assert.equal(event.messageId, c.headers["webhook-id"], c.name);
    } else {
      rejects(() => verifyWebhook(c.payload, c.headers, c.secret));
    }
    t.mock.restoreAll();
  }
});
