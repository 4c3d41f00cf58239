//! The command line of api-v1.md §8.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde_json::Value;
use taskgate_core::duration::parse_duration_ms;
use taskgate_core::{KeyType, UserStatus};
use taskgate_server::Config;
use taskgate_server::service::accounts::FirstStart;

use crate::audit;
use crate::operator as admin;
use crate::operator as users;

#[derive(Parser)]
#[command(
    name = "taskgate",
    version,
    about = "One REST interface to many AI services"
)]
pub struct Cli {
    /// Configuration file (default: ./taskgate.toml if it exists).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Print JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the service.
    Serve {
        /// The email of the admin user the first start creates (when the
        /// store has no user yet); default admin@taskgate.local.
        #[arg(long, env = "TASKGATE_ADMIN_EMAIL", value_name = "EMAIL")]
        admin_email: Option<String>,
    },
    /// Bring the store's schema up to date.
    Migrate,
    /// Manage accounts.
    #[command(subcommand)]
    Accounts(AccountsCommand),
    /// Manage API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Manage dashboard users.
    #[command(subcommand)]
    Users(UsersCommand),
    /// Read and verify the audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
}

#[derive(Subcommand)]
enum AuditCommand {
    /// List events, newest first (with --json: one JSON array).
    List {
        /// Only this account's events.
        #[arg(long)]
        account: Option<String>,
        /// Only this action (key.created, user.signed_in, …).
        #[arg(long)]
        action: Option<String>,
        /// Only events since this time: RFC 3339, or a duration back from
        /// now (24h, 7d).
        #[arg(long)]
        since: Option<String>,
        /// At most this many events.
        #[arg(long, default_value_t = 100)]
        limit: i64,
    },
    /// Check the chain of hashes from the retention checkpoint on: exit 0
    /// when it is whole, 1 naming the first event that does not match.
    Verify,
}

#[derive(Subcommand)]
enum UsersCommand {
    /// Create a user; without --password-stdin a password is generated and printed once.
    Create {
        #[arg(long)]
        account: String,
        #[arg(long)]
        email: String,
        /// owner, member or admin.
        #[arg(long)]
        role: String,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// List users, of one account or of all.
    List {
        #[arg(long)]
        account: Option<String>,
    },
    /// Stop a user from signing in; their sessions end at once.
    Disable {
        /// The user's id or email.
        user: String,
    },
    /// Let a disabled user sign in again.
    Enable {
        /// The user's id or email.
        user: String,
    },
    /// Set a new password (generated and printed once without --password-stdin);
    /// the user's sessions end.
    ResetPassword {
        /// The user's id or email.
        user: String,
        #[arg(long)]
        password_stdin: bool,
    },
}

/// The first line of standard input, without its line ending.
fn password_from_stdin() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("cannot read the password from standard input")?;
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

#[derive(Subcommand)]
enum AccountsCommand {
    /// Create an account.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "free")]
        plan: String,
        /// Monthly spend limit in USD, e.g. 25 or 0.50.
        #[arg(long)]
        monthly_spend_limit: Option<String>,
    },
    /// Change an account's plan, status, monthly spend limit or the ceiling on it.
    Update {
        id: String,
        #[arg(long)]
        plan: Option<String>,
        /// active or suspended.
        #[arg(long)]
        status: Option<String>,
        /// USD, or `none` to remove the limit.
        #[arg(long)]
        monthly_spend_limit: Option<String>,
        /// The operator's ceiling (USD, or `none`): the account's owners may
        /// set their monthly spend limit at most this high and cannot remove
        /// it; the lower of the two holds.
        #[arg(long)]
        max_monthly_spend_limit: Option<String>,
    },
    /// List accounts.
    List,
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create a key; its secret is printed this once.
    Create(CreateKey),
    /// List an account's keys.
    List {
        #[arg(long)]
        account: String,
    },
    /// Revoke a key at once.
    Revoke { key_id: String },
    /// Replace a key: a new key now, the old one expires after the grace period.
    Roll {
        key_id: String,
        /// How long the old key keeps working, e.g. 0, 1h, 7d.
        #[arg(long, default_value = "24h")]
        grace: String,
    },
}

#[derive(Args)]
struct CreateKey {
    #[arg(long)]
    account: String,
    /// live, test or restricted.
    #[arg(long = "type")]
    key_type: String,
    #[arg(long)]
    name: String,
    /// Restricted keys: comma-separated scopes (apis:read, tasks:read, tasks:write, webhooks:read, webhooks:write).
    #[arg(long, value_delimiter = ',')]
    scopes: Option<Vec<String>>,
    /// Restricted keys: the only API slugs the key may call.
    #[arg(long, value_delimiter = ',')]
    apis: Option<Vec<String>>,
    /// Expire after this long, e.g. 90d.
    #[arg(long)]
    expires_in: Option<String>,
}

