//! The normalized kinds served by upstream providers: one input and one output
//! JSON Schema per kind, whichever provider serves an API of that kind, so a
//! client can switch providers without changing its code.
//!
//! Provider-specific extras go in the input's `options` object, which is
//! passed through to the upstream request body as it is (see each adapter).

use serde_json::{Value, json};

use crate::Example;

/// A kind an upstream API can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Chat,
    Embedding,
    ImageGeneration,
    Transcription,
    /// Moderation: the `classification` kind.
    Classification,
}

/// The OpenTelemetry GenAI `gen_ai.operation.name` of an API of `kind`:
/// the convention's name where it has one, else the kind's own.
pub fn operation_name(kind: &str) -> &str {
    match kind {
        "chat" => "chat",
        "embedding" => "embeddings",
        other => other,
    }
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Chat,
        Kind::Embedding,
        Kind::ImageGeneration,
        Kind::Transcription,
        Kind::Classification,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Embedding => "embedding",
            Self::ImageGeneration => "image_generation",
            Self::Transcription => "transcription",
            Self::Classification => "classification",
        }
    }

    /// Largest accepted input, serialized.
    pub fn max_input_bytes(self) -> u64 {
        match self {
            // An inline base64 audio file of up to 25 MB (OpenAI's limit).
            Self::Transcription => 34 * 1024 * 1024,
            _ => 4 * 1024 * 1024,
        }
    }

    /// The `options` a client may send to an API of this kind unless the
    /// operator sets the API's `allowed_options`: request fields of the
    /// providers' wire formats that change how an answer is made but not
    /// what the provider charges for it per unit. Left out on purpose:
    /// `service_tier` (priority and flex tiers are billed differently), `n`
    /// and `best_of` (more answers billed), built-in tools billed per use
    /// (`web_search_options`, `tools`), `audio`/`modalities` (other prices),
    /// `prediction`, image `quality` and `size` in options, `store`.
    pub fn default_allowed_options(self) -> &'static [&'static str] {
        match self {
            Self::Chat => &[
                // OpenAI and OpenAI-compatible
                "seed",
                "presence_penalty",
                "frequency_penalty",
                "logit_bias",
                "logprobs",
                "top_logprobs",
                "user",
                "response_format",
                "reasoning_effort",
                "verbosity",
                "max_completion_tokens",
                // Anthropic
                "top_k",
                "stop_sequences",
                "metadata",
                "thinking",
                // Gemini
                "generationConfig",
                "safetySettings",
            ],
            Self::Embedding => &[
                "encoding_format",
                "user",
                "input_type",
                "task_type",
                "truncate",
            ],
            Self::ImageGeneration => &[
                "style",
                "response_format",
                "user",
                "output_format",
                "output_compression",
                "background",
                "moderation",
            ],
            Self::Transcription => &["temperature", "timestamp_granularities"],
            Self::Classification => &[],
        }
    }

    pub fn input_schema(self) -> Value {
        match self {
            Self::Chat => crate::chat::schema::input(),
            Self::Embedding => embedding_input(),
            Self::ImageGeneration => image_input(),
            Self::Transcription => transcription_input(),
            Self::Classification => moderation_input(),
        }
    }

    pub fn output_schema(self) -> Value {
        match self {
            Self::Chat => crate::chat::schema::output(),
            Self::Embedding => embedding_output(),
            Self::ImageGeneration => image_output(),
            Self::Transcription => transcription_output(),
            Self::Classification => moderation_output(),
        }
    }

    /// Worked examples (outputs as a typical provider answers them).
    pub fn examples(self, model: &str) -> Vec<Example> {
        let (input, output) = match self {
            Self::Chat => (
                json!({"messages": [
                    {"role": "system", "content": "Answer in one word."},
                    {"role": "user", "content": "What is the capital of France?"}
                ], "max_tokens": 16}),
                json!({"text": "Paris", "tool_calls": [], "finish_reason": "stop", "model": model}),
            ),
            Self::Embedding => (
                json!({"input": ["The food was delicious."]}),
                json!({"embeddings": [[0.0023, -0.0093, 0.0151]], "dimensions": 3, "model": model}),
            ),
            Self::ImageGeneration => (
                json!({"prompt": "A lighthouse at dawn, watercolor", "size": "1024x1024"}),
                json!({"images": [{"url": "https://images.example.com/lighthouse.png"}], "model": model}),
            ),
            Self::Transcription => (
                json!({"audio_url": "https://example.com/meeting.mp3", "language": "en"}),
                json!({"text": "Let's start the meeting.", "language": "en", "duration_s": 2.4, "model": model}),
            ),
            Self::Classification => (
                json!({"text": "I will hurt you"}),
                json!({"label": "violence", "score": 0.91, "flagged": true,
                       "labels": [{"label": "violence", "score": 0.91}, {"label": "harassment", "score": 0.42}],
                       "model": model}),
            ),
        };
        vec![Example { input, output }]
    }
}

/// `"poetry" is not one of chat, embedding, …`: the configuration's word
/// for a kind it does not know.
impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|k| k.as_str()).collect();
            format!("{s:?} is not one of {}", names.join(", "))
        })
    }
}

