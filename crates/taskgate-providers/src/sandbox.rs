//! Test-mode outputs derived from an API's output schema.
//!
//! A test-mode task must look like the real thing to the client's code (it
//! satisfies the output schema) while costing nothing and staying in the
//! process. The output is a pure function of the API and the input, so tests
//! written against the sandbox are repeatable.

use serde_json::{Map, Number, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::schema::CompiledSchema;
use crate::{ApiSpec, Execution, Usage};
use fingerprint::{Fnv1a, hash_value};

/// Below this depth optional properties are left out, so recursive schemas end.
const OPTIONAL_DEPTH: usize = 4;
/// Beyond this depth nothing more is generated at all.
const MAX_DEPTH: usize = 32;
/// The most values one generation makes and schema parts it folds; past it,
/// what is left is null. Test mode generates from schemas a client sends (a
/// chat's response format, a forced tool's parameters): a recursive `$ref`
/// under two required properties would otherwise make 2^32 values.
const MAX_NODES: usize = 2_000;
/// The most characters, items or properties that `minLength`, `minItems`
/// and `minProperties` get: a client's schema may ask for a billion.
const MAX_MIN: u64 = 1_000;

/// A simulated execution of `api` for `input`: deterministic, and valid
/// against `api.output_schema` for the keywords it understands (`type`,
/// `enum`/`const`, bounds, lengths, item counts, `format`, `$ref`, `allOf`,
/// `anyOf`/`oneOf`). `pattern` is not reversed into a matching string.
pub fn simulate(api: &ApiSpec, input: &Value) -> Execution {
    let mut hasher = Fnv1a::new();
    hasher.write(api.slug.as_bytes());
    hasher.write(&[0]);
    hash_value(&mut hasher, input);
    let seed = hasher.finish();

    Execution {
        output: generate(&api.output_schema, &api.slug, seed),
        usage: Usage {
            units: 1,
            ..Usage::default()
        },
    }
}

/// A value for `schema` from `seed`, its strings naming `slug`.
pub(crate) fn generate(schema: &Value, slug: &str, seed: u64) -> Value {
    let full = Generator::new(schema, slug, seed, true).value(schema, 0);
    // Optional properties make the output look realistic but can clash with
    // keywords we do not model (`not`, `dependentSchemas`, `maxProperties`);
    // then the required-only output is the safer answer.
    match CompiledSchema::compile(schema) {
        Ok(compiled) if !compiled.is_valid(&full) => {
            Generator::new(schema, slug, seed, false).value(schema, 0)
        }
        _ => full,
    }
}

/// A seed made of `parts`, each hashed whole.
pub(crate) fn seed_of(parts: &[&Value]) -> u64 {
    let mut hasher = Fnv1a::new();
    for p in parts {
        hash_value(&mut hasher, p);
        hasher.write(&[0]);
    }
    hasher.finish()
}

struct Generator<'a> {
    root: &'a Value,
    slug: &'a str,
    /// SplitMix64 state.
    state: u64,
    optional: bool,
    /// What is left of [`MAX_NODES`].
    budget: std::cell::Cell<usize>,
}

impl<'a> Generator<'a> {
    fn new(root: &'a Value, slug: &'a str, seed: u64, optional: bool) -> Self {
        Self {
            root,
            slug,
            state: seed,
            optional,
            budget: std::cell::Cell::new(MAX_NODES),
        }
    }

    /// Takes one from the budget; false once it is spent.
    fn spend(&self) -> bool {
        let left = self.budget.get();
        self.budget.set(left.saturating_sub(1));
        left > 0
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    fn value(&mut self, schema: &Value, depth: usize) -> Value {
        let Some(schema) = schema.as_object() else {
            return Value::Null; // `true` accepts anything; `false` nothing.
        };
        if depth > MAX_DEPTH || !self.spend() {
            return Value::Null;
        }
        let schema = self.flatten(schema, 0);
        if let Some(constant) = schema.get("const") {
            return constant.clone();
        }
        if let Some(options) = schema.get("enum").and_then(Value::as_array)
            && !options.is_empty()
        {
            let pick = self.below(options.len() as u64) as usize;
            return options[pick].clone();
        }
        match pick_type(&schema) {
            "object" => self.object(&schema, depth),
            "array" => self.array(&schema, depth),
            "string" => Value::String(self.string(&schema)),
            "integer" => self.integer(&schema),
            "number" => self.number(&schema),
            "boolean" => Value::Bool(self.next() & 1 == 1),
            _ => Value::Null,
        }
    }

    /// Folds `$ref`, `allOf` and the first usable `anyOf`/`oneOf` branch into
    /// one schema, so the type-specific generators see every constraint.
    fn flatten(&self, schema: &Map<String, Value>, hops: usize) -> Map<String, Value> {
        let mut out = Map::new();
        let mut parts: Vec<&Value> = Vec::new();
        if let Some(target) = schema.get("$ref").and_then(Value::as_str)
            && let Some(found) = target.strip_prefix('#').and_then(|p| self.root.pointer(p))
        {
            parts.push(found);
        }
        if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
            parts.extend(all);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = schema.get(key).and_then(Value::as_array) {
                let usable = branches
                    .iter()
                    .find(|b| b.get("type") != Some(&json!("null")));
                parts.extend(usable.or(branches.first()));
            }
        }
        for (key, value) in schema {
            if !matches!(key.as_str(), "$ref" | "allOf" | "anyOf" | "oneOf") {
                out.insert(key.clone(), value.clone());
            }
        }
        for part in parts.into_iter().filter_map(Value::as_object) {
            if !self.spend() {
                break;
            }
            let part = if hops < 16 {
                self.flatten(part, hops + 1)
            } else {
                part.clone()
            };
            merge(&mut out, part);
        }
        out
    }

