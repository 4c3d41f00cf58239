//! A call as every door hands it over (the body of POST /call, which the
//! OpenAI endpoint and the dashboard's Try it build too), checked in the
//! contract's order into a [`Call`].

use std::sync::Arc;

use serde_json::{Map, Value};
use taskgate_core::task::{
    METADATA_MAX_KEY_CHARS, METADATA_MAX_KEYS, METADATA_MAX_VALUE_CHARS, SANDBOX_MAX_DELAY_MS,
    error_code,
};
use taskgate_core::{Mode, SandboxControls, SandboxOutcome, WebhookEvent, WebhookEvents};

use super::{CallError, Violation};
use crate::catalog::{AllowedOptions, ApiEntry, Catalog};
use crate::principal::Principal;
use crate::service::webhooks::CallWebhook;

const FIELDS: [&str; 7] = [
    "api",
    "input",
    "mode",
    "timeout_ms",
    "metadata",
    "sandbox",
    "webhook",
];

/// A checked call: its API, input within the API's schema and size, and
/// how it runs.
pub struct Call {
    pub(super) entry: Arc<ApiEntry>,
    pub(super) input: Value,
    /// The size of `input` as JSON.
    pub(super) input_bytes: usize,
    /// Answered at once (`mode: "async"`), or at the task's end.
    pub asynchronous: bool,
    pub(super) timeout_ms: u64,
    pub(super) metadata: Map<String, Value>,
    pub(super) sandbox: Option<SandboxControls>,
    /// The call's own webhook (its URL checked further when the call runs).
    pub(super) webhook: Option<CallWebhook>,
}

/// Checks a call (the body of POST /call, which the other doors build too)
/// in the contract's order: permissions on the API before the request's own
/// errors.
pub fn validate(
    catalog: &Catalog,
    principal: &Principal,
    mut body: Map<String, Value>,
) -> Result<Call, CallError> {
    if let Some(Value::String(slug)) = body.get("api")
        && !principal.may_call(slug)
    {
        return Err(CallError::NotPermitted(truncate(slug)));
    }
    if let Some(unknown) = body.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(CallError::field(
            unknown,
            format!(
                "Unknown field {:?}. Known fields: {}.",
                truncate(unknown),
                FIELDS.join(", ")
            ),
        ));
    }
    let slug = match body.remove("api") {
        Some(Value::String(s)) => s,
        None => return Err(CallError::field("api", "api is required.")),
        Some(_) => return Err(CallError::field("api", "api must be a string.")),
    };
    let entry = catalog
        .get(&slug)
        .cloned()
        .ok_or(CallError::UnknownApi(slug))?;
    let input = body
        .remove("input")
        .ok_or_else(|| CallError::field("input", "input is required."))?;
    let asynchronous = match body.remove("mode") {
        None => false,
        Some(Value::String(m)) if m == "sync" => false,
        Some(Value::String(m)) if m == "async" => true,
        Some(_) => {
            return Err(CallError::field(
                "mode",
                "mode must be \"sync\" or \"async\".",
            ));
        }
    };
    let max_timeout = entry.spec.timeout_ms;
    let timeout_ms = match body.remove("timeout_ms") {
        None => max_timeout,
        Some(v) => whole(&v)
            .filter(|t| (1..=max_timeout).contains(t))
            .ok_or_else(|| {
                CallError::field(
                    "timeout_ms",
                    format!(
                        "timeout_ms must be an integer from 1 to {max_timeout} (this API's limit)."
                    ),
                )
            })?,
    };
    let metadata = match body.remove("metadata") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => check_metadata(m)?,
        Some(_) => {
            return Err(CallError::field(
                "metadata",
                "metadata must be an object of strings.",
            ));
        }
    };
    let sandbox = match body.remove("sandbox") {
        None => None,
        Some(_) if principal.mode != Mode::Test => {
            return Err(CallError::field(
                "sandbox",
                "sandbox is only accepted with a test key (tg_test_…).",
            ));
        }
        Some(v) => Some(check_sandbox(v)?),
    };
    let webhook = match body.remove("webhook") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(check_webhook(m)?),
        Some(_) => {
            return Err(CallError::field(
                "webhook",
                "webhook must be an object: {\"url\": \"https://…\", \"events\": [\"task.succeeded\", …]}.",
            ));
        }
    };
    let mut input = input;
    let input_bytes = check_input(&entry, &input)?;
    check_options(&entry, &input)?;
    super::chat::check_chat(&entry, &input)?;
    super::chat::cap_max_tokens(&entry, &mut input);
    Ok(Call {
        entry,
        input,
        input_bytes,
        asynchronous,
        timeout_ms,
        metadata,
        sandbox,
        webhook,
    })
}

