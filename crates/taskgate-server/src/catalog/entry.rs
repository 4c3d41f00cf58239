//! An API of the catalog, and what a call of it costs.

use std::sync::Arc;

use serde_json::Value;
use taskgate_core::ApiSlug;
use taskgate_core::money::{Micros, nanos_to_micros};
use taskgate_providers::chat::Reasoning;
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
    /// A chat API's most output tokens: an input's `max_tokens` above it is
    /// lowered to it.
    pub max_output_tokens: Option<u64>,
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
    /// What the task costs, from the API's pricing and the usage. Of the
    /// input tokens, the cached ones cost the cached price (the full input
    /// price where the API has none, and never more than it) and the rest the
    /// input price, in integer nano-USD rounded once:
    /// `((input − cached) × input price + cached × cached price + output ×
    /// output price) / 1000`. Cached tokens are counted within `0..=input`
    /// whatever an upstream reports.
    pub fn cost(&self, usage: &Usage) -> Micros {
        let nanos: i128 = match self.spec.pricing {
            Pricing::PerCall { price_nanos } => price_nanos as i128 * usage.units.max(0) as i128,
            Pricing::PerKiloTokens {
                input_nanos,
                output_nanos,
                cached_input_nanos,
            } => {
                let input = usage.input_tokens.unwrap_or(0) as i128;
                let cached =
                    (usage.cached_input_tokens.unwrap_or(0) as i128).clamp(0, input.max(0));
                let cached_price = cached_input_nanos.map_or(input_nanos, |c| c.min(input_nanos));
                ((input - cached) * input_nanos as i128
                    + cached * cached_price as i128
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
    /// ends). Rounded up to the micro-dollar. The input is priced in full,
    /// as if none of it were cached: what part of it the provider will read
    /// from its cache is not known before the call, and a reservation must
    /// never be below the cost.
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
                ..
            } => {
                let input_tokens = (input_bytes as u128).div_ceil(3).max(1);
                // A chat's reasoning budget is output too, on top of its
                // answer's `max_tokens`.
                let reasoning =
                    Reasoning::of(input.get("reasoning")).map_or(0, Reasoning::budget_tokens);
                let output_tokens = input
                    .get("max_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
                    .saturating_add(reasoning)
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
        // A reasoning budget is output too: 1,000 + 4,096 (medium) output
        // tokens, 0.030576 USD, + 0.0003 input.
        let reasoning =
            json!({"messages": [], "max_tokens": 1000, "reasoning": {"effort": "medium"}});
        assert_eq!(chat.estimate(&reasoning, 300), Micros(30_876));
        // Without max_tokens, the input only; rounded up to the micro-dollar.
        assert_eq!(chat.estimate(&json!({"messages": []}), 1), Micros(3));
        // Whatever the input says, no overflow.
        let huge = json!({"max_tokens": u64::MAX, "n": u64::MAX});
        assert!(chat.estimate(&huge, usize::MAX).0 > 0);
    }

    /// The catalog with `openai-chat` (from `OPENAI_API_KEY`) priced by `o`.
    fn chat_priced(o: ApiOverride) -> Catalog {
        let mut config = Config::default();
        config.catalog.apis.insert("openai-chat".to_owned(), o);
        Catalog::from_config(&config, &env(&[("OPENAI_API_KEY", "sk-x")])).unwrap()
    }

    /// $0.003 / $0.006 per 1K input / output tokens, and `cached` per 1K
    /// cached input tokens.
    fn priced(cached: Option<&str>) -> ApiOverride {
        ApiOverride {
            input_price_per_1k_tokens_usd: Some(usd("0.003")),
            output_price_per_1k_tokens_usd: Some(usd("0.006")),
            cached_input_price_per_1k_tokens_usd: cached.map(usd),
            ..ApiOverride::default()
        }
    }

    fn tokens(input: i64, cached: Option<i64>, output: i64) -> Usage {
        Usage {
            units: 1,
            input_tokens: Some(input),
            output_tokens: Some(output),
            reasoning_tokens: Some(100),
            cached_input_tokens: cached,
        }
    }

    #[test]
    fn cached_input_costs_the_cached_price() {
        let c = chat_priced(priced(Some("0.0003")));
        let chat = c.get("openai-chat").unwrap();
        // 2,000 uncached × 0.003 + 8,000 cached × 0.0003 + 500 × 0.006 per
        // 1K = 0.006 + 0.0024 + 0.003 USD.
        assert_eq!(chat.cost(&tokens(10_000, Some(8_000), 500)), Micros(11_400));
        // Nothing cached, or not reported: the full input price.
        assert_eq!(chat.cost(&tokens(10_000, Some(0), 500)), Micros(33_000));
        assert_eq!(chat.cost(&tokens(10_000, None, 500)), Micros(33_000));
        // Reasoning tokens are part of the output: they add nothing more.
        let mut u = tokens(10_000, None, 500);
        u.reasoning_tokens = Some(400);
        assert_eq!(chat.cost(&u), Micros(33_000));
        // Exact in nano-dollars before one rounding: 1 cached token at
        // 300 nano-USD per 1K and 1 uncached at 3,000 make 3.3 nano-USD.
        assert_eq!(chat.cost(&tokens(1_000, Some(999), 0)), Micros(303));
    }

    #[test]
    fn cached_input_without_a_cached_price_costs_the_input_price() {
        let c = chat_priced(priced(None));
        let chat = c.get("openai-chat").unwrap();
        assert_eq!(chat.cost(&tokens(10_000, Some(8_000), 500)), Micros(33_000));
        assert!(matches!(
            chat.spec.pricing,
            Pricing::PerKiloTokens {
                cached_input_nanos: None,
                ..
            }
        ));
    }

    #[test]
    fn a_cached_price_above_the_input_price_and_cached_counts_above_the_input_are_clamped() {
        let c = chat_priced(priced(Some("0.005")));
        let chat = c.get("openai-chat").unwrap();
        // Cached input never costs more than input.
        assert_eq!(chat.cost(&tokens(10_000, Some(8_000), 500)), Micros(33_000));
        let c = chat_priced(priced(Some("0.0003")));
        let chat = c.get("openai-chat").unwrap();
        // More cached tokens than input tokens: all of the input is cached.
        assert_eq!(chat.cost(&tokens(10_000, Some(12_000), 0)), Micros(3_000));
        // A negative count is none.
        assert_eq!(chat.cost(&tokens(10_000, Some(-5), 0)), Micros(30_000));
    }

    #[test]
    fn the_reservation_prices_all_input_in_full() {
        let full = chat_priced(priced(None));
        let cheap = chat_priced(priced(Some("0.0003")));
        let input = json!({"messages": [], "max_tokens": 1000});
        assert_eq!(
            cheap.get("openai-chat").unwrap().estimate(&input, 300),
            full.get("openai-chat").unwrap().estimate(&input, 300)
        );
    }

    #[test]
    fn default_apis_price_cached_input_and_overrides_replace_it() {
        // gpt-4o-mini: $0.15 input, $0.075 cached input per 1M tokens.
        let c = chat_priced(ApiOverride::default());
        let chat = c.get("openai-chat").unwrap();
        assert_eq!(
            chat.cost(&tokens(1_000_000, Some(1_000_000), 0)),
            Micros(75_000)
        );
        assert_eq!(chat.cost(&tokens(1_000_000, None, 0)), Micros(150_000));
        // New token prices without a cached one: cached input at the new
        // input price (the default's cached price went with its input price).
        let c = chat_priced(priced(None));
        let chat = c.get("openai-chat").unwrap();
        assert_eq!(chat.cost(&tokens(1_000, Some(1_000), 0)), Micros(3_000));
        // A cached price alone keeps the API's input and output prices.
        let c = chat_priced(ApiOverride {
            cached_input_price_per_1k_tokens_usd: Some(usd("0.00001")),
            ..ApiOverride::default()
        });
        let chat = c.get("openai-chat").unwrap();
        assert_eq!(
            chat.spec.pricing,
            Pricing::PerKiloTokens {
                input_nanos: 150_000,
                output_nanos: 600_000,
                cached_input_nanos: Some(10_000),
            }
        );
    }

    #[test]
    fn a_cached_price_on_an_api_priced_per_call_refuses_to_start() {
        let mut config = Config::default();
        config.catalog.apis.insert(
            "sentiment".to_owned(),
            ApiOverride {
                cached_input_price_per_1k_tokens_usd: Some(usd("0.0001")),
                ..ApiOverride::default()
            },
        );
        let e = Catalog::from_config(&config, &env(&[])).err().unwrap();
        assert!(
            e.contains("catalog.apis.sentiment: cached_input_price_per_1k_tokens_usd"),
            "{e}"
        );
        assert!(e.contains("priced per call"), "{e}");
    }
}