    fn object(&mut self, schema: &Map<String, Value>, depth: usize) -> Value {
        let empty = Map::new();
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let with_optional = self.optional && depth < OPTIONAL_DEPTH;
        let mut out = Map::new();
        for (name, property) in properties {
            let wanted = required.contains(&name.as_str());
            if (wanted || with_optional) && property != &Value::Bool(false) {
                out.insert(name.clone(), self.value(property, depth + 1));
            }
        }
        for name in required {
            if !out.contains_key(name) {
                let extra = schema
                    .get("additionalProperties")
                    .unwrap_or(&Value::Bool(true));
                out.insert(name.to_owned(), self.value(extra, depth + 1));
            }
        }
        let min = schema
            .get("minProperties")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            .min(MAX_MIN);
        let extra = schema.get("additionalProperties");
        if extra != Some(&Value::Bool(false)) {
            let extra = extra.cloned().unwrap_or(json!({"type": "string"}));
            // A name the schema's own properties took is skipped, so each
            // turn adds one.
            let mut n = 0;
            while (out.len() as u64) < min {
                let key = format!("sandbox_{n}");
                n += 1;
                if !out.contains_key(&key) {
                    out.insert(key, self.value(&extra, depth + 1));
                }
            }
        }
        Value::Object(out)
    }

    fn array(&mut self, schema: &Map<String, Value>, depth: usize) -> Value {
        let min = schema
            .get("minItems")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            .min(MAX_MIN);
        let max = schema
            .get("maxItems")
            .and_then(Value::as_u64)
            .unwrap_or(u64::MAX);
        let prefix = schema
            .get("prefixItems")
            .or_else(|| schema.get("items").filter(|i| i.is_array()))
            .and_then(Value::as_array);
        let rest = schema.get("items").filter(|i| !i.is_array());
        let prefix_len = prefix.map_or(0, Vec::len) as u64;
        let rest_forbidden = rest == Some(&Value::Bool(false));
        let wanted = if depth < OPTIONAL_DEPTH { 2 } else { 0 };
        let mut count = wanted.max(prefix_len).max(min).min(max);
        if rest_forbidden {
            count = count.min(prefix_len);
        }
        let unique = schema.get("uniqueItems") == Some(&Value::Bool(true));
        let mut out: Vec<Value> = Vec::new();
        let mut tries = 0;
        while (out.len() as u64) < count && tries < count.saturating_mul(4) + 8 {
            tries += 1;
            let index = out.len();
            let item_schema = prefix
                .and_then(|p| p.get(index))
                .or(rest)
                .unwrap_or(&Value::Bool(true));
            let item = self.value(item_schema, depth + 1);
            if !(unique && out.contains(&item)) {
                out.push(item);
            }
        }
        Value::Array(out)
    }

    fn string(&mut self, schema: &Map<String, Value>) -> String {
        let format = schema.get("format").and_then(Value::as_str).unwrap_or("");
        let token = self.next();
        let text = match format {
            "date-time" | "date" | "time" => {
                // Seconds within about a year from 2024-01-01, so dates look real.
                let secs = 1_704_067_200 + (token % 31_536_000) as i64;
                let at =
                    OffsetDateTime::from_unix_timestamp(secs).unwrap_or(OffsetDateTime::UNIX_EPOCH);
                let full = at.format(&Rfc3339).unwrap_or_default();
                match format {
                    "date" => full[..10].to_owned(),
                    "time" => full[11..].to_owned(),
                    _ => full,
                }
            }
            "uri" | "iri" | "uri-reference" | "iri-reference" | "url" => {
                format!("https://example.com/sandbox/{}/{:016x}", self.slug, token)
            }
            "email" | "idn-email" => "sandbox@example.com".to_owned(),
            "hostname" | "idn-hostname" => "sandbox.example.com".to_owned(),
            "ipv4" => format!("192.0.2.{}", token % 255),
            "ipv6" => format!("2001:db8::{:x}", token % 0xffff),
            "uuid" => {
                let b = token ^ self.next().rotate_left(17);
                format!(
                    "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
                    token >> 32,
                    token & 0xffff,
                    (b >> 52) & 0xfff,
                    (b >> 40) & 0xfff,
                    b & 0xffff_ffff_ffff
                )
            }
            _ if schema.get("contentEncoding").and_then(Value::as_str) == Some("base64") => {
                "c2FuZGJveA==".to_owned() // "sandbox"
            }
            _ => format!("sandbox output for {}", self.slug),
        };
        let min = schema
            .get("minLength")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            .min(MAX_MIN) as usize;
        let max = schema
            .get("maxLength")
            .and_then(Value::as_u64)
            .map(|m| m as usize);
        fit_length(text, min, max)
    }

