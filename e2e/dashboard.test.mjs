// The dashboard in a real browser (Debian's Chromium through playwright-core),
// found the way a screen reader finds it: by labels, roles and names.
//
// Environment (scripts/e2e.sh sets it): TASKGATE_URL (the server), ADMIN_EMAIL
// and ADMIN_PASSWORD (printed at first start), TEST_KEY (the first start's test
// key), SCREENSHOTS (a directory), CHROMIUM (default /usr/bin/chromium).

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { chromium } from "playwright-core";

const base = process.env.TASKGATE_URL;
const shots = process.env.SCREENSHOTS ?? "target/e2e-screenshots";
const label = process.env.BACKEND ?? "sqlite";
mkdirSync(shots, { recursive: true });

let browser;
let page;

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--no-sandbox"],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
});

after(async () => {
  await browser?.close();
});

async function shot(name) {
  await page.screenshot({ path: `${shots}/${label}-${name}.png`, fullPage: true });
}

/** The API as a client calls it. */
async function api(method, path, key, body) {
  const r = await fetch(`${base}/api/v1/${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: body && JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

async function until(check, what) {
  const started = Date.now();
  while (!(await check())) {
    assert.ok(Date.now() - started < 5000, `${what} within 5 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test("sign in", async () => {
  await page.goto(`${base}/dashboard`);
  await page.getByLabel("Email").fill(process.env.ADMIN_EMAIL);
  await page.getByLabel("Password").fill("not the password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByText("Email or password is wrong.").waitFor();
  await shot("sign-in-refused");
  await page.getByLabel("Password").fill(process.env.ADMIN_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "API keys" }).waitFor();
  const nav = page.getByRole("navigation", { name: "Main" });
  for (const name of ["API keys", "Webhooks", "Tasks", "Usage", "APIs", "Settings"]) {
    await nav.getByRole("link", { name }).waitFor();
  }
  await shot("api-keys");
});

test("the navigation is reachable by keyboard", async () => {
  await page.goto(`${base}/dashboard/keys`);
  let reached = false;
  for (let i = 0; i < 20 && !reached; i++) {
    await page.keyboard.press("Tab");
    reached = await page.evaluate(() => document.activeElement?.textContent?.trim() === "Tasks");
  }
  assert.ok(reached, "Tab reaches the Tasks link");
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Tasks" }).waitFor();
});

let secret;

test("a read-only key: shown once, reads the catalog, cannot call, revoked", async () => {
  await page.goto(`${base}/dashboard/keys`);
  await page.getByRole("link", { name: "Create key" }).click();
  await page.getByLabel("Name").fill("reporting");
  await page.getByLabel("Read-only").check();
  await page.getByRole("button", { name: "Create key" }).click();
  await page.getByText("Copy this key now.").waitFor();
  secret = await page.getByLabel("Secret key for reporting").inputValue();
  assert.match(secret, /^tg_restrict_/);
  await shot("key-created");

  assert.equal((await api("GET", "apis", secret)).status, 200);
  const call = await api("POST", "call", secret, { api: "sentiment", input: { text: "hi" } });
  assert.equal(call.status, 403);
  assert.equal(call.body.error.code, "insufficient_permissions");

  await page.goto(`${base}/dashboard/keys`);
  assert.equal(await page.getByText(secret).count(), 0, "the secret is not shown again");
  await page.getByRole("link", { name: "Revoke reporting" }).click();
  await shot("key-revoke");
  await page.getByRole("button", { name: "Revoke key" }).click();
  await page.getByRole("heading", { name: "API keys" }).waitFor();
  await until(async () => (await api("GET", "apis", secret)).status === 401, "the key is refused");
});

let tried;

test("Try it runs a test task and shows it", async () => {
  await page.goto(`${base}/dashboard/apis`);
  await shot("apis");
  await page.getByRole("link", { name: "Sentiment analysis" }).click();
  await page.getByLabel("Input (JSON)").fill('{"text": "I really love this dashboard"}');
  await page.getByRole("button", { name: "Run test task" }).click();
  await page.getByRole("heading", { name: /^Task task_/ }).waitFor();
  tried = page.url().split("/").pop();
  await page.getByText("positive").first().waitFor();
  await shot("task");
});

test("the task is in Tasks and in Usage", async () => {
  await page.goto(`${base}/dashboard/tasks?mode=test`);
  await page.getByRole("link", { name: tried }).waitFor();
  await shot("tasks");
  await page.goto(`${base}/dashboard/usage?mode=test`);
  await page.getByRole("heading", { name: "Tasks by API and status" }).waitFor();
  await page.getByRole("rowheader", { name: "sentiment" }).waitFor();
  await page.getByRole("img", { name: /^Requests per hour/ }).waitFor();
  await shot("usage");
});

test("a running test task is cancelled", async () => {
  const created = await api("POST", "call", process.env.TEST_KEY, {
    api: "sentiment",
    input: { text: "slow" },
    mode: "async",
    sandbox: { delay_ms: 60000 },
  });
  assert.equal(created.status, 202);
  const id = created.body.data.id;
  await page.goto(`${base}/dashboard/tasks/${id}`);
  await page.getByRole("button", { name: "Cancel task" }).click();
  await page.getByText("cancelled", { exact: true }).first().waitFor();
  const after = await api("GET", `tasks/${id}`, process.env.TEST_KEY);
  assert.equal(after.body.data.status, "cancelled");
});

test("settings, and a phone-sized screen", async () => {
  await page.goto(`${base}/dashboard/settings`);
  await page.getByLabel("Monthly spend limit (USD; empty for none)").waitFor();
  await shot("settings");
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${base}/dashboard/keys`);
  const overflow = await page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  );
  assert.ok(overflow <= 1, `no sideways scrolling of the page (${overflow}px)`);
  await shot("phone");
});

test("sign out ends the session", async () => {
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByRole("button", { name: "Sign in" }).waitFor();
  await page.goto(`${base}/dashboard/keys`);
  await page.getByRole("button", { name: "Sign in" }).waitFor();
});
