//! The checks a `chat` input gets past its JSON Schema, before anything is
//! stored: the rules a schema cannot say ([`ChatInput::parse`]), then what
//! the API's provider cannot carry ([`Provider::unsupported`]). Test keys get
//! the same checks, so test mode refuses exactly what live would.
//!
//! [`Provider::unsupported`]: taskgate_providers::Provider::unsupported

use serde_json::Value;
use taskgate_providers::chat::ChatInput;

use super::CallError;
use super::request::{invalid_input, truncate};
use crate::catalog::ApiEntry;

/// The kind these checks are for.
const CHAT: &str = "chat";

/// Lowers a chat input's `max_tokens` to its API's `max_output_tokens`, if
/// it asks more (the stored input is the one sent).
pub(super) fn cap_max_tokens(entry: &ApiEntry, input: &mut Value) {
    let Some(cap) = entry.max_output_tokens else {
        return;
    };
    if let Some(asked) = input.get_mut("max_tokens")
        && asked.as_f64().is_some_and(|n| n > cap as f64)
    {
        *asked = Value::from(cap);
    }
}

/// A chat API's input against the chat rules and its provider; other kinds
/// pass untouched.
pub(super) fn check_chat(entry: &ApiEntry, input: &Value) -> Result<(), CallError> {
    if entry.spec.kind != CHAT {
        return Ok(());
    }
    let chat = ChatInput::parse(input).map_err(|v| invalid_input(&v))?;
    let Some(refused) = entry.provider.unsupported(&entry.spec.slug, &chat) else {
        return Ok(());
    };
    let field = truncate(&refused.field);
    Err(CallError::Unsupported {
        param: format!("input.{field}"),
        message: format!(
            "The API {} cannot take `{field}`: {}",
            entry.spec.slug, refused.message
        ),
    })
}
