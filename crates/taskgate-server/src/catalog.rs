//! The catalog: every API a client may call, from the providers and the
//! configuration, with its schemas compiled once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use taskgate_core::ApiSlug;
use taskgate_core::money::{Micros, Nanos, format_decimal, nanos_to_micros};
use taskgate_providers::builtin::Builtin;
use taskgate_providers::kinds::Kind;
use taskgate_providers::schema::CompiledSchema;
use taskgate_providers::upstream::{
    FetchPolicy, Protocol, ProviderConfig, Route, Target, TargetConfig, Upstream, defaults,
};
use taskgate_providers::{ApiSpec, Pricing, Provider, Usage};

use crate::config::{ApiOverride, CatalogConfig, Config};

/// Reads an environment variable (the process's, or a test's own map).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The process environment.
pub fn process_env() -> EnvLookup {
    Arc::new(|k| std::env::var(k).ok())
}

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
    fn of(o: Option<&ApiOverride>, kind: &str) -> Self {
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
            } => PricingView::PerKiloTokens {
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
        let (upstream, not_offered) = build_upstream(config, env)?;
        let providers: Vec<Arc<dyn Provider>> = vec![Arc::new(Builtin::new()), Arc::new(upstream)];
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
                    apply_override(&mut spec, o);
                }
                let allowed_options = AllowedOptions::of(o, &spec.kind);
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
fn apply_override(spec: &mut ApiSpec, o: &ApiOverride) {
    if let Some(name) = &o.name {
        spec.name = name.clone();
    }
    if let Some(d) = &o.description {
        spec.description = d.clone();
    }
    if let Some(Nanos(price_nanos)) = o.price_per_call_usd {
        spec.pricing = Pricing::PerCall { price_nanos };
    }
    if o.input_price_per_1k_tokens_usd.is_some() || o.output_price_per_1k_tokens_usd.is_some() {
        let price = |p: Option<Nanos>| p.unwrap_or_default().0;
        spec.pricing = Pricing::PerKiloTokens {
            input_nanos: price(o.input_price_per_1k_tokens_usd),
            output_nanos: price(o.output_price_per_1k_tokens_usd),
        };
    }
    if let Some(t) = o.timeout_ms {
        spec.timeout_ms = t.max(1);
    }
}

/// Default deadline of an upstream API of `kind`.
fn default_timeout_ms(kind: Kind) -> u64 {
    match kind {
        Kind::Chat => 120_000,
        Kind::ImageGeneration => 180_000,
        Kind::Transcription => 300_000,
        Kind::Embedding | Kind::Classification => 60_000,
    }
}

fn upstream_spec(slug: &str, kind: Kind, provider: &str, model: &str) -> ApiSpec {
    ApiSpec {
        slug: slug.to_owned(),
        name: slug.to_owned(),
        description: format!("{} with {model} at {provider}.", kind_phrase(kind)),
        kind: kind.as_str().to_owned(),
        provider: provider.to_owned(),
        pricing: Pricing::PerCall { price_nanos: 0 },
        input_schema: kind.input_schema(),
        output_schema: kind.output_schema(),
        examples: kind.examples(model),
        timeout_ms: default_timeout_ms(kind),
        max_input_bytes: kind.max_input_bytes(),
    }
}

fn kind_phrase(kind: Kind) -> &'static str {
    match kind {
        Kind::Chat => "Chat completion",
        Kind::Embedding => "Text embeddings",
        Kind::ImageGeneration => "Image generation",
        Kind::Transcription => "Speech to text",
        Kind::Classification => "Content moderation",
    }
}