/// A call's `webhook`: `url` (a string) and `events` (event names, the ends
/// when absent).
fn check_webhook(mut m: Map<String, Value>) -> Result<CallWebhook, CallError> {
    if let Some(unknown) = m.keys().find(|k| !["url", "events"].contains(&k.as_str())) {
        return Err(CallError::field(
            "webhook",
            format!(
                "Unknown field webhook.{}. Known: url, events.",
                truncate(unknown)
            ),
        ));
    }
    let url = match m.remove("url") {
        Some(Value::String(u)) => u,
        _ => {
            return Err(CallError::field(
                "webhook.url",
                "webhook.url is required: a URL.",
            ));
        }
    };
    let events = match m.remove("events") {
        None | Some(Value::Null) => WebhookEvents::DEFAULT,
        Some(Value::Array(list)) => {
            let mut names = Vec::with_capacity(list.len());
            for item in list {
                let e = item
                    .as_str()
                    .and_then(|s| s.parse::<WebhookEvent>().ok())
                    .filter(|e| *e != WebhookEvent::WebhookTest)
                    .ok_or_else(|| {
                        CallError::field(
                            "webhook.events",
                            "webhook.events must list task.running, task.succeeded, task.failed or task.cancelled.",
                        )
                    })?;
                names.push(e);
            }
            if names.is_empty() {
                return Err(CallError::field(
                    "webhook.events",
                    "webhook.events needs at least one event.",
                ));
            }
            WebhookEvents::of(&names)
        }
        Some(_) => {
            return Err(CallError::field(
                "webhook.events",
                "webhook.events must be a list of event names.",
            ));
        }
    };
    Ok(CallWebhook { url, events })
}

/// A JSON number that is a whole number (`5`, `5.0`, `5e3`: JSON Schema's
/// `integer`), as a `u64`.
fn whole(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        let f = v.as_f64()?;
        (f.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(&f)).then_some(f as u64)
    })
}

pub(super) fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

pub fn check_metadata(m: Map<String, Value>) -> Result<Map<String, Value>, CallError> {
    if m.len() > METADATA_MAX_KEYS {
        return Err(CallError::field(
            "metadata",
            format!("metadata may hold at most {METADATA_MAX_KEYS} keys."),
        ));
    }
    for (k, v) in &m {
        let param = format!("metadata.{}", truncate(k));
        if k.is_empty() || k.chars().count() > METADATA_MAX_KEY_CHARS {
            return Err(CallError::field(
                &param,
                format!("metadata keys must be 1 to {METADATA_MAX_KEY_CHARS} characters."),
            ));
        }
        match v {
            Value::String(s) if s.chars().count() <= METADATA_MAX_VALUE_CHARS => {}
            Value::String(_) => {
                return Err(CallError::field(
                    &param,
                    format!(
                        "metadata values may be at most {METADATA_MAX_VALUE_CHARS} characters."
                    ),
                ));
            }
            _ => {
                return Err(CallError::field(&param, "metadata values must be strings."));
            }
        }
    }
    Ok(m)
}

