//! How the catalog's APIs are shown: GET /apis's list and one API's details.

use serde::Serialize;
use serde_json::Value;
use taskgate_core::money::format_decimal;
use taskgate_providers::Pricing;

use super::ApiEntry;

/// Prices show at least four decimals and as many more as they need.
pub fn price_string(nanos: i64) -> String {
    let mut s = format_decimal(nanos, 9);
    while s.len() > s.find('.').unwrap_or(0) + 5 && s.ends_with('0') {
        s.pop();
    }
    s
}

/// An API of the catalog as GET /apis lists it. The fields are in
/// alphabetical order, the order JSON objects are written in here (so the
/// catalog reads as it always has).
#[derive(Serialize)]
pub struct ApiView<'a> {
    pub description: &'a str,
    pub kind: &'a str,
    pub modes: [&'static str; 2],
    pub name: &'a str,
    pub object: &'static str,
    pub pricing: PricingView,
    pub provider: &'a str,
    pub slug: &'a str,
    pub status: &'static str,
}

impl<'a> ApiView<'a> {
    pub fn new(e: &'a ApiEntry) -> Self {
        ApiView {
            description: &e.spec.description,
            kind: &e.spec.kind,
            modes: ["sync", "async"],
            name: &e.spec.name,
            object: "api",
            pricing: PricingView::new(e.spec.pricing),
            provider: &e.spec.provider,
            slug: &e.spec.slug,
            status: e.provider.status(&e.spec.slug).as_str(),
        }
    }
}

/// An API's price, as its unit has it.
#[derive(Serialize)]
#[serde(untagged)]
pub enum PricingView {
    PerCall {
        price_usd: String,
        unit: &'static str,
    },
    PerKiloTokens {
        /// The price of input read from the provider's prompt cache, where
        /// the API has one (else cached input costs `input_price_usd`).
        #[serde(skip_serializing_if = "Option::is_none")]
        cached_input_price_usd: Option<String>,
        input_price_usd: String,
        output_price_usd: String,
        unit: &'static str,
    },
}

impl PricingView {
    pub fn new(p: Pricing) -> Self {
        match p {
            Pricing::PerCall { price_nanos } => PricingView::PerCall {
                price_usd: price_string(price_nanos),
                unit: "call",
            },
            Pricing::PerKiloTokens {
                input_nanos,
                output_nanos,
                cached_input_nanos,
            } => PricingView::PerKiloTokens {
                cached_input_price_usd: cached_input_nanos.map(price_string),
                input_price_usd: price_string(input_nanos),
                output_price_usd: price_string(output_nanos),
                unit: "1k_tokens",
            },
        }
    }
}

/// An API as GET /apis/{slug} shows it: what the list shows, with its
/// schemas, examples and limits (fields in alphabetical order, as above).
#[derive(Serialize)]
pub struct ApiDetailsView<'a> {
    pub description: &'a str,
    pub examples: Value,
    pub input_schema: &'a Value,
    pub kind: &'a str,
    pub limits: ApiLimitsView,
    pub modes: [&'static str; 2],
    pub name: &'a str,
    pub object: &'static str,
    pub output_schema: &'a Value,
    pub pricing: PricingView,
    pub provider: &'a str,
    pub slug: &'a str,
    pub status: &'static str,
}

#[derive(Serialize)]
pub struct ApiLimitsView {
    pub max_input_bytes: u64,
    pub timeout_ms: u64,
}

impl<'a> ApiDetailsView<'a> {
    pub fn new(e: &'a ApiEntry) -> Self {
        let s = ApiView::new(e);
        ApiDetailsView {
            description: s.description,
            // As a JSON value: its objects are then written in the same
            // (alphabetical) order as everything else here.
            examples: serde_json::to_value(&e.spec.examples)
                .unwrap_or_else(|_| Value::Array(Vec::new())),
            input_schema: &e.spec.input_schema,
            kind: s.kind,
            limits: ApiLimitsView {
                max_input_bytes: e.spec.max_input_bytes,
                timeout_ms: e.spec.timeout_ms,
            },
            modes: s.modes,
            name: s.name,
            object: s.object,
            output_schema: &e.spec.output_schema,
            pricing: s.pricing,
            provider: s.provider,
            slug: s.slug,
            status: s.status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_keep_four_decimals_at_least() {
        assert_eq!(price_string(100_000), "0.0001");
        assert_eq!(price_string(0), "0.0000");
        assert_eq!(price_string(150), "0.00000015");
        assert_eq!(price_string(2_000_000_000), "2.0000");
    }
}