/// A name usable as a slug or provider name: 1–64 of `a-z 0-9 - _`.
fn valid_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// The upstream provider of the configuration, and the declared APIs left
/// out because their provider has no credentials.
fn build_upstream(config: &Config, env: &EnvLookup) -> Result<(Upstream, HashSet<String>), String> {
    let mut upstream = Upstream::new(FetchPolicy {
        allow: config.outbound.allow_networks.clone(),
        max_bytes: config.outbound.max_fetch_bytes,
        timeout: Duration::from_millis(config.outbound.fetch_timeout_ms.max(1)),
    })?;

    // The file's providers, then those of the environment it does not name.
    let mut providers: BTreeMap<String, ProviderConfig> = config.providers.clone();
    let mut from_env = Vec::new();
    for (name, cfg) in defaults::env_providers(|k| env(k)) {
        if let std::collections::btree_map::Entry::Vacant(slot) = providers.entry(name.clone()) {
            from_env.push((name, cfg.protocol));
            slot.insert(cfg);
        }
    }
    for (name, cfg) in &providers {
        if !valid_name(name) {
            return Err(format!(
                "config: provider name {name:?} must be 1-64 of a-z, 0-9, - and _"
            ));
        }
        let key = match (&cfg.api_key, &cfg.api_key_env) {
            (Some(k), _) => Some(k.expose().to_owned()),
            (None, Some(var)) => env(var).filter(|v| !v.trim().is_empty()),
            (None, None) => None,
        };
        // A provider without a credential is offered only when it asks for
        // none: an explicit address and no key setting (a local server).
        let keyless = cfg.api_key.is_none() && cfg.api_key_env.is_none() && cfg.base_url.is_some();
        if key.is_none() && !keyless {
            tracing::warn!(
                provider = %name,
                "provider has no credentials (set api_key_env's variable); its APIs are not offered"
            );
            continue;
        }
        upstream.add_provider(name, cfg, key)?;
    }

    let mut not_offered = HashSet::new();
    for (slug, o) in &config.catalog.apis {
        let Some(provider) = &o.provider else {
            continue;
        };
        if config.catalog.disabled.contains(slug) {
            continue;
        }
        if !valid_name(slug) {
            return Err(format!(
                "config: API slug {slug:?} must be 1-64 of a-z, 0-9, - and _"
            ));
        }
        let kind = o
            .kind
            .ok_or_else(|| format!("config: catalog.apis.{slug}: kind is required"))?;
        let model = match (&o.model, o.http.is_some()) {
            (Some(m), _) => m.clone(),
            (None, true) => slug.clone(),
            (None, false) => return Err(format!("config: catalog.apis.{slug}: model is required")),
        };
        let known = |t: &str| -> Result<bool, String> {
            if !providers.contains_key(t) {
                return Err(format!(
                    "config: catalog.apis.{slug}: unknown provider {t:?}"
                ));
            }
            Ok(upstream.has_provider(t))
        };
        if !known(provider)? {
            not_offered.insert(slug.clone());
            continue;
        }
        let target = |t: &TargetConfig| Target {
            provider: t.provider.clone(),
            model: t.model.clone().unwrap_or_else(|| model.clone()),
            weight: t.weight.unwrap_or(1),
        };
        let mut primary = vec![Target {
            provider: provider.clone(),
            model: model.clone(),
            weight: o.weight.unwrap_or(1),
        }];
        for d in &o.deployments {
            if known(&d.provider)? {
                primary.push(target(d));
            }
        }
        let mut groups = vec![primary];
        for f in &o.fallbacks {
            if known(&f.provider)? {
                groups.push(vec![target(f)]);
            }
        }
        upstream.add_route(Route {
            spec: upstream_spec(slug, kind, provider, &model),
            kind,
            groups,
            http: o.http.clone(),
        })?;
    }

    // Overrides of default APIs whose provider key is not set are not typos:
    // they wait for the key.
    for protocol in [Protocol::Openai, Protocol::Anthropic, Protocol::Gemini] {
        for d in defaults::default_apis(protocol) {
            not_offered.insert(d.slug.to_owned());
        }
    }
    for (name, protocol) in from_env {
        if !upstream.has_provider(&name) {
            continue;
        }
        for d in defaults::default_apis(protocol) {
            let declared = config
                .catalog
                .apis
                .get(d.slug)
                .is_some_and(|o| o.provider.is_some());
            if declared || config.catalog.disabled.iter().any(|s| s == d.slug) {
                continue;
            }
            not_offered.remove(d.slug);
            let mut spec = upstream_spec(d.slug, d.kind, &name, d.model);
            spec.name = d.name.to_owned();
            spec.pricing = d.pricing;
            upstream.add_route(Route {
                spec,
                kind: d.kind,
                groups: vec![vec![Target {
                    provider: name.clone(),
                    model: d.model.to_owned(),
                    weight: 1,
                }]],
                http: None,
            })?;
        }
    }
    Ok((upstream, not_offered))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> EnvLookup {
        Arc::new(move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    fn usd(s: &str) -> Nanos {
        Nanos::parse_usd(s).unwrap()
    }

    fn slugs(c: &Catalog) -> Vec<&str> {
        c.all().iter().map(|e| e.spec.slug.as_str()).collect()
    }

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

    #[test]
    fn default_apis_follow_the_environment_and_overrides_wait_for_keys() {
        let mut config = Config::default();
        config.catalog.apis.insert(
            "openai-chat".to_owned(),
            ApiOverride {
                input_price_per_1k_tokens_usd: Some(usd("0.001")),
                ..ApiOverride::default()
            },
        );
        // No key: the override of a default API is not an error.
        let c = Catalog::from_config(&config, &env(&[])).unwrap();
        assert_eq!(slugs(&c), ["language-detect", "sentiment", "token-count"]);
        let c = Catalog::from_config(
            &config,
            &env(&[("OPENAI_API_KEY", "sk-x"), ("GEMINI_API_KEY", "g")]),
        )
        .unwrap();
        let s = slugs(&c);
        for slug in [
            "openai-chat",
            "openai-embedding",
            "gemini-chat",
            "gemini-embedding",
        ] {
            assert!(s.contains(&slug), "{slug}");
        }
        assert!(!s.iter().any(|s| s.starts_with("anthropic")));
        let chat = c.get("openai-chat").unwrap();
        assert_eq!(
            chat.spec.pricing,
            Pricing::PerKiloTokens {
                input_nanos: 1_000_000,
                output_nanos: 0
            },
            "the override applies; a price left out is zero"
        );
        // A typo is still an error.
        config
            .catalog
            .apis
            .insert("sentimnet".to_owned(), ApiOverride::default());
        assert!(Catalog::from_config(&config, &env(&[])).is_err());
    }

    #[test]
    fn declared_apis_check_their_providers_and_kinds() {
        let mut config = Config::default();
        let toml_provider: ProviderConfig = serde_json::from_value(json!({
            "type": "anthropic", "api_key_env": "MY_ANTHROPIC_KEY"
        }))
        .unwrap();
        config.providers.insert("claude".to_owned(), toml_provider);
        let api = |kind: &str, provider: &str| ApiOverride {
            kind: Some(kind.parse().unwrap()),
            provider: Some(provider.to_owned()),
            model: Some("claude-haiku-4-5".to_owned()),
            ..ApiOverride::default()
        };
        config
            .catalog
            .apis
            .insert("talk".to_owned(), api("chat", "claude"));
        // Without the key the API is left out, not an error.
        let c = Catalog::from_config(&config, &env(&[])).unwrap();
        assert!(c.get("talk").is_none());
        let keyed = env(&[("MY_ANTHROPIC_KEY", "k")]);
        let c = Catalog::from_config(&config, &keyed).unwrap();
        assert_eq!(c.get("talk").unwrap().spec.provider, "claude");
        // Anthropic has no embeddings; unknown providers and kinds are errors.
        for (kind, provider, needle) in [
            ("embedding", "claude", "does not serve the kind embedding"),
            ("chat", "nobody", "unknown provider"),
        ] {
            config
                .catalog
                .apis
                .insert("bad".to_owned(), api(kind, provider));
            let e = Catalog::from_config(&config, &keyed).err().unwrap();
            assert!(e.contains(needle), "{e}");
        }
        // An unknown kind is refused as the configuration is read.
        let e = serde_json::from_value::<ApiOverride>(json!({
            "kind": "poetry", "provider": "claude", "model": "claude-haiku-4-5"
        }))
        .unwrap_err();
        assert!(e.to_string().contains("is not one of"), "{e}");
    }

    #[test]
    fn prices_keep_four_decimals_at_least() {
        assert_eq!(price_string(100_000), "0.0001");
        assert_eq!(price_string(0), "0.0000");
        assert_eq!(price_string(150), "0.00000015");
        assert_eq!(price_string(2_000_000_000), "2.0000");
    }
}
