//! `[catalog]`: APIs left out, overridden or declared.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use taskgate_core::Nanos;
use taskgate_providers::kinds::Kind;
use taskgate_providers::upstream::{HttpApiConfig, TargetConfig};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogConfig {
    /// API slugs to leave out of the catalog.
    pub disabled: Vec<String>,
    /// APIs by slug: an entry with a `provider` declares an upstream API;
    /// an entry without one overrides a built-in or default API.
    pub apis: BTreeMap<String, ApiOverride>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiOverride {
    pub name: Option<String>,
    pub description: Option<String>,
    /// Price per call in USD, as a decimal string, e.g. `"0.0002"`.
    pub price_per_call_usd: Option<Nanos>,
    /// Price per 1,000 input tokens in USD (with `output_price_per_1k_tokens_usd`).
    pub input_price_per_1k_tokens_usd: Option<Nanos>,
    /// Price per 1,000 output tokens in USD.
    pub output_price_per_1k_tokens_usd: Option<Nanos>,
    /// Price per 1,000 input tokens read from the provider's prompt cache,
    /// in USD (token pricing only; unset: cached input costs the full
    /// input price).
    pub cached_input_price_per_1k_tokens_usd: Option<Nanos>,
    pub timeout_ms: Option<u64>,
    /// The kind (`chat`, `embedding`, `image_generation`, `transcription`,
    /// `classification`) of a declared API.
    pub kind: Option<Kind>,
    /// The provider (a `[providers.NAME]`) that serves a declared API.
    pub provider: Option<String>,
    /// The provider's model.
    pub model: Option<String>,
    /// Weight of the primary target among `deployments` (default 1).
    pub weight: Option<u32>,
    /// More deployments sharing the traffic with the primary target, by weight.
    pub deployments: Vec<TargetConfig>,
    /// Targets tried in order when the deployments fail.
    pub fallbacks: Vec<TargetConfig>,
    /// How an `http` provider serves this API.
    pub http: Option<HttpApiConfig>,
    /// The keys of the input's `options` clients may send (`["*"]`: any).
    /// Default: those of the kind that do not change the upstream's price.
    pub allowed_options: Option<Vec<String>>,
    /// The most tokens a chat API's model writes in an answer: an input's
    /// `max_tokens` above it is lowered to it (clients such as Claude Code
    /// ask more than many models take).
    pub max_output_tokens: Option<u64>,
}