pub fn check_sandbox(v: Value) -> Result<SandboxControls, CallError> {
    let Value::Object(mut m) = v else {
        return Err(CallError::field("sandbox", "sandbox must be an object."));
    };
    let known = ["delay_ms", "outcome", "error_code"];
    if let Some(k) = m.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(CallError::field(
            &format!("sandbox.{}", truncate(k)),
            "Unknown sandbox field. Known: delay_ms, outcome, error_code.",
        ));
    }
    let delay_ms = match m.remove("delay_ms") {
        None => 0,
        Some(v) => whole(&v)
            .filter(|d| *d <= SANDBOX_MAX_DELAY_MS)
            .ok_or_else(|| {
                CallError::field(
                    "sandbox.delay_ms",
                    "sandbox.delay_ms must be an integer from 0 to 600000.",
                )
            })?,
    };
    let outcome = match m.remove("outcome") {
        None => Ok(SandboxOutcome::default()),
        Some(Value::String(s)) => s.parse::<SandboxOutcome>(),
        Some(_) => Err(String::new()),
    }
    .map_err(|_| {
        let [a, b, c] = SandboxOutcome::ALL.map(SandboxOutcome::as_str);
        CallError::field(
            "sandbox.outcome",
            format!("sandbox.outcome must be \"{a}\", \"{b}\" or \"{c}\"."),
        )
    })?;
    let failed = outcome == SandboxOutcome::Failed;
    let error_code = match m.remove("error_code") {
        None => None,
        Some(Value::String(c)) if failed && error_code::SIMULATABLE.contains(&c.as_str()) => {
            Some(c)
        }
        Some(Value::String(_)) if failed => {
            return Err(CallError::field(
                "sandbox.error_code",
                format!(
                    "sandbox.error_code must be one of: {}.",
                    error_code::SIMULATABLE.join(", ")
                ),
            ));
        }
        Some(_) => {
            return Err(CallError::field(
                "sandbox.error_code",
                "sandbox.error_code is a string, and only goes with outcome \"failed\".",
            ));
        }
    };
    Ok(SandboxControls {
        delay_ms,
        outcome,
        error_code,
    })
}

/// The keys of `input.options` against the API's `allowed_options`: an
/// option that may change what the provider charges (`service_tier`, …) is
/// not passed on unless the operator allows it.
fn check_options(entry: &ApiEntry, input: &Value) -> Result<(), CallError> {
    let Some(Value::Object(options)) = input.get("options") else {
        return Ok(());
    };
    let Some(refused) = options.keys().find(|k| !entry.allowed_options.allows(k)) else {
        return Ok(());
    };
    let allowed = match &entry.allowed_options {
        AllowedOptions::Only(keys) if keys.is_empty() => "none".to_owned(),
        AllowedOptions::Only(keys) => keys.join(", "),
        AllowedOptions::Any => String::new(),
    };
    Err(CallError::OptionNotAllowed {
        param: format!("input.options.{}", truncate(refused)),
        message: format!(
            "The option {:?} is not passed on to the API {}: it may change what the provider charges. \
             Options this API takes: {allowed}. (An operator can allow more with catalog.apis.{}.allowed_options.)",
            truncate(refused),
            entry.spec.slug,
            entry.spec.slug,
        ),
    })
}

/// `input` against the API's size limit and JSON Schema: every violation is
/// reported.
/// The input's size as JSON, when it is valid.
fn check_input(entry: &ApiEntry, input: &Value) -> Result<usize, CallError> {
    let max = entry.spec.max_input_bytes;
    let size = serde_json::to_vec(input)
        .map(|v| v.len() as u64)
        .unwrap_or(u64::MAX);
    if size > max {
        return Err(CallError::InvalidInput {
            param: "input".to_owned(),
            message: format!("input is {size} bytes; this API accepts at most {max}."),
            violations: Vec::new(),
        });
    }
    let violations = entry.input_schema.violations(input);
    if violations.is_empty() {
        return Ok(size as usize);
    }
    Err(invalid_input(&violations))
}

/// Violations of an input's rules (one at least) as the error that names
/// the first and lists them all.
pub(super) fn invalid_input(violations: &[taskgate_providers::schema::Violation]) -> CallError {
    let param = violations
        .first()
        .map_or_else(|| "input".to_owned(), |v| pointer_to_param(&v.path));
    let message = violations
        .first()
        .map_or_else(String::new, |v| v.message.clone());
    CallError::InvalidInput {
        message: format!("{param}: {message}"),
        param,
        violations: violations
            .iter()
            .map(|v| Violation {
                path: v.path.clone(),
                message: v.message.clone(),
            })
            .collect(),
    }
}

/// `/items/0/text` → `input.items[0].text`
fn pointer_to_param(pointer: &str) -> String {
    let mut out = String::from("input");
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            out.push('.');
            out.push_str(&seg);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_become_params() {
        assert_eq!(pointer_to_param(""), "input");
        assert_eq!(pointer_to_param("/text"), "input.text");
        assert_eq!(pointer_to_param("/items/0/a~1b"), "input.items[0].a/b");
    }
}