/// Defaults, then the TOML file, then `TASKGATE_*` (nested with `__`).
pub fn load_config(path: Option<&PathBuf>) -> anyhow::Result<Config> {
    let mut figment = Figment::from(Serialized::defaults(Config::default()));
    match path {
        Some(p) => {
            if !p.exists() {
                bail!("config file {} does not exist", p.display());
            }
            figment = figment.merge(Toml::file_exact(p));
        }
        None => figment = figment.merge(Toml::file("taskgate.toml")),
    }
    let mut config: Config = figment
        .merge(
            Env::prefixed("TASKGATE_")
                // Other tools' TASKGATE_* variables (the tests' ones, say) are not ours.
                .filter(|k| {
                    let top = k
                        .as_str()
                        .split("__")
                        .next()
                        .unwrap_or_default()
                        .to_lowercase();
                    Config::KEYS.contains(&top.as_str())
                })
                .split("__")
                .map(|k| k.as_str().to_lowercase().into()),
        )
        .extract()
        .context("invalid configuration")?;
    // The standard OpenTelemetry variables, over the file's `[telemetry]`.
    config
        .telemetry
        .apply_otel_env(|name| std::env::var(name).ok())
        .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
    config.validate().map_err(anyhow::Error::msg)?;
    Ok(config)
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = load_config(cli.config.as_ref())?;
    let json = cli.json;
    match cli.command {
        Command::Serve { admin_email } => serve(config, admin_email).await,
        Command::Migrate => {
            let store = taskgate_server::open_store(&config).await?;
            print(
                json,
                &serde_json::json!({ "migrated": true, "backend": store.backend() }),
                "The store's schema is up to date.",
            );
            Ok(())
        }
        Command::Accounts(cmd) => {
            let store = taskgate_server::open_store(&config).await?;
            let out = match cmd {
                AccountsCommand::Create {
                    name,
                    plan,
                    monthly_spend_limit,
                } => {
                    admin::create_account(
                        &*store,
                        &config,
                        &name,
                        &plan,
                        monthly_spend_limit.as_deref(),
                    )
                    .await?
                }
                AccountsCommand::Update {
                    id,
                    plan,
                    status,
                    monthly_spend_limit,
                    max_monthly_spend_limit,
                } => {
                    let changes = admin::AccountChanges {
                        plan: plan.as_deref(),
                        status: status.as_deref(),
                        monthly_spend_limit_usd: monthly_spend_limit.as_deref(),
                        max_monthly_spend_limit_usd: max_monthly_spend_limit.as_deref(),
                    };
                    admin::update_account(&*store, &config, &id, changes).await?
                }
                AccountsCommand::List => admin::list_accounts(&*store).await?,
            };
            print_value(json, &out);
            Ok(())
        }
        Command::Keys(cmd) => {
            let store = taskgate_server::open_store(&config).await?;
            let out = match cmd {
                KeysCommand::Create(k) => {
                    let key_type: KeyType = k.key_type.parse().map_err(anyhow::Error::msg)?;
                    let expires_in_ms = k
                        .expires_in
                        .as_deref()
                        .map(parse_duration_ms)
                        .transpose()
                        .map_err(anyhow::Error::msg)?;
                    admin::create_key(
                        &*store,
                        admin::NewKeyFlags {
                            account_id: &k.account,
                            key_type,
                            name: &k.name,
                            scopes: k.scopes,
                            apis: k.apis,
                            expires_in_ms,
                        },
                    )
                    .await?
                }
                KeysCommand::List { account } => admin::list_keys(&*store, &account).await?,
                KeysCommand::Revoke { key_id } => admin::revoke_key(&*store, &key_id).await?,
                KeysCommand::Roll { key_id, grace } => {
                    let grace_ms = parse_duration_ms(&grace).map_err(anyhow::Error::msg)?;
                    admin::roll_key(&*store, &key_id, grace_ms).await?
                }
            };
            print_value(json, &out);
            Ok(())
        }
        Command::Users(cmd) => {
            let store = taskgate_server::open_store(&config).await?;
            let out = match cmd {
                UsersCommand::Create {
                    account,
                    email,
                    role,
                    password_stdin,
                } => {
                    let password = password_stdin.then(password_from_stdin).transpose()?;
                    users::create_user(&*store, &account, &email, &role, password).await?
                }
                UsersCommand::List { account } => {
                    users::list_users(&*store, account.as_deref()).await?
                }
                UsersCommand::Disable { user } => {
                    users::set_status(&*store, &user, UserStatus::Disabled).await?
                }
                UsersCommand::Enable { user } => {
                    users::set_status(&*store, &user, UserStatus::Active).await?
                }
                UsersCommand::ResetPassword {
                    user,
                    password_stdin,
                } => {
                    let password = password_stdin.then(password_from_stdin).transpose()?;
                    users::reset_password(&*store, &user, password).await?
                }
            };
            print_value(json, &out);
            Ok(())
        }
        Command::Audit(cmd) => {
            let store = taskgate_server::open_store(&config).await?;
            match cmd {
                AuditCommand::List {
                    account,
                    action,
                    since,
                    limit,
                } => {
                    let flags = audit::ListFlags {
                        account: account.as_deref(),
                        action: action.as_deref(),
                        since: since.as_deref(),
                        limit,
                    };
                    let events = audit::list(&*store, flags).await?;
                    if json {
                        println!("{}", serde_json::to_string(&events)?);
                    } else {
                        for e in &events {
                            println!("{}", audit::line(e));
                        }
                    }
                    Ok(())
                }
                AuditCommand::Verify => {
                    let (out, whole) = audit::verify(&*store).await?;
                    let text = if whole {
                        format!("The audit log is whole: {} events checked.", out["checked"])
                    } else {
                        format!(
                            "The audit log does not verify: first bad event {}: {}",
                            out["first_bad_event"]
                                .as_str()
                                .unwrap_or("(after the last)"),
                            out["reason"].as_str().unwrap_or_default()
                        )
                    };
                    print(json, &out, &text);
                    if whole {
                        Ok(())
                    } else {
                        bail!("the audit log does not verify")
                    }
                }
            }
        }
    }
}

