//! `token-count`: counts tokens exactly as OpenAI models see them, with the
//! tiktoken BPE ranks embedded in the `tiktoken-rs` crate.

use std::sync::OnceLock;

use serde_json::{Value, json};
use tiktoken_rs::CoreBPE;
use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};

use super::{PRICE, TIMEOUT_MS, max_input_bytes, text_of};
use crate::{ApiSpec, Example, ExecError, Execution, Usage};
use taskgate_core::task::error_code::INTERNAL_ERROR;

pub(super) const SLUG: &str = "token-count";

const MAX_CHARS: u64 = 1_000_000;

/// Longest run of consecutive whitespace accepted. tiktoken's pre-tokenizer
/// (fancy-regex) overflows its backtracking stack somewhere past ~500k
/// whitespace characters in a row and would panic; half that is safe for all
/// four encodings and far beyond anything a real document contains.
const MAX_WHITESPACE_RUN: usize = 262_144;

/// Model names accepted by `model`. An explicit list (rather than any string
/// tiktoken might recognise) lets the schema reject typos up front and lets
/// the catalog show clients what is supported.
const MODELS: &[&str] = &[
    "gpt-5",
    "gpt-5-mini",
    "gpt-5-nano",
    "gpt-4.1",
    "gpt-4.1-mini",
    "gpt-4.1-nano",
    "gpt-4o",
    "gpt-4o-mini",
    "chatgpt-4o-latest",
    "o1",
    "o1-mini",
    "o3",
    "o3-mini",
    "o4-mini",
    "gpt-4",
    "gpt-4-turbo",
    "gpt-4-32k",
    "gpt-3.5-turbo",
    "gpt-3.5-turbo-16k",
    "text-embedding-3-small",
    "text-embedding-3-large",
    "text-embedding-ada-002",
    "davinci-002",
    "babbage-002",
    "text-davinci-003",
    "text-davinci-002",
    "code-davinci-002",
    "text-davinci-001",
    "text-curie-001",
    "text-babbage-001",
    "text-ada-001",
    "davinci",
    "curie",
    "babbage",
    "ada",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    O200k,
    Cl100k,
    P50k,
    R50k,
}

const ENCODINGS: [Encoding; 4] = [
    Encoding::O200k,
    Encoding::Cl100k,
    Encoding::P50k,
    Encoding::R50k,
];

impl Encoding {
    fn name(self) -> &'static str {
        match self {
            Self::O200k => "o200k_base",
            Self::Cl100k => "cl100k_base",
            Self::P50k => "p50k_base",
            Self::R50k => "r50k_base",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        ENCODINGS.into_iter().find(|e| e.name() == name)
    }

    fn for_model(model: &str) -> Option<Self> {
        match get_tokenizer(model)? {
            Tokenizer::O200kBase => Some(Self::O200k),
            Tokenizer::Cl100kBase => Some(Self::Cl100k),
            Tokenizer::P50kBase => Some(Self::P50k),
            Tokenizer::R50kBase | Tokenizer::Gpt2 => Some(Self::R50k),
            Tokenizer::P50kEdit | Tokenizer::O200kHarmony => None,
        }
    }

    fn cell(self) -> &'static OnceLock<Result<CoreBPE, String>> {
        static CELLS: [OnceLock<Result<CoreBPE, String>>; 4] = [const { OnceLock::new() }; 4];
        &CELLS[self as usize]
    }

    /// The encoder, built on first use: parsing the embedded ranks takes
    /// ~100 ms and hundreds of thousands of allocations, so it happens once.
    fn bpe(self) -> Result<&'static CoreBPE, ExecError> {
        let built = self.cell().get_or_init(|| {
            let built = match self {
                Self::O200k => tiktoken_rs::o200k_base(),
                Self::Cl100k => tiktoken_rs::cl100k_base(),
                Self::P50k => tiktoken_rs::p50k_base(),
                Self::R50k => tiktoken_rs::r50k_base(),
            };
            built.map_err(|error| error.to_string())
        });
        built.as_ref().map_err(|error| {
            ExecError::new(
                INTERNAL_ERROR,
                format!("building the {} encoding failed: {error}", self.name()),
            )
        })
    }
}

