// `npm run prepare`: builds dist/ whenever the package is installed from its folder
// (`npm install /path/to/clients/typescript`), packed or published. A folder fresh
// from git has no node_modules yet, so the pinned build tools (package-lock.json)
// are installed first; dev dependencies are asked for explicitly because an outer
// `npm install --omit=dev` would otherwise leave TypeScript out.

import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: "inherit" });

if (!existsSync(tsc)) {
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  run(npm, ["ci", "--include=dev", "--ignore-scripts", "--no-audit", "--no-fund"]);
}
run(process.execPath, [tsc, "-p", "tsconfig.json"]);
