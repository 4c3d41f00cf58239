// Writes ../openapi.json to stdout for openapi-typescript (`npm run generate`), less what
// a TypeScript type cannot say: a `oneOf` or `anyOf` whose alternatives only say which
// properties are present (`required`, `not: {required}`), as in "an assistant message
// has `content` or `tool_calls`" or "an image has `url` or `data`". openapi-typescript
// would make each such alternative `unknown`, and `T | unknown` is `unknown`: the whole
// type would be lost. The rule stays the server's to check.

import { readFileSync } from "node:fs";

const document = JSON.parse(readFileSync(new URL("../../openapi.json", import.meta.url), "utf8"));

const presenceOnly = (schema) =>
  schema !== null &&
  typeof schema === "object" &&
  !Array.isArray(schema) &&
  Object.entries(schema).every(
    ([key, value]) => key === "required" || key === "description" || (key === "not" && presenceOnly(value)),
  );

function strip(value) {
  if (Array.isArray(value)) return value.map(strip);
  if (value === null || typeof value !== "object") return value;
  const out = {};
  for (const [key, inner] of Object.entries(value)) {
    if ((key === "oneOf" || key === "anyOf") && Array.isArray(inner) && inner.length > 0 && inner.every(presenceOnly)) {
      continue;
    }
    out[key] = strip(inner);
  }
  return out;
}

process.stdout.write(JSON.stringify(strip(document), null, 2) + "\n");