fn print(json: bool, value: &Value, text: &str) {
    if json {
        println!("{value}");
    } else {
        println!("{text}");
    }
}

/// JSON for scripts; pretty JSON for people (the objects are the interface).
fn print_value(json: bool, value: &Value) {
    if json {
        println!("{value}");
    } else {
        println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        );
    }
}

async fn serve(config: Config, admin_email: Option<String>) -> anyhow::Result<()> {
    taskgate_server::telemetry::logs::init(config.log_format, &config.log_level);
    let admin_email = admin_email
        .as_deref()
        .map(taskgate_core::Email::normalize)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--admin-email: {e}"))?;
    let store = taskgate_server::open_store(&config).await?;
    if let Some(first) = admin::bootstrap(&*store, &config).await? {
        first_start_banner(&config, &first);
    }
    if let Some(admin) = users::bootstrap_admin(&*store, admin_email.as_ref()).await? {
        println!(
            "Dashboard: http://{}/dashboard\n\
             An admin user was created; the password is shown this once.\n\n  \
             email: {}\n  password: {}\n",
            config.listen,
            admin.user.email.as_str(),
            admin.generated_password.as_deref().unwrap_or_default(),
        );
    }
    let server = taskgate_server::start(config, store, None).await?;
    tracing::info!(addr = %server.addr, "taskgate is listening");
    let token = server.shutdown_token();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        token.cancel();
    });
    server.wait().await
}

fn first_start_banner(config: &Config, first: &FirstStart) {
    let base = format!("http://{}", config.listen);
    println!(
        "\nFirst start: created the account `default` ({}) and two API keys.\n\
         They are shown this once; keep them somewhere safe.\n\n  \
         live key: {}\n  test key: {}\n\n\
         Try it:\n\n  curl -s {base}/api/v1/call \\\n    -H 'Authorization: Bearer {}' \\\n    \
         -H 'Content-Type: application/json' \\\n    \
         -d '{{\"api\": \"sentiment\", \"input\": {{\"text\": \"I love this\"}}}}'\n",
        first.account.id,
        first.live.secret.expose(),
        first.test.secret.expose(),
        first.test.secret.expose(),
    );
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use taskgate_server::catalog::Catalog;

    use super::*;

    /// Every TOML example of the README loads, and its catalog builds (with
    /// every credential variable set), so the documentation cannot rot.
    #[test]
    fn the_readmes_configuration_examples_are_valid() {
        let readme = include_str!("../../../README.md");
        let blocks: Vec<&str> = readme
            .split("```toml\n")
            .skip(1)
            .map(|b| b.split("```").next().unwrap_or_default())
            .collect();
        assert!(blocks.len() >= 2, "the README has its examples");
        let dir = std::env::temp_dir().join(format!("taskgate-readme-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (i, block) in blocks.iter().enumerate() {
            let path = dir.join(format!("example{i}.toml"));
            std::fs::write(&path, block).unwrap();
            let config = load_config(Some(&path))
                .unwrap_or_else(|e| panic!("README example {i}: {e:#}\n{block}"));
            let env: taskgate_server::catalog::EnvLookup = Arc::new(|k: &str| {
                (k.ends_with("_KEY") || k.ends_with("_TOKEN")).then(|| "k".to_owned())
            });
            let catalog = Catalog::from_config(&config, &env)
                .unwrap_or_else(|e| panic!("README example {i}: {e}\n{block}"));
            for slug in config.catalog.apis.keys() {
                assert!(catalog.get(slug).is_some(), "README example {i}: {slug}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