/// Which encoding `input` asks for; `model` wins if both slipped through.
fn encoding_of(input: &Value) -> Result<Encoding, ExecError> {
    if let Some(model) = input.get("model").and_then(Value::as_str) {
        return Encoding::for_model(model).ok_or_else(|| {
            ExecError::new(
                INTERNAL_ERROR,
                format!("no known encoding for model {model:?}"),
            )
        });
    }
    match input.get("encoding").and_then(Value::as_str) {
        None => Ok(Encoding::O200k),
        Some(name) => Encoding::from_name(name)
            .ok_or_else(|| ExecError::new(INTERNAL_ERROR, format!("unknown encoding {name:?}"))),
    }
}

pub(super) fn is_ready(input: &Value) -> bool {
    encoding_of(input).is_ok_and(|encoding| encoding.cell().get().is_some())
}

pub(super) fn target(input: &Value) -> String {
    match encoding_of(input) {
        Ok(encoding) => format!("tiktoken/{}", encoding.name()),
        Err(_) => "tiktoken".to_owned(),
    }
}

pub(super) fn compute(input: &Value) -> Result<Execution, ExecError> {
    let text = text_of(input)?;
    let encoding = encoding_of(input)?;
    let run = longest_whitespace_run(text);
    if run > MAX_WHITESPACE_RUN {
        return Err(ExecError::new(
            INTERNAL_ERROR,
            format!(
                "the text has {run} consecutive whitespace characters; \
                 at most {MAX_WHITESPACE_RUN} can be tokenized"
            ),
        ));
    }
    // Ordinary encoding: text that spells a special token such as
    // `<|endoftext|>` is user content and is counted as the plain text it is.
    let tokens = encoding.bpe()?.encode_ordinary(text);
    let count = i64::try_from(tokens.len()).unwrap_or(i64::MAX);
    let mut output = json!({
        "token_count": count,
        "encoding": encoding.name(),
        "characters": text.chars().count(),
    });
    if input.get("return_tokens").and_then(Value::as_bool) == Some(true) {
        output["tokens"] = json!(tokens);
    }
    Ok(Execution {
        output,
        usage: Usage {
            units: 1,
            input_tokens: Some(count),
            ..Usage::default()
        },
    })
}

fn longest_whitespace_run(text: &str) -> usize {
    let (mut longest, mut current) = (0, 0);
    for c in text.chars() {
        current = if c.is_whitespace() { current + 1 } else { 0 };
        longest = longest.max(current);
    }
    longest
}

pub(super) fn spec() -> ApiSpec {
    let encodings: Vec<&str> = ENCODINGS.iter().map(|e| e.name()).collect();
    ApiSpec {
        slug: SLUG.to_owned(),
        name: "Token count".to_owned(),
        description: "Counts the tokens of a text as OpenAI models see them, using the \
            tiktoken byte-pair encodings (o200k_base for GPT-4o and later, cl100k_base for \
            GPT-4 and GPT-3.5, p50k_base and r50k_base for older models). Choose an \
            `encoding` or a `model` (not both); the default is o200k_base. Special-token \
            strings such as <|endoftext|> are counted as ordinary text. `characters` counts \
            Unicode code points. Set `return_tokens` to also get the token ids. A text \
            with more than 262,144 consecutive whitespace characters fails."
            .to_owned(),
        kind: "tokenization".to_owned(),
        provider: super::PROVIDER_NAME.to_owned(),
        pricing: PRICE,
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["text"],
            "properties": {
                "text": {"type": "string", "minLength": 1, "maxLength": MAX_CHARS,
                         "description": "The text to tokenize."},
                "encoding": {"type": "string", "enum": encodings, "default": "o200k_base",
                             "description": "The tiktoken encoding. Cannot be combined with `model`."},
                "model": {"type": "string", "enum": MODELS,
                          "description": "An OpenAI model name; its encoding is used."},
                "return_tokens": {"type": "boolean", "default": false,
                                  "description": "Also return the token ids."}
            },
            // Naming both could disagree; a clear rejection beats a silent choice.
            "dependentSchemas": {"model": {"properties": {"encoding": false}}}
        }),
        output_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["token_count", "encoding", "characters"],
            "properties": {
                "token_count": {"type": "integer", "minimum": 0},
                "encoding": {"type": "string", "enum": encodings},
                "characters": {"type": "integer", "minimum": 0},
                "tokens": {"type": "array", "items": {"type": "integer", "minimum": 0},
                           "description": "Token ids, when `return_tokens` was set."}
            }
        }),
        examples: vec![
            Example {
                input: json!({"text": "Hello, world! Tokenizers split text into pieces."}),
                output: json!({"token_count": 11, "encoding": "o200k_base", "characters": 48}),
            },
            Example {
                input: json!({"text": "tiktoken is great!", "model": "gpt-4", "return_tokens": true}),
                output: json!({
                    "token_count": 6, "encoding": "cl100k_base", "characters": 18,
                    "tokens": [83, 1609, 5963, 374, 2294, 0]
                }),
            },
            Example {
                input: json!({"text": "Les modèles comptent les jetons différemment.", "encoding": "r50k_base"}),
                output: json!({"token_count": 15, "encoding": "r50k_base", "characters": 45}),
            },
        ],
        timeout_ms: TIMEOUT_MS,
        max_input_bytes: max_input_bytes(MAX_CHARS),
    }
}

