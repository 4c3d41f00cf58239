// The published declarations type-check a user's program under `strict`.

import { execFile } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const root = fileURLToPath(new URL("..", import.meta.url));

test("dist/*.d.ts serve a strict TypeScript user (test/types-check.ts)", async () => {
  const tsc = fileURLToPath(new URL("../node_modules/typescript/bin/tsc", import.meta.url));
  try {
    await promisify(execFile)(process.execPath, [tsc, "-p", "test/tsconfig.json"], { cwd: root });
  } catch (err) {
    throw new Error(`tsc found errors:\n${err.stdout}${err.stderr}`);
  }
});
