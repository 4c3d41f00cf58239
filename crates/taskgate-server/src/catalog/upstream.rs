//! The upstream provider of a configuration: its providers (from the file
//! and the environment), the APIs it declares, and the default APIs of the
//! providers the environment configures.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use taskgate_providers::kinds::Kind;
use taskgate_providers::upstream::{
    FetchPolicy, Protocol, ProviderConfig, Route, Target, TargetConfig, Upstream, defaults,
};
use taskgate_providers::{ApiSpec, Pricing};

use super::EnvLookup;
use crate::config::Config;

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
pub(super) fn build_upstream(
    config: &Config,
    env: &EnvLookup,
) -> Result<(Upstream, HashSet<String>), String> {
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
    use crate::catalog::Catalog;
    use crate::catalog::testing::{env, usd};
    use crate::config::ApiOverride;

    fn slugs(c: &Catalog) -> Vec<&str> {
        c.all().iter().map(|e| e.spec.slug.as_str()).collect()
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
                output_nanos: 0,
                cached_input_nanos: None,
            },
            "the override applies; a price left out is zero, and the default's cached price \
             goes with the input price it was a part of"
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
}
