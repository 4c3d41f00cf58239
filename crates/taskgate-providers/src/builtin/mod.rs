//! Built-in AI APIs computed inside the process: no network, no downloads.
//!
//! Each API is a real model shipped inside a crate (tiktoken's BPE ranks,
//! whatlang's trigram profiles, VADER's lexicon), so the gateway is useful the
//! moment it starts and tests exercise the whole pipeline without upstreams.

mod language_detect;
mod sentiment;
mod token_count;

use std::panic::{self, AssertUnwindSafe};

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::{ApiSpec, ExecContext, ExecError, Execution, LocalClock, Pricing, Provider};
use taskgate_core::task::error_code::INTERNAL_ERROR;

/// The tokens of a text as Taskgate counts them where no provider does
/// (o200k_base).
pub fn text_tokens(text: &str) -> u64 {
    token_count::o200k_tokens(text)
}

/// The provider name shown in the catalog and recorded on attempts.
pub const PROVIDER_NAME: &str = "builtin";

/// Texts longer than this are computed on the blocking pool: below it the
/// work takes well under a millisecond and a thread hop would cost more.
const INLINE_MAX_BYTES: usize = 16 * 1024;

/// The built-in provider.
#[derive(Debug, Clone, Copy, Default)]
pub struct Builtin;

impl Builtin {
    pub fn new() -> Self {
        Self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    TokenCount,
    LanguageDetect,
    Sentiment,
}

impl Api {
    fn from_slug(slug: &str) -> Option<Self> {
        match slug {
            token_count::SLUG => Some(Self::TokenCount),
            language_detect::SLUG => Some(Self::LanguageDetect),
            sentiment::SLUG => Some(Self::Sentiment),
            _ => None,
        }
    }

    fn spec(self) -> ApiSpec {
        match self {
            Self::TokenCount => token_count::spec(),
            Self::LanguageDetect => language_detect::spec(),
            Self::Sentiment => sentiment::spec(),
        }
    }

    /// What the attempt records as its target, e.g. `tiktoken/o200k_base`.
    fn target(self, input: &Value) -> String {
        match self {
            Self::TokenCount => token_count::target(input),
            Self::LanguageDetect => "whatlang".to_owned(),
            Self::Sentiment => "vader".to_owned(),
        }
    }

    fn compute(self, input: &Value) -> Result<Execution, ExecError> {
        match self {
            Self::TokenCount => token_count::compute(input),
            Self::LanguageDetect => language_detect::compute(input),
            Self::Sentiment => sentiment::compute(input),
        }
    }

    fn needs_blocking_pool(self, input: &Value) -> bool {
        let large = input
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|text| text.len() > INLINE_MAX_BYTES);
        // An encoding not built yet costs ~100 ms: never on a runtime thread.
        large || (self == Self::TokenCount && !token_count::is_ready(input))
    }
}

/// Runs `api` on `input`, off the async runtime when the work is heavy.
///
/// Work moved to the blocking pool cannot be interrupted: if the task is
/// cancelled its result is simply dropped when it finishes (at most a few
/// hundred milliseconds for the largest accepted texts).
async fn run(api: Api, input: &Value) -> Result<Execution, ExecError> {
    if api.needs_blocking_pool(input) {
        let input = input.clone();
        tokio::task::spawn_blocking(move || guarded(api, &input))
            .await
            .unwrap_or_else(|error| {
                Err(ExecError::new(
                    INTERNAL_ERROR,
                    format!("{} computation did not finish: {error}", api.spec().slug),
                ))
            })
    } else {
        guarded(api, input)
    }
}

/// Turns a panic inside a model crate into a task failure instead of taking
/// down the runtime thread that happened to run it.
fn guarded(api: Api, input: &Value) -> Result<Execution, ExecError> {
    panic::catch_unwind(AssertUnwindSafe(|| api.compute(input))).unwrap_or_else(|_| {
        Err(ExecError::new(
            INTERNAL_ERROR,
            format!("{} computation panicked", api.target(input)),
        ))
    })
}

#[async_trait]
impl Provider for Builtin {
    fn name(&self) -> &str {
        PROVIDER_NAME
    }

    fn apis(&self) -> Vec<ApiSpec> {
        [Api::TokenCount, Api::LanguageDetect, Api::Sentiment]
            .into_iter()
            .map(Api::spec)
            .collect()
    }

    async fn execute(
        &self,
        api: &str,
        input: &Value,
        ctx: &mut ExecContext,
    ) -> Result<Execution, ExecError> {
        let Some(which) = Api::from_slug(api) else {
            return Err(ExecError::new(
                INTERNAL_ERROR,
                format!("the builtin provider has no API {api:?}"),
            ));
        };
        let clock = LocalClock::start();
        let result = run(which, input).await;
        ctx.push(clock.attempt(PROVIDER_NAME, which.target(input), result.is_ok()));
        result
    }

    /// Test mode runs the real computation: it is already local, free and
    /// deterministic, and a real answer is more useful than a simulated one.
    async fn sandbox(&self, api: &ApiSpec, input: &Value) -> Result<Execution, ExecError> {
        match Api::from_slug(&api.slug) {
            Some(which) => run(which, input).await,
            None => Ok(crate::sandbox::simulate(api, input)),
        }
    }
}

/// The `text` property every built-in API requires.
fn text_of(input: &Value) -> Result<&str, ExecError> {
    input.get("text").and_then(Value::as_str).ok_or_else(|| {
        ExecError::new(
            INTERNAL_ERROR,
            "input.text is missing or not a string (the input was not validated)",
        )
    })
}

/// Rounds a model score for output: more digits would only be noise.
fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

/// Input schema shared by the APIs whose only input is a text.
fn text_only_input_schema(max_chars: u64, description: &str) -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["text"],
        "properties": {
            "text": {
                "type": "string",
                "minLength": 1,
                "maxLength": max_chars,
                "description": description
            }
        }
    })
}

/// Largest serialized input for a text of `max_chars` characters: UTF-8 needs
/// up to 4 bytes a character, plus room for the other properties.
fn max_input_bytes(max_chars: u64) -> u64 {
    4 * max_chars + 4096
}

/// Output schema of the normalized `classification` kind, plus `extra`
/// API-specific properties.
fn classification_output_schema(label: Value, extra: Value, required_extra: &[&str]) -> Value {
    let mut properties = json!({
        "label": label,
        "score": {"type": "number", "minimum": 0, "maximum": 1,
                  "description": "Confidence in `label`, from 0 to 1."},
        "labels": {
            "type": "array",
            "minItems": 1,
            "description": "Candidate labels with their scores.",
            "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["label", "score"],
                "properties": {
                    "label": {"type": "string"},
                    "score": {"type": "number", "minimum": 0, "maximum": 1}
                }
            }
        }
    });
    if let (Some(base), Value::Object(extra)) = (properties.as_object_mut(), extra) {
        base.extend(extra);
    }
    let mut required = vec!["label", "score", "labels"];
    required.extend_from_slice(required_extra);
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": required,
        "properties": properties
    })
}

/// Price of every built-in call until the operator overrides it: $0.0001.
const PRICE: Pricing = Pricing::PerCall {
    price_nanos: 100_000,
};

/// Default and maximum deadline of a built-in call.
const TIMEOUT_MS: u64 = 30_000;

#[cfg(test)]
mod tests;
