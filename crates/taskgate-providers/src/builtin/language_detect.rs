//! `language-detect`: language identification with `whatlang` (script
//! detection, then trigram and alphabet profiles of 70 languages).

use serde_json::{Value, json};
use whatlang::Detector;

use super::{
    PRICE, TIMEOUT_MS, classification_output_schema, max_input_bytes, round, text_of,
    text_only_input_schema,
};
use crate::{ApiSpec, Example, ExecError, Execution, Usage};

pub(super) const SLUG: &str = "language-detect";

const MAX_CHARS: u64 = 100_000;

/// ISO 639-3 "undetermined", returned when no language can be detected.
const UNDETERMINED: &str = "und";

pub(super) fn compute(input: &Value) -> Result<Execution, ExecError> {
    let text = text_of(input)?;
    let output = match Detector::new().detect(text) {
        Some(info) => {
            let label = info.lang().code();
            let score = round(info.confidence(), 4);
            // whatlang's public API names one language only; its candidate
            // scores exist only behind an unstable `dev` feature.
            json!({
                "label": label,
                "score": score,
                "labels": [{"label": label, "score": score}],
                "language_name": info.lang().eng_name(),
                "script": info.script().name(),
                "reliable": info.is_reliable(),
            })
        }
        None => json!({
            "label": UNDETERMINED,
            "score": 0.0,
            "labels": [{"label": UNDETERMINED, "score": 0.0}],
            "language_name": "Undetermined",
            "script": whatlang::detect_script(text).map_or_else(|| "Unknown".to_owned(), |s| s.name().to_owned()),
            "reliable": false,
        }),
    };
    Ok(Execution {
        output,
        usage: Usage {
            units: 1,
            ..Usage::default()
        },
    })
}

pub(super) fn spec() -> ApiSpec {
    ApiSpec {
        slug: SLUG.to_owned(),
        name: "Language detection".to_owned(),
        description: "Identifies the language of a text among 70 languages with the whatlang \
            library (writing-script detection, then trigram and alphabet statistics). `label` \
            is the ISO 639-3 code (e.g. \"eng\", \"fra\", \"cmn\"), `score` the confidence from \
            0 to 1, and `reliable` whether the detection can be trusted; short texts are often \
            unreliable. When no language can be detected (e.g. only digits or punctuation) the \
            label is \"und\" (undetermined) with score 0."
            .to_owned(),
        kind: "classification".to_owned(),
        provider: super::PROVIDER_NAME.to_owned(),
        pricing: PRICE,
        input_schema: text_only_input_schema(MAX_CHARS, "The text whose language to detect."),
        output_schema: classification_output_schema(
            json!({"type": "string", "minLength": 3, "maxLength": 3, "pattern": "^[a-z]{3}$",
                   "description": "ISO 639-3 language code, or \"und\" when undetermined."}),
            json!({
                "language_name": {"type": "string", "description": "English name of the language."},
                "script": {"type": "string", "description": "Writing script, e.g. \"Latin\"."},
                "reliable": {"type": "boolean", "description": "Whether the detection can be trusted."}
            }),
            &["language_name", "script", "reliable"],
        ),
        examples: vec![
            Example {
                input: json!({"text": "This sentence was written in English so that the detector can recognise it."}),
                output: json!({
                    "label": "eng", "score": 1.0, "labels": [{"label": "eng", "score": 1.0}],
                    "language_name": "English", "script": "Latin", "reliable": true
                }),
            },
            Example {
                input: json!({"text": "Это предложение написано на русском языке."}),
                output: json!({
                    "label": "rus", "score": 1.0, "labels": [{"label": "rus", "score": 1.0}],
                    "language_name": "Russian", "script": "Cyrillic", "reliable": true
                }),
            },
            Example {
                input: json!({"text": "Guten Morgen, wie geht es dir?"}),
                output: json!({
                    "label": "deu", "score": 0.2717, "labels": [{"label": "deu", "score": 0.2717}],
                    "language_name": "German", "script": "Latin", "reliable": false
                }),
            },
            Example {
                input: json!({"text": "12345 !!!"}),
                output: json!({
                    "label": "und", "score": 0.0, "labels": [{"label": "und", "score": 0.0}],
                    "language_name": "Undetermined", "script": "Unknown", "reliable": false
                }),
            },
        ],
        timeout_ms: TIMEOUT_MS,
        max_input_bytes: max_input_bytes(MAX_CHARS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(text: &str) -> Value {
        compute(&json!({ "text": text })).unwrap().output
    }

    #[test]
    fn detects_common_languages() {
        let cases = [
            (
                "Este es un texto escrito en español para probar la detección.",
                "spa",
                "Spanish",
            ),
            (
                "Dies ist ein deutscher Satz, der die Spracherkennung prüfen soll.",
                "deu",
                "German",
            ),
            ("これは日本語の文章です。", "jpn", "Japanese"),
            ("Я дуже люблю свою країну і її мову.", "ukr", "Ukrainian"),
        ];
        for (text, code, name) in cases {
            let output = detect(text);
            assert_eq!(output["label"], code, "{text}: {output}");
            assert_eq!(output["language_name"], name);
            assert_eq!(output["labels"][0]["label"], code);
            let score = output["score"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&score));
        }
    }

    #[test]
    fn undetectable_text_is_und_with_score_zero() {
        let output = detect("12345 !!! ???");
        assert_eq!(output["label"], "und");
        assert_eq!(output["score"], 0.0);
        assert_eq!(output["reliable"], false);
        assert_eq!(output["script"], "Unknown");
    }
}
