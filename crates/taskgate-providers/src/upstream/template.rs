//! The template language of generic `http` providers.
//!
//! A template is a JSON value rendered against a context object (`input`,
//! `model`, `response`, `job`):
//!
//! - a string that is exactly `"{{path}}"` becomes the value at `path`, with
//!   its JSON type; a missing path gives `null`, and an object key whose value
//!   is such a missing placeholder is left out;
//! - `{{path}}` inside a longer string becomes the value's text (a string as
//!   it is, anything else as compact JSON); a missing path gives no text;
//! - objects and arrays render member by member; object keys are literal.
//!
//! A path is dot-separated keys, where a run of digits indexes an array
//! (`response.output.0`); spaces around it are ignored (`{{ model }}`).
//! There is no escape: a `{{` without a later `}}` is literal text.
//!
//! Every missing path is reported, so the caller can refuse a required one.

use serde_json::{Map, Value};

/// Deepest template rendered; anything nested deeper renders as `null`.
/// (serde_json refuses to parse deeper JSON anyway.)
pub(crate) const MAX_DEPTH: usize = 128;

/// A rendered template.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rendered {
    pub value: Value,
    /// The paths of placeholders that found nothing, in rendering order
    /// (a path as often as it is used).
    pub missing: Vec<String>,
}

/// Renders `template` against `ctx`.
pub(crate) fn render(template: &Value, ctx: &Value) -> Rendered {
    let mut missing = Vec::new();
    let value = render_value(template, ctx, 0, &mut missing).unwrap_or(Value::Null);
    Rendered { value, missing }
}

/// Renders a template given as a string (an id, a status, a usage count).
pub(crate) fn render_str(template: &str, ctx: &Value) -> Rendered {
    let mut missing = Vec::new();
    let value = render_string(template, ctx, &mut missing, false).unwrap_or(Value::Null);
    Rendered { value, missing }
}

/// Renders a URL path: every substituted value is percent-encoded (all but
/// the unreserved `A-Z a-z 0-9 - . _ ~`), so a value stays within its
/// segment. Refuses a missing value, a path that does not start with `/`,
/// and a `.` or `..` segment (which would climb out of the intended path).
pub(crate) fn render_path(template: &str, ctx: &Value) -> Result<String, String> {
    let mut missing = Vec::new();
    let path = match render_string(template, ctx, &mut missing, true) {
        Some(Value::String(s)) => s,
        _ => String::new(),
    };
    if let Some(m) = missing.first() {
        return Err(format!(
            "the path {template:?} needs `{m}`, which is missing"
        ));
    }
    if !path.starts_with('/') {
        return Err(format!("the path {template:?} does not start with `/`"));
    }
    let end = path.find(['?', '#']).unwrap_or(path.len());
    let climbs = path[..end].split('/').any(|seg| {
        let seg = seg.to_ascii_lowercase().replace("%2e", ".");
        seg == "." || seg == ".."
    });
    if climbs {
        return Err(format!(
            "the path {template:?} has a `.` or `..` segment once rendered"
        ));
    }
    Ok(path)
}

/// The value at a dot-separated `path` in `ctx`.
pub(crate) fn lookup<'a>(ctx: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(ctx, |v, seg| match v {
        Value::Object(m) => m.get(seg),
        Value::Array(a) if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) => {
            a.get(seg.parse::<usize>().ok()?)
        }
        _ => None,
    })
}

/// How deep a template nests (a scalar is 0), stopping at [`MAX_DEPTH`] + 1,
/// for refusing a configuration that would not render in full.
pub(crate) fn depth(template: &Value) -> usize {
    fn go(v: &Value, d: usize) -> usize {
        if d > MAX_DEPTH {
            return d;
        }
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Object(m) => Box::new(m.values()),
            Value::Array(a) => Box::new(a.iter()),
            _ => return d,
        };
        children.map(|c| go(c, d + 1)).max().unwrap_or(d)
    }
    go(template, 0)
}

/// `None` when the template is a single placeholder whose path is missing.
fn render_value(t: &Value, ctx: &Value, depth: usize, missing: &mut Vec<String>) -> Option<Value> {
    if depth > MAX_DEPTH {
        return Some(Value::Null);
    }
    match t {
        Value::String(s) => render_string(s, ctx, missing, false),
        Value::Array(items) => Some(Value::Array(
            items
                .iter()
                .map(|i| render_value(i, ctx, depth + 1, missing).unwrap_or(Value::Null))
                .collect(),
        )),
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                if let Some(v) = render_value(v, ctx, depth + 1, missing) {
                    out.insert(k.clone(), v);
                }
            }
            Some(Value::Object(out))
        }
        other => Some(other.clone()),
    }
}

