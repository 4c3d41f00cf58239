//! Bodies: an answer's read within its limit, whether it is JSON, and the
//! parts of a request body every adapter builds the same way.

use bytes::{Bytes, BytesMut};
use serde_json::Value;

use super::Answer;
use crate::upstream::redact::{Redactor, Transport};

/// Largest upstream response body read into memory.
pub(crate) const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// Reads a body, refusing more than [`MAX_RESPONSE_BYTES`].
pub(crate) async fn read_limited(
    mut answer: Answer,
    redactor: &Redactor,
) -> Result<Bytes, Transport> {
    let mut buf = BytesMut::new();
    while let Some(chunk) = answer.chunk(redactor).await {
        let chunk = chunk?;
        if buf.len() + chunk.len() > MAX_RESPONSE_BYTES {
            break;
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// Adds the client's `options` to a request body: fields Taskgate did not
/// set are added, objects present in both are merged the same way, and
/// Taskgate's own fields win.
pub(crate) fn merge_options(body: &mut Value, options: Option<&Value>) {
    let (Value::Object(body), Some(Value::Object(options))) = (body, options) else {
        return;
    };
    for (k, v) in options {
        match body.get_mut(k) {
            None => {
                body.insert(k.clone(), v.clone());
            }
            Some(existing @ Value::Object(_)) if v.is_object() => {
                merge_options(existing, Some(v));
            }
            Some(_) => {}
        }
    }
}

/// Whether an answer says its body is JSON (`application/json`, or a
/// `+json` type), whatever was asked for.
pub fn is_json(answer: &Answer) -> bool {
    answer
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|essence| essence.trim().to_ascii_lowercase())
        .is_some_and(|essence| essence == "application/json" || essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_never_replace_taskgate_fields() {
        let mut body = json!({"model": "m", "generationConfig": {"temperature": 0.5}});
        merge_options(
            &mut body,
            Some(
                &json!({"model": "evil", "seed": 7, "generationConfig": {"temperature": 2, "topK": 3}}),
            ),
        );
        assert_eq!(
            body,
            json!({"model": "m", "seed": 7, "generationConfig": {"temperature": 0.5, "topK": 3}})
        );
    }
}