    fn integer(&mut self, schema: &Map<String, Value>) -> Value {
        let (lo, hi) = bounds(schema);
        let lo = lo.map(|(v, excl)| if excl { v.floor() + 1.0 } else { v.ceil() });
        let hi = hi.map(|(v, excl)| if excl { v.ceil() - 1.0 } else { v.floor() });
        let (lo, hi) = match (lo, hi) {
            (Some(lo), Some(hi)) => (lo, hi.max(lo)),
            (Some(lo), None) => (lo, lo + 100.0),
            (None, Some(hi)) => (hi - 100.0, hi),
            (None, None) => (0.0, 100.0),
        };
        let (lo, hi) = (lo as i64, hi as i64);
        let span = hi.saturating_sub(lo).saturating_add(1) as u64;
        let mut value = lo.saturating_add(self.below(span) as i64);
        if let Some(step) = schema.get("multipleOf").and_then(Value::as_f64)
            && step >= 1.0
            && step.fract() == 0.0
        {
            let step = step as i64;
            value = value.div_euclid(step) * step;
            if value < lo {
                value += step;
            }
        }
        Value::Number(value.into())
    }

    fn number(&mut self, schema: &Map<String, Value>) -> Value {
        let (lo, hi) = bounds(schema);
        let (lo, hi) = match (lo.map(|b| b.0), hi.map(|b| b.0)) {
            (Some(lo), Some(hi)) => (lo, hi.max(lo)),
            (Some(lo), None) => (lo, lo + 1.0),
            (None, Some(hi)) => (hi - 1.0, hi),
            (None, None) => (0.0, 1.0),
        };
        // Stay off both ends so exclusive bounds hold; round for readability
        // unless rounding would leave the range.
        let raw = lo + (hi - lo) * (0.1 + 0.8 * self.unit());
        let rounded = (raw * 10_000.0).round() / 10_000.0;
        let value = if rounded > lo && rounded < hi {
            rounded
        } else {
            raw
        };
        Number::from_f64(value).map_or(Value::Null, Value::Number)
    }
}

fn pick_type(schema: &Map<String, Value>) -> &str {
    match schema.get("type") {
        Some(Value::String(t)) => t,
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if schema.contains_key("properties") || schema.contains_key("required") => "object",
        _ if schema.contains_key("items") || schema.contains_key("prefixItems") => "array",
        _ if ["minLength", "maxLength", "format", "pattern"]
            .iter()
            .any(|k| schema.contains_key(*k)) =>
        {
            "string"
        }
        _ if ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]
            .iter()
            .any(|k| schema.contains_key(*k)) =>
        {
            "number"
        }
        _ => "null",
    }
}

/// Lower and upper bounds, each with whether it is exclusive.
#[allow(clippy::type_complexity)]
fn bounds(schema: &Map<String, Value>) -> (Option<(f64, bool)>, Option<(f64, bool)>) {
    let get = |key: &str| schema.get(key).and_then(Value::as_f64);
    let lo = match (get("minimum"), get("exclusiveMinimum")) {
        (Some(m), Some(e)) if e >= m => Some((e, true)),
        (Some(m), _) => Some((m, false)),
        (None, Some(e)) => Some((e, true)),
        (None, None) => None,
    };
    let hi = match (get("maximum"), get("exclusiveMaximum")) {
        (Some(m), Some(e)) if e <= m => Some((e, true)),
        (Some(m), _) => Some((m, false)),
        (None, Some(e)) => Some((e, true)),
        (None, None) => None,
    };
    (lo, hi)
}

fn merge(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (key, value) in from {
        match (key.as_str(), into.get_mut(&key)) {
            ("properties", Some(Value::Object(existing))) => {
                if let Value::Object(more) = value {
                    for (name, schema) in more {
                        existing.entry(name).or_insert(schema);
                    }
                }
            }
            ("required", Some(Value::Array(existing))) => {
                for name in value.as_array().into_iter().flatten() {
                    if !existing.contains(name) {
                        existing.push(name.clone());
                    }
                }
            }
            (_, Some(_)) => {}
            (_, None) => {
                into.insert(key, value);
            }
        }
    }
}

/// Pads or cuts `text` (counting characters, as JSON Schema does) into range.
fn fit_length(mut text: String, min: usize, max: Option<usize>) -> String {
    let mut len = text.chars().count();
    while len < min {
        text.push('.');
        len += 1;
    }
    if let Some(max) = max
        && len > max
    {
        text = text.chars().take(max).collect();
    }
    text
}

pub(crate) mod chat;
mod fingerprint;
#[cfg(test)]
mod tests;
