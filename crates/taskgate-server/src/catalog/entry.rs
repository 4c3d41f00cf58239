//! An API of the catalog, and what a call of it costs.

use std::sync::Arc;

use serde_json::Value;
use taskgate_core::ApiSlug;
use taskgate_core::money::{Micros, nanos_to_micros};
use taskgate_providers::kinds::Kind;
use taskgate_providers::schema::CompiledSchema;
use taskgate_providers::{ApiSpec, Pricing, Provider, Usage};

use crate::config::ApiOverride;

pub struct ApiEntry {
    /// `spec.slug`, checked: what tasks of this API record.
    pub slug: ApiSlug,
    pub spec: ApiSpec,
    pub provider: Arc<dyn Provider>,
    pub input_schema: CompiledSchema,
    pub output_schema: CompiledSchema,
    /// The keys of the input's `options` a client may send.
    pub allowed_options: AllowedOptions,
}

/// Which `options` an API passes on to its provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedOptions {
    Any,
    Only(Vec<String>),
}

impl AllowedOptions {
    pub fn allows(&self, key: &str) -> bool {
        match self {
            AllowedOptions::Any => true,
            AllowedOptions::Only(keys) => keys.iter().any(|k| k == key),
        }
    }

    /// The setting of `o`, else the default of the API's kind (none for an
    /// API of no upstream kind).
    pub(super) fn of(o: Option<&ApiOverride>, kind: &str) -> Self {
        match o.and_then(|o| o.allowed_options.as_ref()) {
            Some(keys) if keys.iter().any(|k| k == "*") => AllowedOptions::Any,
            Some(keys) => AllowedOptions::Only(keys.clone()),
            None => AllowedOptions::Only(
                Kind::parse(kind)
                    .map(Kind::default_allowed_options)
                    .unwrap_or_default()
                    .iter()
                    .map(|k| (*k).to_owned())
                    .collect(),
            ),
        }
    }
}

impl ApiEntry {
    /// What the task costs, from the API's pricing and the usage.
    pub fn cost(&self, usage: &Usage) -> Micros {
        let nanos: i128 = match self.spec.pricing {
            Pricing::PerCall { price_nanos } => price_nanos as i128 * usage.units.max(0) as i128,
            Pricing::PerKiloTokens {
                input_nanos,
                output_nanos,
            } => {
                (input_nanos as i128 * usage.input_tokens.unwrap_or(0) as i128
                    + output_nanos as i128 * usage.output_tokens.unwrap_or(0) as i128)
                    / 1000
            }
        };
        nanos_to_micros(nanos)
    }

    /// What a live call is reserved against its account's spend limit when it
    /// is accepted, before the real usage is known: the per-call price (times
    /// the images an image call asks for); for token-priced APIs, one input
    /// token per 3 bytes of the input's JSON plus the input's `max_tokens`
    /// output tokens (none without it: the output is charged when the task
    /// ends). Rounded up to the micro-dollar.
    pub fn estimate(&self, input: &Value, input_bytes: usize) -> Micros {
        let price = |nanos: i64| nanos.max(0) as u128;
        let nanos: u128 = match self.spec.pricing {
            Pricing::PerCall { price_nanos } => {
                let units = input
                    .get("n")
                    .and_then(Value::as_u64)
                    .unwrap_or(1)
                    .clamp(1, 100);
                price(price_nanos) * units as u128
            }
            Pricing::PerKiloTokens {
                input_nanos,
                output_nanos,
            } => {
                let input_tokens = (input_bytes as u128).div_ceil(3).max(1);
                let output_tokens = input
                    .get("max_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
                    .min(1 << 24) as u128;
                (price(input_nanos) * input_tokens + price(output_nanos) * output_tokens)
                    .div_ceil(1000)
            }
        };
        Micros(i64::try_from(nanos.div_ceil(1000)).unwrap_or(i64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::catalog::Catalog;
    use crate::catalog::testing::{env, usd};
    use crate::config::Config;

    #[test]
    fn reservations_estimate_a_calls_price() {
        let mut config = Config::default();
        config.catalog.apis.insert(
            "openai-chat".to_owned(),
            ApiOverride {
                input_price_per_1k_tokens_usd: Some(usd("0.003")),
                output_price_per_1k_tokens_usd: Some(usd("0.006")),
                ..ApiOverride::default()
            },
        );
        let c = Catalog::from_config(&config, &env(&[("OPENAI_API_KEY", "sk-x")])).unwrap();
        let per_call = c.get("sentiment").unwrap();
        assert_eq!(per_call.estimate(&json!({"text": "x"}), 12), Micros(100));
        let chat = c.get("openai-chat").unwrap();
        let input = json!({"messages": [], "max_tokens": 1000});
        // 300 bytes: 100 input tokens (0.0003 USD) + 1,000 output (0.006 USD).
        assert_eq!(chat.estimate(&input, 300), Micros(6_300));
        // Without max_tokens, the input only; rounded up to the micro-dollar.
        assert_eq!(chat.estimate(&json!({"messages": []}), 1), Micros(3));
        // Whatever the input says, no overflow.
        let huge = json!({"max_tokens": u64::MAX, "n": u64::MAX});
        assert!(chat.estimate(&huge, usize::MAX).0 > 0);
    }
}
