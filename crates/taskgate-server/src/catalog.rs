//! The catalog: every API a client may call, from the providers and the
//! configuration, with its schemas compiled once.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use taskgate_core::money::{Micros, format_decimal, nanos_to_micros, parse_decimal};
use taskgate_providers::schema::CompiledSchema;
use taskgate_providers::{ApiSpec, Pricing, Provider, Usage};

use crate::config::CatalogConfig;

pub struct ApiEntry {
    pub spec: ApiSpec,
    pub provider: Arc<dyn Provider>,
    pub input_schema: CompiledSchema,
    pub output_schema: CompiledSchema,
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

    /// `{slug, object, name, description, kind, provider, status, modes, pricing}`
    pub fn summary(&self) -> Value {
        json!({
            "slug": self.spec.slug,
            "object": "api",
            "name": self.spec.name,
            "description": self.spec.description,
            "kind": self.spec.kind,
            "provider": self.spec.provider,
            "status": "available",
            "modes": ["sync", "async"],
            "pricing": pricing_json(self.spec.pricing),
        })
    }

    /// The summary plus schemas, examples and limits.
    pub fn details(&self) -> Value {
        let mut v = self.summary();
        if let Value::Object(m) = &mut v {
            m.insert("input_schema".into(), self.spec.input_schema.clone());
            m.insert("output_schema".into(), self.spec.output_schema.clone());
            m.insert(
                "examples".into(),
                serde_json::to_value(&self.spec.examples).unwrap_or_else(|_| json!([])),
            );
            m.insert(
                "limits".into(),
                json!({
                    "timeout_ms": self.spec.timeout_ms,
                    "max_input_bytes": self.spec.max_input_bytes,
                }),
            );
        }
        v
    }
}

/// Prices show at least four decimals and as many more as they need.
fn price_string(nanos: i64) -> String {
    let mut s = format_decimal(nanos, 9);
    while s.len() > s.find('.').unwrap_or(0) + 5 && s.ends_with('0') {
        s.pop();
    }
    s
}

fn pricing_json(p: Pricing) -> Value {
    match p {
        Pricing::PerCall { price_nanos } => json!({
            "unit": "call",
            "price_usd": price_string(price_nanos),
        }),
        Pricing::PerKiloTokens {
            input_nanos,
            output_nanos,
        } => json!({
            "unit": "1k_tokens",
            "input_price_usd": price_string(input_nanos),
            "output_price_usd": price_string(output_nanos),
        }),
    }
}

pub struct Catalog {
    /// Sorted by slug.
    entries: Vec<Arc<ApiEntry>>,
    by_slug: HashMap<String, Arc<ApiEntry>>,
}

impl Catalog {
    pub fn build(
        config: &CatalogConfig,
        providers: Vec<Arc<dyn Provider>>,
    ) -> Result<Self, String> {
        let mut entries: Vec<Arc<ApiEntry>> = Vec::new();
        let mut by_slug = HashMap::new();
        for provider in providers {
            for mut spec in provider.apis() {
                if config.disabled.contains(&spec.slug) {
                    continue;
                }
                if let Some(o) = config.apis.get(&spec.slug) {
                    if let Some(name) = &o.name {
                        spec.name = name.clone();
                    }
                    if let Some(d) = &o.description {
                        spec.description = d.clone();
                    }
                    if let Some(p) = &o.price_per_call_usd {
                        spec.pricing = Pricing::PerCall {
                            price_nanos: parse_decimal(p, 9)?,
                        };
                    }
                    if let Some(t) = o.timeout_ms {
                        spec.timeout_ms = t;
                    }
                }
                let input_schema = CompiledSchema::compile(&spec.input_schema)
                    .map_err(|e| format!("API {}: input schema: {e}", spec.slug))?;
                let output_schema = CompiledSchema::compile(&spec.output_schema)
                    .map_err(|e| format!("API {}: output schema: {e}", spec.slug))?;
                let entry = Arc::new(ApiEntry {
                    spec,
                    provider: provider.clone(),
                    input_schema,
                    output_schema,
                });
                if by_slug
                    .insert(entry.spec.slug.clone(), entry.clone())
                    .is_some()
                {
                    return Err(format!("two APIs have the slug {}", entry.spec.slug));
                }
                entries.push(entry);
            }
        }
        for slug in config.apis.keys().chain(config.disabled.iter()) {
            if !by_slug.contains_key(slug) && !config.disabled.contains(slug) {
                return Err(format!("config: catalog names an unknown API {slug:?}"));
            }
        }
        entries.sort_by(|a, b| a.spec.slug.cmp(&b.spec.slug));
        Ok(Self { entries, by_slug })
    }

    pub fn get(&self, slug: &str) -> Option<&Arc<ApiEntry>> {
        self.by_slug.get(slug)
    }

    pub fn all(&self) -> &[Arc<ApiEntry>] {
        &self.entries
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
