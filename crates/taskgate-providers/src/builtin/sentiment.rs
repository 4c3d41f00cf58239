//! `sentiment`: VADER (Hutto & Gilbert, 2014), a lexicon- and rule-based
//! sentiment model tuned for short social-media English, via `vader_sentiment`.

use serde_json::{Value, json};
use vader_sentiment::SentimentIntensityAnalyzer;

use super::{
    PRICE, TIMEOUT_MS, classification_output_schema, max_input_bytes, round, text_of,
    text_only_input_schema,
};
use crate::{ApiSpec, Example, ExecError, Execution, Usage};

pub(super) const SLUG: &str = "sentiment";

const MAX_CHARS: u64 = 100_000;

/// The standard VADER decision thresholds on the compound score.
const POSITIVE_FROM: f64 = 0.05;
const NEGATIVE_TO: f64 = -0.05;

pub(super) fn compute(input: &Value) -> Result<Execution, ExecError> {
    let text = text_of(input)?;
    let analyzer = SentimentIntensityAnalyzer::new();
    let scores = analyzer.polarity_scores(text);
    let get = |key: &str| scores.get(key).copied().unwrap_or(0.0);
    // Rounded as the reference implementation rounds them (3 and 4 digits),
    // so results can be compared with published VADER scores.
    let positive = round(get("pos"), 3);
    let neutral = round(get("neu"), 3);
    let negative = round(get("neg"), 3);
    let compound = round(get("compound"), 4);
    let (label, score) = if compound >= POSITIVE_FROM {
        ("positive", positive)
    } else if compound <= NEGATIVE_TO {
        ("negative", negative)
    } else {
        ("neutral", neutral)
    };
    Ok(Execution {
        output: json!({
            "label": label,
            "score": score,
            "labels": [
                {"label": "positive", "score": positive},
                {"label": "neutral", "score": neutral},
                {"label": "negative", "score": negative},
            ],
            "compound": compound,
        }),
        usage: Usage {
            units: 1,
            ..Usage::default()
        },
    })
}

pub(super) fn spec() -> ApiSpec {
    ApiSpec {
        slug: SLUG.to_owned(),
        name: "Sentiment analysis".to_owned(),
        description: "Scores the sentiment of English text with VADER, a lexicon- and \
            rule-based model that understands negation, intensifiers (\"very\"), \"but\", \
            capitalisation, exclamation marks and emoji. `compound` is the overall polarity \
            from -1 (most negative) to 1 (most positive); `label` is positive when compound \
            >= 0.05, negative when <= -0.05 and neutral otherwise; `score` is the proportion \
            of the text carrying that sentiment, and `labels` gives all three proportions. \
            A text without scorable words is neutral with all proportions 0."
            .to_owned(),
        kind: "classification".to_owned(),
        provider: super::PROVIDER_NAME.to_owned(),
        pricing: PRICE,
        input_schema: text_only_input_schema(MAX_CHARS, "The English text to score."),
        output_schema: classification_output_schema(
            json!({"type": "string", "enum": ["positive", "negative", "neutral"]}),
            json!({
                "compound": {"type": "number", "minimum": -1, "maximum": 1,
                             "description": "Normalized overall polarity."}
            }),
            &["compound"],
        ),
        examples: vec![
            Example {
                input: json!({"text": "VADER is smart, handsome, and funny."}),
                output: json!({
                    "label": "positive", "score": 0.746,
                    "labels": [
                        {"label": "positive", "score": 0.746},
                        {"label": "neutral", "score": 0.254},
                        {"label": "negative", "score": 0.0}
                    ],
                    "compound": 0.8316
                }),
            },
            Example {
                input: json!({"text": "The service was terribly slow and the food was cold."}),
                output: json!({
                    "label": "negative", "score": 0.286,
                    "labels": [
                        {"label": "positive", "score": 0.0},
                        {"label": "neutral", "score": 0.714},
                        {"label": "negative", "score": 0.286}
                    ],
                    "compound": -0.5574
                }),
            },
            Example {
                input: json!({"text": "The meeting is at 3pm in room 4."}),
                output: json!({
                    "label": "neutral", "score": 1.0,
                    "labels": [
                        {"label": "positive", "score": 0.0},
                        {"label": "neutral", "score": 1.0},
                        {"label": "negative", "score": 0.0}
                    ],
                    "compound": 0.0
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

    fn score(text: &str) -> Value {
        compute(&json!({ "text": text })).unwrap().output
    }

    #[test]
    fn matches_reference_vader_scores() {
        // From the reference implementation's README.
        let output = score("VADER is smart, handsome, and funny.");
        assert_eq!(output["compound"], 0.8316);
        assert_eq!(output["labels"][0]["score"], 0.746);
        assert_eq!(output["labels"][1]["score"], 0.254);
        assert_eq!(output["labels"][2]["score"], 0.0);
        assert_eq!(output["label"], "positive");
        assert_eq!(output["score"], 0.746);
    }

    #[test]
    fn negation_and_thresholds() {
        let output = score("The movie was not good at all.");
        assert_eq!(output["label"], "negative", "{output}");
        assert_eq!(output["score"], output["labels"][2]["score"]);
        let neutral = score("The meeting is at 3pm in room 4.");
        assert_eq!(neutral["label"], "neutral");
        assert_eq!(neutral["compound"], 0.0);
    }

    #[test]
    fn text_without_words_is_neutral_zero() {
        let output = score("? ! .");
        assert_eq!(output["label"], "neutral");
        assert_eq!(output["score"], 0.0);
    }
}