/// Renders one string; `None` when it is a single placeholder whose path is
/// missing. `encode` percent-encodes substituted text (for paths).
fn render_string(s: &str, ctx: &Value, missing: &mut Vec<String>, encode: bool) -> Option<Value> {
    // Whole when the first placeholder spans the string, as the scan below
    // would read it (`{{{a}}}` is the placeholder `{a` and the text `}`).
    if !encode
        && let Some(after) = s.strip_prefix("{{")
        && after
            .find("}}")
            .is_some_and(|close| close + 2 == after.len())
    {
        let path = after[..after.len() - 2].trim();
        return match lookup(ctx, path) {
            Some(v) => Some(v.clone()),
            None => {
                missing.push(path.to_owned());
                None
            }
        };
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            break;
        };
        out.push_str(&rest[..open]);
        let path = after[..close].trim();
        match lookup(ctx, path) {
            Some(v) => {
                let text = text_of(v);
                if encode {
                    percent_encode(&text, &mut out);
                } else {
                    out.push_str(&text);
                }
            }
            None => missing.push(path.to_owned()),
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Some(Value::String(out))
}

fn text_of(v: &Value) -> std::borrow::Cow<'_, str> {
    match v {
        Value::String(s) => s.as_str().into(),
        other => other.to_string().into(),
    }
}

