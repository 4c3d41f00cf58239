//! JSON Schema validation of task inputs and outputs.
//!
//! Schemas are compiled once (compilation is far costlier than validation) and
//! report every violation, so a client can fix all of its mistakes in one go.

use std::fmt;
use std::io;

use jsonschema::Validator;
use jsonschema::error::{ValidationError, ValidationErrorKind};
use serde::Serialize;
use serde_json::Value;

/// Longest rendering of an offending value inside a message: a 1 MB string
/// must not turn into a 1 MB error message.
const PREVIEW_BYTES: usize = 80;

/// One way in which an instance breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// JSON pointer into the instance, e.g. `/text`; `""` is the root.
    pub path: String,
    /// Human-readable reason, e.g. `is a required property`.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// A schema compiled once and used for any number of validations.
#[derive(Debug, Clone)]
pub struct CompiledSchema {
    validator: Validator,
}

impl CompiledSchema {
    /// Compiles `schema`. The draft comes from its `$schema` and defaults to
    /// 2020-12; `format` is asserted, not just annotated. Remote `$ref`s cannot
    /// be resolved (the crate is built without fetching) and fail here.
    pub fn compile(schema: &Value) -> Result<Self, String> {
        jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .map(|validator| Self { validator })
            .map_err(|error| {
                let at = error.instance_path().as_str();
                if at.is_empty() {
                    format!("invalid JSON Schema: {error}")
                } else {
                    format!("invalid JSON Schema at {at}: {error}")
                }
            })
    }

    /// Whether `instance` satisfies the schema; cheaper than [`Self::violations`].
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.validator.is_valid(instance)
    }

    /// Every violation of the schema by `instance`; empty when it is valid.
    pub fn violations(&self, instance: &Value) -> Vec<Violation> {
        self.validator
            .iter_errors(instance)
            .map(|error| to_violation(&error))
            .collect()
    }
}

fn to_violation(error: &ValidationError<'_>) -> Violation {
    if let ValidationErrorKind::Required { property } = error.kind() {
        // The crate reports the object that lacks the property; clients want to
        // be pointed at the property itself (`input.text: is a required property`).
        let name = match property {
            Value::String(name) => name.clone(),
            other => other.to_string(),
        };
        return Violation {
            path: error
                .instance_path()
                .join(name.as_str())
                .as_str()
                .to_owned(),
            message: "is a required property".to_owned(),
        };
    }
    Violation {
        path: error.instance_path().as_str().to_owned(),
        message: error.masked_with(preview(error.instance())).to_string(),
    }
}

/// The value as compact JSON, cut short when long.
fn preview(value: &Value) -> String {
    let mut sink = Capped {
        buf: Vec::with_capacity(PREVIEW_BYTES + 4),
        full: false,
    };
    // Serialising into `Capped` stops with an error once the cap is reached, so
    // a huge value costs no more than a short one.
    let _ = serde_json::to_writer(&mut sink, value);
    let mut text = String::from_utf8_lossy(&sink.buf).into_owned();
    if sink.full {
        let mut end = PREVIEW_BYTES.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
        if value.is_string() {
            text.push('"');
        }
    }
    text
}

struct Capped {
    buf: Vec<u8>,
    full: bool,
}

impl io::Write for Capped {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        // Keep a few bytes beyond the cap so a multi-byte character at the edge
        // is not split before the caller trims to a character boundary.
        let room = (PREVIEW_BYTES + 4).saturating_sub(self.buf.len());
        if data.len() > room {
            self.buf.extend_from_slice(&data[..room]);
            self.full = true;
            return Err(io::Error::other("preview is long enough"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input_schema() -> CompiledSchema {
        CompiledSchema::compile(&json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["text"],
            "properties": {
                "text": {"type": "string", "minLength": 1, "maxLength": 100},
                "count": {"type": "integer", "minimum": 1},
                "mode": {"enum": ["fast", "slow"]},
                "when": {"type": "string", "format": "date-time"},
                "nested": {
                    "type": "object",
                    "required": ["a/b"],
                    "properties": {"a/b": {"type": "boolean"}}
                }
            }
        }))
        .unwrap()
    }

    #[test]
    fn valid_instance_has_no_violations() {
        let schema = input_schema();
        let ok = json!({"text": "hi", "count": 2, "mode": "fast"});
        assert!(schema.is_valid(&ok));
        assert!(schema.violations(&ok).is_empty());
    }

    #[test]
    fn missing_required_property_points_at_the_property() {
        let violations = input_schema().violations(&json!({}));
        assert_eq!(
            violations,
            vec![Violation {
                path: "/text".into(),
                message: "is a required property".into()
            }]
        );
        assert_eq!(violations[0].to_string(), "/text: is a required property");
    }

    #[test]
    fn nested_required_property_path_is_escaped() {
        let violations = input_schema().violations(&json!({"text": "x", "nested": {}}));
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].path, "/nested/a~1b");
    }

    #[test]
    fn reports_every_violation_with_the_crate_messages() {
        let violations = input_schema().violations(&json!({
            "text": "",
            "count": "x",
            "mode": "medium",
            "extra": true
        }));
        let by_path = |path: &str| {
            violations
                .iter()
                .find(|v| v.path == path)
                .unwrap_or_else(|| panic!("no violation at {path}: {violations:?}"))
                .message
                .clone()
        };
        assert_eq!(violations.len(), 4, "{violations:?}");
        assert_eq!(by_path("/count"), r#""x" is not of type "integer""#);
        assert_eq!(by_path("/text"), r#""" is shorter than 1 character"#);
        assert!(by_path("/mode").starts_with(r#""medium" is not one of"#));
        assert!(by_path("").contains("'extra' was unexpected"));
    }

    #[test]
    fn formats_are_asserted() {
        let violations = input_schema().violations(&json!({"text": "x", "when": "yesterday"}));
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].path, "/when");
        assert_eq!(violations[0].message, r#""yesterday" is not a "date-time""#);
    }

    #[test]
    fn long_values_are_cut_short_in_messages() {
        let long = "é".repeat(10_000);
        let violations = input_schema().violations(&json!({ "text": long }));
        assert_eq!(violations.len(), 1);
        let message = &violations[0].message;
        assert!(message.len() < 200, "{message}");
        assert!(message.starts_with("\"éé"), "{message}");
        assert!(
            message.contains("…\" is longer than 100 characters"),
            "{message}"
        );
    }

    #[test]
    fn root_type_error_has_empty_path() {
        let violations = input_schema().violations(&json!([1, 2]));
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].path, "");
        assert_eq!(violations[0].message, r#"[1,2] is not of type "object""#);
    }

    #[test]
    fn invalid_schemas_and_remote_refs_are_rejected() {
        let error = CompiledSchema::compile(&json!({"type": "strnig"})).unwrap_err();
        assert!(error.starts_with("invalid JSON Schema"), "{error}");
        let remote = json!({"$ref": "https://example.com/schema.json"});
        assert!(CompiledSchema::compile(&remote).is_err());
    }

    #[test]
    fn local_refs_resolve() {
        let schema = CompiledSchema::compile(&json!({
            "$defs": {"label": {"type": "string", "minLength": 2}},
            "type": "object",
            "properties": {"label": {"$ref": "#/$defs/label"}}
        }))
        .unwrap();
        assert!(schema.is_valid(&json!({"label": "ok"})));
        let violations = schema.violations(&json!({"label": "x"}));
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].path, "/label");
    }
}
