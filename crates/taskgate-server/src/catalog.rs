//! The catalog: every API a client may call, from the providers and the
//! configuration, with its schemas compiled once.
//!
//! An API's entry and what it costs are in `entry`, how it is shown in
//! `views`, and the upstream provider a configuration makes in `upstream`.

mod entry;
mod upstream;
mod views;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use taskgate_core::ApiSlug;
use taskgate_core::money::Nanos;
use taskgate_providers::builtin::Builtin;
use taskgate_providers::kinds::Kind;
use taskgate_providers::schema::CompiledSchema;
use taskgate_providers::{ApiSpec, Pricing, Provider};

use crate::config::{ApiOverride, CatalogConfig, Config};
pub use entry::{AllowedOptions, ApiEntry};
use upstream::build_upstream;
pub use views::{ApiDetailsView, ApiLimitsView, ApiView, PricingView, price_string};

/// Reads an environment variable (the process's, or a test's own map).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The process environment.
pub fn process_env() -> EnvLookup {
    Arc::new(|k| std::env::var(k).ok())
}

pub struct Catalog {
    /// Sorted by slug.
    entries: Vec<Arc<ApiEntry>>,
    by_slug: HashMap<String, Arc<ApiEntry>>,
    /// The largest `max_input_bytes` of the entries.
    largest_input: u64,
}

impl Catalog {
    /// The largest input any API of the catalog accepts, in bytes.
    pub fn largest_input_bytes(&self) -> u64 {
        self.largest_input
    }

    /// The whole catalog of a configuration: the built-in APIs, the upstream
    /// APIs it declares, and the default APIs of providers configured by the
    /// environment (`OPENAI_API_KEY`, …). Credentials are read through `env`.
    pub fn from_config(config: &Config, env: &EnvLookup) -> Result<Self, String> {
        Self::from_config_with(config, env, Vec::new())
    }

    /// [`Catalog::from_config`] with the APIs of `more` providers too (a
    /// program embedding the server, the tests' own providers), under the
    /// same configuration: overrides, prices, disabled slugs.
    pub fn from_config_with(
        config: &Config,
        env: &EnvLookup,
        more: Vec<Arc<dyn Provider>>,
    ) -> Result<Self, String> {
        let (upstream, not_offered) = build_upstream(config, env)?;
        let mut providers: Vec<Arc<dyn Provider>> =
            vec![Arc::new(Builtin::new()), Arc::new(upstream)];
        providers.extend(more);
        Self::build(&config.catalog, providers, &not_offered)
    }

    /// The catalog of `providers`' APIs with the configuration's overrides.
    /// `not_offered` are declared APIs left out (no credentials).
    pub fn build(
        config: &CatalogConfig,
        providers: Vec<Arc<dyn Provider>>,
        not_offered: &HashSet<String>,
    ) -> Result<Self, String> {
        let mut entries: Vec<Arc<ApiEntry>> = Vec::new();
        let mut by_slug = HashMap::new();
        for provider in providers {
            for mut spec in provider.apis() {
                if config.disabled.contains(&spec.slug) {
                    continue;
                }
                let o = config.apis.get(&spec.slug);
                if let Some(o) = o {
                    apply_override(&mut spec, o)?;
                }
                let allowed_options = AllowedOptions::of(o, &spec.kind);
                let max_output_tokens = o.and_then(|o| o.max_output_tokens);
                if let Some(n) = max_output_tokens
                    && (n == 0 || spec.kind != Kind::Chat.as_str())
                {
                    return Err(format!(
                        "config: catalog.apis.{}: max_output_tokens is a positive number of \
                         tokens, for chat APIs only",
                        spec.slug
                    ));
                }
                let input_schema = CompiledSchema::compile(&spec.input_schema)
                    .map_err(|e| format!("API {}: input schema: {e}", spec.slug))?;
                let output_schema = CompiledSchema::compile(&spec.output_schema)
                    .map_err(|e| format!("API {}: output schema: {e}", spec.slug))?;
                let slug = ApiSlug::parse(&spec.slug).map_err(|e| format!("API {e}"))?;
                let entry = Arc::new(ApiEntry {
                    slug,
                    spec,
                    provider: provider.clone(),
                    input_schema,
                    output_schema,
                    allowed_options,
                    max_output_tokens,
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
            if !by_slug.contains_key(slug)
                && !config.disabled.contains(slug)
                && !not_offered.contains(slug)
            {
                return Err(format!("config: catalog names an unknown API {slug:?}"));
            }
        }
        entries.sort_by(|a, b| a.spec.slug.cmp(&b.spec.slug));
        let largest_input = entries
            .iter()
            .map(|e| e.spec.max_input_bytes)
            .max()
            .unwrap_or(0);
        Ok(Self {
            entries,
            by_slug,
            largest_input,
        })
    }

    pub fn get(&self, slug: &str) -> Option<&Arc<ApiEntry>> {
        self.by_slug.get(slug)
    }

    pub fn all(&self) -> &[Arc<ApiEntry>] {
        &self.entries
    }
}

/// Applies the configuration's fields for an API to its spec.
///
/// Token prices set in the configuration replace the API's token pricing
/// whole: a default API's cached-input price goes with the input price it
/// was a fraction of, so with new input or output prices cached input costs
/// the configured cached price, or else the full input price. A cached price
/// alone changes only the cached price of an API priced by tokens.
fn apply_override(spec: &mut ApiSpec, o: &ApiOverride) -> Result<(), String> {
    if let Some(name) = &o.name {
        spec.name = name.clone();
    }
    if let Some(d) = &o.description {
        spec.description = d.clone();
    }
    if let Some(Nanos(price_nanos)) = o.price_per_call_usd {
        spec.pricing = Pricing::PerCall { price_nanos };
    }
    let cached = o.cached_input_price_per_1k_tokens_usd.map(|p| p.0);
    if o.input_price_per_1k_tokens_usd.is_some() || o.output_price_per_1k_tokens_usd.is_some() {
        let price = |p: Option<Nanos>| p.unwrap_or_default().0;
        spec.pricing = Pricing::PerKiloTokens {
            input_nanos: price(o.input_price_per_1k_tokens_usd),
            output_nanos: price(o.output_price_per_1k_tokens_usd),
            cached_input_nanos: cached,
        };
    } else if let Some(cached) = cached {
        match &mut spec.pricing {
            Pricing::PerKiloTokens {
                cached_input_nanos, ..
            } => *cached_input_nanos = Some(cached),
            Pricing::PerCall { .. } => {
                return Err(format!(
                    "config: catalog.apis.{}: cached_input_price_per_1k_tokens_usd needs token \
                     pricing, and this API is priced per call (set input_price_per_1k_tokens_usd \
                     and output_price_per_1k_tokens_usd)",
                    spec.slug
                ));
            }
        }
    }
    if let Some(t) = o.timeout_ms {
        spec.timeout_ms = t.max(1);
    }
    Ok(())
}

/// What the tests of the catalog's modules share.
#[cfg(test)]
mod testing {
    use super::*;

    pub(super) fn env(vars: &'static [(&'static str, &'static str)]) -> EnvLookup {
        Arc::new(move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    pub(super) fn usd(s: &str) -> Nanos {
        Nanos::parse_usd(s).unwrap()
    }
}
