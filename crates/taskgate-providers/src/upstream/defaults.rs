//! What appears with no configuration file: a provider for each of
//! `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` and `GEMINI_API_KEY` that is set
//! (at the address in `OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`,
//! `GEMINI_BASE_URL` when set, as the providers' own SDKs allow), each with a
//! default set of APIs.

use super::config::{Protocol, ProviderConfig};
use crate::Pricing;
use crate::kinds::Kind;

/// An API offered by default for a provider configured from the environment.
#[derive(Debug, Clone)]
pub struct DefaultApi {
    pub slug: &'static str,
    pub name: &'static str,
    pub kind: Kind,
    pub model: &'static str,
    pub pricing: Pricing,
}

/// `(name, key variable, base URL variable, protocol)` of each provider the
/// environment can configure.
const ENV_PROVIDERS: [(&str, &str, &str, Protocol); 3] = [
    (
        "openai",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        Protocol::Openai,
    ),
    (
        "anthropic",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        Protocol::Anthropic,
    ),
    (
        "gemini",
        "GEMINI_API_KEY",
        "GEMINI_BASE_URL",
        Protocol::Gemini,
    ),
];

/// The providers configured by the environment, read through `get`.
pub fn env_providers(get: impl Fn(&str) -> Option<String>) -> Vec<(String, ProviderConfig)> {
    ENV_PROVIDERS
        .iter()
        .filter(|(_, key, _, _)| get(key).is_some_and(|v| !v.trim().is_empty()))
        .map(|(name, key, base, protocol)| {
            (
                (*name).to_owned(),
                ProviderConfig {
                    protocol: *protocol,
                    base_url: get(base).filter(|v| !v.trim().is_empty()),
                    api_key: None,
                    api_key_env: Some((*key).to_owned()),
                    auth_header: None,
                    headers: Default::default(),
                    query: Default::default(),
                    body: Default::default(),
                    timeout_ms: None,
                    max_retries: None,
                    stream: None,
                    breaker_failures: None,
                    breaker_cooldown_ms: None,
                },
            )
        })
        .collect()
}

/// Price per 1K tokens from prices per million tokens in micro-dollars
/// (`per_million_micros` = USD per 1M tokens × 1e6): nano-USD per 1K tokens
/// is exactly the same number. `cached_input` is the price of input read
/// from the provider's prompt cache, where it has one.
const fn per_1k(
    input_per_million_micros: i64,
    output_per_million_micros: i64,
    cached_input_per_million_micros: Option<i64>,
) -> Pricing {
    Pricing::PerKiloTokens {
        input_nanos: input_per_million_micros,
        output_nanos: output_per_million_micros,
        cached_input_nanos: cached_input_per_million_micros,
    }
}

/// The default APIs of a provider configured from the environment. Prices
/// are the providers' list prices when this was written, cached input
/// included (OpenAI bills it at half the input price for gpt-4o-mini,
/// Anthropic's cache reads at a tenth of it, Google's Gemini 2.x context
/// cache at a quarter of it, the price it launched with: if Google's list
/// price is lower today, this overstates it, never understates it); the
/// operator can change any of them in the configuration file.
pub fn default_apis(protocol: Protocol) -> Vec<DefaultApi> {
    match protocol {
        Protocol::Openai => vec![
            DefaultApi {
                slug: "openai-chat",
                name: "OpenAI GPT-4o mini",
                kind: Kind::Chat,
                model: "gpt-4o-mini",
                pricing: per_1k(150_000, 600_000, Some(75_000)),
            },
            DefaultApi {
                slug: "openai-embedding",
                name: "OpenAI text-embedding-3-small",
                kind: Kind::Embedding,
                model: "text-embedding-3-small",
                pricing: per_1k(20_000, 0, None),
            },
            DefaultApi {
                slug: "openai-image",
                name: "OpenAI DALL·E 3",
                kind: Kind::ImageGeneration,
                model: "dall-e-3",
                pricing: Pricing::PerCall {
                    price_nanos: 40_000_000,
                },
            },
            DefaultApi {
                slug: "openai-transcription",
                name: "OpenAI Whisper",
                kind: Kind::Transcription,
                model: "whisper-1",
                pricing: Pricing::PerCall {
                    price_nanos: 6_000_000,
                },
            },
            DefaultApi {
                slug: "openai-moderation",
                name: "OpenAI omni-moderation",
                kind: Kind::Classification,
                model: "omni-moderation-latest",
                pricing: Pricing::PerCall { price_nanos: 0 },
            },
        ],
        Protocol::Anthropic => vec![DefaultApi {
            slug: "anthropic-chat",
            name: "Anthropic Claude Haiku 4.5",
            kind: Kind::Chat,
            model: "claude-haiku-4-5",
            pricing: per_1k(1_000_000, 5_000_000, Some(100_000)),
        }],
        Protocol::Gemini => vec![
            DefaultApi {
                slug: "gemini-chat",
                name: "Google Gemini 2.5 Flash",
                kind: Kind::Chat,
                model: "gemini-2.5-flash",
                pricing: per_1k(300_000, 2_500_000, Some(75_000)),
            },
            DefaultApi {
                slug: "gemini-embedding",
                name: "Google Gemini Embedding",
                kind: Kind::Embedding,
                model: "gemini-embedding-001",
                // Gemini reports no token counts for embeddings, so a price per
                // token would always come to zero: priced per call, free until
                // the operator sets `price_per_call_usd`.
                pricing: Pricing::PerCall { price_nanos: 0 },
            },
        ],
        Protocol::Http => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_providers_with_a_key_appear() {
        let env = |k: &str| match k {
            "OPENAI_API_KEY" => Some("sk-test".to_owned()),
            "OPENAI_BASE_URL" => Some("http://127.0.0.1:9/v1".to_owned()),
            "ANTHROPIC_API_KEY" => Some("  ".to_owned()),
            _ => None,
        };
        let p = env_providers(env);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].0, "openai");
        assert_eq!(p[0].1.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(p[0].1.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    }

    #[test]
    fn each_provider_offers_chat_and_embedding_where_it_has_them() {
        for (protocol, kinds) in [
            (Protocol::Openai, vec![Kind::Chat, Kind::Embedding]),
            (Protocol::Anthropic, vec![Kind::Chat]),
            (Protocol::Gemini, vec![Kind::Chat, Kind::Embedding]),
        ] {
            let apis = default_apis(protocol);
            for k in kinds {
                assert!(apis.iter().any(|a| a.kind == k), "{protocol:?} {k:?}");
            }
        }
        // $0.15 per 1M input tokens = $0.00015 per 1K = 150 000 nano-USD;
        // cached input $0.075 per 1M.
        assert_eq!(
            default_apis(Protocol::Openai)[0].pricing,
            Pricing::PerKiloTokens {
                input_nanos: 150_000,
                output_nanos: 600_000,
                cached_input_nanos: Some(75_000),
            }
        );
    }
}