/// Read from and written as its name (`image_generation`), so that the
/// configuration holds a kind, not a string to parse again.
impl serde::Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Kind;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a kind of API")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Kind, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(Visitor)
    }
}

fn options_schema() -> Value {
    json!({
        "type": "object",
        "description": "Provider-specific request fields, merged into the upstream request body as they are (see the API reference)."
    })
}

fn embedding_input() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["input"],
        "properties": {
            "input": {
                "description": "A text, or up to 2048 texts to embed in one call.",
                "oneOf": [
                    {"type": "string", "minLength": 1},
                    {"type": "array", "minItems": 1, "maxItems": 2048,
                     "items": {"type": "string", "minLength": 1}}
                ]
            },
            "dimensions": {"type": "integer", "minimum": 1, "maximum": 65536,
                           "description": "Shorter vectors, where the model supports it."},
            "options": options_schema()
        }
    })
}

fn embedding_output() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["embeddings", "dimensions", "model"],
        "properties": {
            "embeddings": {"type": "array", "description": "One vector per input text, in input order.",
                           "items": {"type": "array", "items": {"type": "number"}}},
            "dimensions": {"type": "integer", "minimum": 0},
            "model": {"type": "string"}
        }
    })
}

fn image_input() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["prompt"],
        "properties": {
            "prompt": {"type": "string", "minLength": 1, "maxLength": 32000},
            "n": {"type": "integer", "minimum": 1, "maximum": 10, "description": "Images to generate (default 1)."},
            "size": {"type": "string", "pattern": "^[0-9]{2,5}x[0-9]{2,5}$", "description": "`WIDTHxHEIGHT`, e.g. `1024x1024`."},
            "options": options_schema()
        }
    })
}

fn image_output() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["images", "model"],
        "properties": {
            "images": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "url": {"type": "string", "description": "Where the provider serves the image (often for a limited time)."},
                        "b64_json": {"type": "string", "description": "The image itself, base64."},
                        "revised_prompt": {"type": "string"}
                    }
                }
            },
            "model": {"type": "string"}
        }
    })
}

fn transcription_input() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "audio_url": {"type": "string", "format": "uri", "maxLength": 2048,
                          "description": "A public http(s) address of the audio file. Private, loopback and metadata addresses are refused."},
            "audio_base64": {"type": "string", "minLength": 1, "description": "The audio file itself, base64."},
            "filename": {"type": "string", "minLength": 1, "maxLength": 255,
                         "description": "The file's name, whose extension tells the format (default from the URL, else `audio.mp3`)."},
            "language": {"type": "string", "minLength": 2, "maxLength": 16, "description": "ISO 639-1 code of the spoken language, if known."},
            "prompt": {"type": "string", "maxLength": 4000},
            "options": options_schema()
        },
        "oneOf": [
            {"required": ["audio_url"], "not": {"required": ["audio_base64"]}},
            {"required": ["audio_base64"], "not": {"required": ["audio_url"]}}
        ]
    })
}

fn transcription_output() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["text", "model"],
        "properties": {
            "text": {"type": "string"},
            "language": {"type": "string"},
            "duration_s": {"type": "number", "minimum": 0},
            "model": {"type": "string"}
        }
    })
}

fn moderation_input() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["text"],
        "properties": {
            "text": {"type": "string", "minLength": 1, "maxLength": 1_000_000},
            "options": options_schema()
        }
    })
}

fn moderation_output() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["label", "score", "labels", "flagged", "model"],
        "properties": {
            "label": {"type": "string", "description": "The top flagged category, or `safe` when nothing is flagged."},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "labels": {
                "type": "array",
                "description": "Every category with its score, highest first.",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["label", "score"],
                    "properties": {
                        "label": {"type": "string"},
                        "score": {"type": "number", "minimum": 0, "maximum": 1}
                    }
                }
            },
            "flagged": {"type": "boolean"},
            "model": {"type": "string"}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::CompiledSchema;

    #[test]
    fn every_kind_compiles_and_its_example_is_valid() {
        for kind in Kind::ALL {
            let input = CompiledSchema::compile(&kind.input_schema()).unwrap();
            let output = CompiledSchema::compile(&kind.output_schema()).unwrap();
            for ex in kind.examples("m") {
                assert!(input.is_valid(&ex.input), "{kind:?} input");
                assert!(output.is_valid(&ex.output), "{kind:?} output");
            }
            assert_eq!(Kind::parse(kind.as_str()), Some(kind));
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, kind.as_str());
            assert_eq!(serde_json::from_value::<Kind>(json).unwrap(), kind);
        }
        let e = "poetry".parse::<Kind>().unwrap_err();
        assert_eq!(
            e,
            "\"poetry\" is not one of chat, embedding, image_generation, transcription, classification"
        );
    }

    #[test]
    fn transcription_takes_exactly_one_audio_source() {
        let s = CompiledSchema::compile(&transcription_input()).unwrap();
        assert!(s.is_valid(&json!({"audio_base64": "AAAA"})));
        assert!(!s.is_valid(&json!({})));
        assert!(!s.is_valid(&json!({"audio_base64": "AAAA", "audio_url": "https://a.b/c.mp3"})));
    }
}