/// The tokens of `text` in o200k_base, the encoding of today's OpenAI
/// models; a text tiktoken cannot take (a whitespace run over its limit)
/// counts one token per 4 bytes.
pub(super) fn o200k_tokens(text: &str) -> u64 {
    if longest_whitespace_run(text) > MAX_WHITESPACE_RUN {
        return (text.len() as u64).div_ceil(4);
    }
    match Encoding::O200k.bpe() {
        Ok(bpe) => bpe.encode_ordinary(text).len() as u64,
        Err(_) => (text.len() as u64).div_ceil(4),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_model_maps_to_a_supported_encoding() {
        for model in MODELS {
            assert!(Encoding::for_model(model).is_some(), "{model}");
        }
        assert_eq!(Encoding::for_model("gpt-4o"), Some(Encoding::O200k));
        assert_eq!(Encoding::for_model("gpt-3.5-turbo"), Some(Encoding::Cl100k));
        assert_eq!(
            Encoding::for_model("text-davinci-003"),
            Some(Encoding::P50k)
        );
        assert_eq!(Encoding::for_model("davinci"), Some(Encoding::R50k));
        assert_eq!(Encoding::for_model("no-such-model"), None);
    }

    #[test]
    fn counts_match_reference_tiktoken() {
        // Reference counts from OpenAI's Python tiktoken.
        let count = |encoding: &str, text: &str| {
            compute(&json!({"text": text, "encoding": encoding}))
                .unwrap()
                .output["token_count"]
                .as_i64()
                .unwrap()
        };
        assert_eq!(count("cl100k_base", "hello world"), 2);
        assert_eq!(count("r50k_base", "hello world"), 2);
        assert_eq!(count("cl100k_base", "tiktoken is great!"), 6);
        assert_eq!(count("o200k_base", "hello world"), 2);
    }

    #[test]
    fn huge_whitespace_runs_fail_cleanly() {
        let mut text = " ".repeat(MAX_WHITESPACE_RUN);
        assert!(compute(&json!({ "text": format!("{text}x") })).is_ok());
        text.push('\t');
        let error = compute(&json!({ "text": text })).unwrap_err();
        assert_eq!(error.code, "internal_error");
        assert!(
            error.message.contains("262145 consecutive whitespace"),
            "{error}"
        );
    }

    #[test]
    fn special_token_text_is_ordinary_text() {
        let output = compute(&json!({"text": "<|endoftext|>", "encoding": "cl100k_base"})).unwrap();
        assert!(output.output["token_count"].as_i64().unwrap() > 1);
    }

    #[test]
    fn default_encoding_usage_and_target() {
        let input = json!({"text": "hello world"});
        let execution = compute(&input).unwrap();
        assert_eq!(execution.output["encoding"], "o200k_base");
        assert!(execution.output.get("tokens").is_none());
        assert_eq!(execution.usage.input_tokens, Some(2));
        assert_eq!(execution.usage.units, 1);
        assert_eq!(target(&input), "tiktoken/o200k_base");
        assert_eq!(
            target(&json!({"text": "x", "model": "gpt-4"})),
            "tiktoken/cl100k_base"
        );
    }

    #[test]
    fn characters_count_code_points_and_tokens_round_trip() {
        let text = "naïve café 😀";
        let input = json!({"text": text, "encoding": "cl100k_base", "return_tokens": true});
        let output = compute(&input).unwrap().output;
        assert_eq!(output["characters"], 12);
        let ids: Vec<u32> = serde_json::from_value(output["tokens"].clone()).unwrap();
        assert_eq!(ids.len() as u64, output["token_count"].as_u64().unwrap());
        let bytes = Encoding::Cl100k.bpe().unwrap().decode_bytes(&ids).unwrap();
        assert_eq!(bytes, text.as_bytes());
    }
}