fn percent_encode(text: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> Value {
        json!({
            "input": {"prompt": "a cat", "n": 2, "flags": {"hd": true}, "tags": ["x", "y"],
                      "nothing": null, "odd key": "k", "": "empty key"},
            "model": "black-forest-labs/flux-schnell",
            "response": {"output": ["https://replicate.delivery/a.png", "https://replicate.delivery/b.png"],
                         "metrics": {"predict_time": 1.2}, "id": "ufawqhfynnddngldkgtslldrkq"},
            "job": {"id": "ufawqhfynnddngldkgtslldrkq"}
        })
    }

    #[test]
    fn whole_placeholders_keep_their_type() {
        let t = json!({
            "prompt": "{{input.prompt}}", "n": "{{input.n}}", "flags": "{{input.flags}}",
            "tags": "{{input.tags}}", "nothing": "{{input.nothing}}", "spaced": "{{ model }}",
            "literal": 3, "yes": true
        });
        let r = render(&t, &ctx());
        assert_eq!(
            r.value,
            json!({"prompt": "a cat", "n": 2, "flags": {"hd": true}, "tags": ["x", "y"],
                   "nothing": null, "spaced": "black-forest-labs/flux-schnell", "literal": 3, "yes": true})
        );
        assert!(r.missing.is_empty());
    }

    #[test]
    fn embedded_placeholders_become_text() {
        let t = json!("{{input.prompt}}, n={{input.n}}, flags={{input.flags}}, {{input.nothing}}!");
        assert_eq!(
            render(&t, &ctx()).value,
            json!("a cat, n=2, flags={\"hd\":true}, null!")
        );
        // Two placeholders side by side are text, not one whole value.
        assert_eq!(
            render(&json!("{{input.n}}{{input.n}}"), &ctx()).value,
            json!("22")
        );
    }

    #[test]
    fn missing_paths_are_null_or_empty_and_reported() {
        let t = json!([
            "{{input.size}}",
            "size={{input.size}}.",
            "{{response.output.9}}"
        ]);
        let r = render(&t, &ctx());
        assert_eq!(r.value, json!([null, "size=.", null]));
        assert_eq!(r.missing, ["input.size", "input.size", "response.output.9"]);
        assert_eq!(render_str("{{job.status}}", &ctx()).value, Value::Null);
        assert_eq!(render_str("{{job.status}}", &ctx()).missing, ["job.status"]);
    }

    #[test]
    fn keys_of_missing_values_are_dropped() {
        let t = json!({"input": {"prompt": "{{input.prompt}}", "seed": "{{input.seed}}",
                                 "note": "seed {{input.seed}}", "nothing": "{{input.nothing}}"}});
        let r = render(&t, &ctx());
        assert_eq!(
            r.value,
            json!({"input": {"prompt": "a cat", "note": "seed ", "nothing": null}})
        );
        assert_eq!(r.missing, ["input.seed", "input.seed"]);
        // A whole template that is missing is null.
        assert_eq!(render(&json!("{{nope}}"), &ctx()).value, Value::Null);
    }

    #[test]
    fn numeric_segments_index_arrays() {
        assert_eq!(
            render_str("{{response.output.1}}", &ctx()).value,
            json!("https://replicate.delivery/b.png")
        );
        let t = json!({"images": [{"url": "{{response.output.0}}"}], "secs": "{{response.metrics.predict_time}}"});
        assert_eq!(
            render(&t, &ctx()).value,
            json!({"images": [{"url": "https://replicate.delivery/a.png"}], "secs": 1.2})
        );
        for odd in [
            "response.output.-1",
            "response.output.+1",
            "response.output.1.x",
            "response.output.99999999999999999999999",
            "input.prompt.0",
            "input..n",
            ".",
            "",
        ] {
            assert_eq!(lookup(&ctx(), odd), None, "{odd}");
        }
        assert_eq!(lookup(&ctx(), "input.odd key"), Some(&json!("k")));
        assert_eq!(lookup(&ctx(), "input."), Some(&json!("empty key")));
    }

    #[test]
    fn paths_encode_values_and_refuse_climbing() {
        let c = ctx();
        assert_eq!(
            render_path("/v1/models/{{model}}/predictions", &c).unwrap(),
            "/v1/models/black-forest-labs%2Fflux-schnell/predictions"
        );
        assert_eq!(
            render_path(
                "/v1/predictions/{{job.id}}?q={{input.prompt}}&t={{input.tags}}",
                &c
            )
            .unwrap(),
            "/v1/predictions/ufawqhfynnddngldkgtslldrkq?q=a%20cat&t=%5B%22x%22%2C%22y%22%5D"
        );
        let c2 = json!({"job": {"id": ".."}, "u": "é/?#@"});
        assert_eq!(
            render_path("/x/{{u}}", &c2).unwrap(),
            "/x/%C3%A9%2F%3F%23%40"
        );
        assert!(render_path("/v1/predictions/{{job.id}}", &c2).is_err());
        assert!(
            render_path(
                "/v1/predictions/%2e{{job.id}}",
                &json!({"job": {"id": "."}})
            )
            .is_err()
        );
        assert!(render_path("/v1/predictions/{{job.id}}.json", &c2).is_ok());
        assert!(render_path("/v1/predictions/{{job.nope}}", &c).is_err());
        assert!(render_path("{{u}}/x", &c2).is_err());
        assert!(render_path("@evil.example/x", &c2).is_err());
    }

    #[test]
    fn odd_templates_do_not_panic() {
        let c = ctx();
        for t in [
            "{{",
            "}}",
            "{{}}",
            "{{{input.n}}}",
            "{{input.n",
            "a{{b}}c{{",
            "}}{{input.n}}{{",
            "{{é}}",
            "é{{input.prompt}}é",
            "{{{{}}}}",
            "{{ }}",
            "{{input.n}}}}",
        ] {
            let _ = render_str(t, &c);
            let _ = render_path(t, &c);
        }
        assert_eq!(render_str("{{{input.n}}}", &c).value, json!("}"));
        assert_eq!(render_str("{{input.n", &c).value, json!("{{input.n"));
        assert_eq!(render_str("}}{{input.n}}{{", &c).value, json!("}}2{{"));
        assert_eq!(render_str("{{input.n}}}}", &c).value, json!("2}}"));

        let huge = "{{input.prompt}}".repeat(100_000) + &"{{".repeat(100_000);
        let r = render_str(&huge, &c);
        assert_eq!(r.value.as_str().unwrap().len(), 5 * 100_000 + 2 * 100_000);

        // Nesting deeper than MAX_DEPTH renders as null below the limit.
        let mut deep = json!("{{input.n}}");
        for _ in 0..(MAX_DEPTH + 10) {
            deep = json!([deep]);
        }
        assert_eq!(depth(&deep), MAX_DEPTH + 1);
        let mut v = &render(&deep, &c).value;
        let mut levels = 0;
        while let Value::Array(a) = v {
            v = &a[0];
            levels += 1;
        }
        assert_eq!(levels, MAX_DEPTH + 1);
        assert_eq!(v, &Value::Null);
        assert_eq!(depth(&json!({"a": [1, {"b": 2}]})), 3);
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    /// Template text: placeholders (well-formed or not) among plain text.
    fn template_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            any::<String>(),
            prop::sample::select(vec![
                "{{",
                "}}",
                "{{input.prompt}}",
                "{{input.tags.1}}",
                "{{response.output.0}}",
                "{{ model }}",
                "{{input.}}",
                "{{.}}",
                "{{input.n.9999999999999999999}}",
                "{{job.id}}",
                "{{{",
                "}}}",
                "{{input.flags}}",
            ])
            .prop_map(str::to_owned),
        ];
        prop::collection::vec(piece, 0..8).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn templates_never_panic(text in template_text(), path in any::<String>(), nested in template_text()) {
            let ctx = json!({
                "input": {"prompt": "a cat", "n": 2, "flags": {"hd": true}, "tags": ["x", "y"]},
                "model": "m", "response": {"output": ["u"]}, "job": {"id": "j1"},
            });
            let _ = render_str(&text, &ctx);
            let _ = render_path(&text, &ctx);
            let _ = lookup(&ctx, &path);
            let template = json!({"a": text, "b": [nested, {"c": "{{input.prompt}}"}], "d": 1});
            let rendered = render(&template, &ctx);
            // The structure stays; only strings are rendered.
            prop_assert_eq!(&rendered.value["d"], &json!(1));
            prop_assert!(rendered.value["b"].is_array());
            let deep: Value = (0..40).fold(json!("{{model}}"), |v, _| json!([v]));
            let _ = render(&deep, &ctx);
        }
    }
}
