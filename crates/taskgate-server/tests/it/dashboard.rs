//! The dashboard over HTTP, as a browser uses it (issue 9): sign-in and
//! sessions, CSRF protection, the API Keys area and its effect on the API,
//! tenancy and roles. The browser walk-through itself is `e2e/`.

use std::time::{Duration, Instant};

use crate::ops::users;
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use serde_json::json;

use crate::utils::{Backend, TestApp, TestClient, both};

pub(crate) const PASSWORD: &str = "violet kettle drums at noon";

/// A browser of one person: its cookie, no automatic redirects.
pub(crate) struct Browser {
    http: reqwest::Client,
    base: String,
    pub(crate) origin: String,
    cookie: Option<String>,
}

pub(crate) struct Page {
    pub(crate) status: StatusCode,
    pub(crate) location: Option<String>,
    set_cookie: Option<String>,
    pub(crate) text: String,
}

impl Page {
    /// The CSRF token of the page's forms.
    pub(crate) fn csrf(&self) -> String {
        let at = self
            .text
            .find("name=\"csrf\" value=\"")
            .expect("a form with a CSRF token");
        let rest = &self.text[at + 19..];
        rest[..rest.find('"').unwrap()].to_owned()
    }

    /// The secret key a page shows once.
    pub(crate) fn secret(&self) -> String {
        let at = self
            .text
            .find("id=\"secret\" readonly value=\"")
            .expect("a secret");
        let rest = &self.text[at + 28..];
        rest[..rest.find('"').unwrap()].to_owned()
    }
}

impl Browser {
    fn new(app: &TestApp) -> Self {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: app.base.clone(),
            origin: app.base.clone(),
            cookie: None,
        }
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> Page {
        let req = match &self.cookie {
            Some(c) => req.header(COOKIE, c),
            None => req,
        };
        let r = req.send().await.expect("request sent");
        let status = r.status();
        let header = |name| {
            r.headers()
                .get(name)
                .map(|v: &reqwest::header::HeaderValue| v.to_str().unwrap().to_owned())
        };
        let location = header(LOCATION);
        let set_cookie = header(SET_COOKIE);
        if let Some(c) = &set_cookie {
            let pair = c.split(';').next().unwrap().to_owned();
            self.cookie = (!pair.ends_with('=')).then_some(pair);
        }
        let text = r.text().await.unwrap();
        Page {
            status,
            location,
            set_cookie,
            text,
        }
    }

    pub(crate) async fn get(&mut self, path: &str) -> Page {
        let req = self.http.get(format!("{}{path}", self.base));
        self.send(req).await
    }

    pub(crate) async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let req = self
            .http
            .post(format!("{}{path}", self.base))
            .header(ORIGIN, &self.origin)
            .form(form);
        self.send(req).await
    }

    /// Signs in, as a person would: trying again shortly when the password
    /// pool (one per process, shared with every other test's server) is full.
    async fn sign_in(&mut self, email: &str, password: &str) -> Page {
        self.patiently(
            "/dashboard/sign-in",
            &[("email", email), ("password", password)],
        )
        .await
    }

    /// One sign-in, whatever the answer.
    async fn sign_in_once(&mut self, email: &str, password: &str) -> Page {
        self.post(
            "/dashboard/sign-in",
            &[("email", email), ("password", password)],
        )
        .await
    }

    /// `post`, again after a moment while the answer is "at once" busy (the
    /// password pool was full, which a concurrent test's flood can cause).
    async fn patiently(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        for _ in 0..100 {
            let page = self.post(path, form).await;
            if !(page.status == StatusCode::TOO_MANY_REQUESTS && page.text.contains("at once")) {
                return page;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the password pool stayed full for 5 s");
    }
}

pub(crate) async fn user(app: &TestApp, account: &str, email: &str, role: &str) {
    users::create_user(&*app.store, account, email, role, Some(PASSWORD.to_owned()))
        .await
        .expect("create user");
}

pub(crate) async fn signed_in(app: &TestApp, email: &str) -> Browser {
    let mut b = Browser::new(app);
    let r = b.sign_in(email, PASSWORD).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    b
}

/// Wrong passwords and unknown emails get the same answer; the right one a
/// new session in an HttpOnly, SameSite=Lax cookie; sign-out ends it on the
/// server, so the old cookie no longer works.
async fn sign_in_and_out(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let mut b = Browser::new(&app);

    let r = b.get("/dashboard/keys").await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(
        r.location.as_deref(),
        Some("/dashboard/sign-in?next=/dashboard/keys")
    );
    let form = b.get("/dashboard/sign-in").await;
    assert!(form.text.contains("<label for=\"email\">Email</label>"));
    assert!(
        form.text
            .contains("<label for=\"password\">Password</label>")
    );
    assert!(form.text.contains(">Sign in</button>"));

    for (email, password) in [
        ("ada@example.com", "not the password at all"),
        ("nobody@example.com", PASSWORD),
    ] {
        let r = b.sign_in(email, password).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert!(r.text.contains("Email or password is wrong."));
        assert!(r.set_cookie.is_none());
    }

    let r = b.sign_in("  ADA@example.com ", PASSWORD).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let cookie = r.set_cookie.unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    let first = b.cookie.clone().unwrap();
    let page = b.get("/dashboard/keys").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("ada@example.com"));
    assert!(page.text.contains("aria-label=\"Main\""));
    assert!(page.text.contains(">API keys</a>"));

    // Signing in again makes a new session id.
    b.sign_in("ada@example.com", PASSWORD).await;
    assert_ne!(b.cookie.clone().unwrap(), first);

    let csrf = b.get("/dashboard/keys").await.csrf();
    let kept = b.cookie.clone().unwrap();
    let r = b.post("/dashboard/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert!(r.set_cookie.unwrap().contains("Max-Age=0"));
    // The old cookie, replayed, opens nothing.
    b.cookie = Some(kept);
    let r = b.get("/dashboard/keys").await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    app.stop().await;
}
both!(sign_in_and_out);

/// A state-changing request without the CSRF token, with a wrong one, or
/// from another site is 403 and changes nothing.
async fn csrf_and_origin_are_checked(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let mut b = signed_in(&app, "ada@example.com").await;
    let keys = app
        .store
        .list_keys(app.account_id.parse().unwrap())
        .await
        .unwrap();
    let key = &keys[0];
    let path = format!("/dashboard/keys/{}/revoke", key.id);
    let csrf = b.get(&path).await.csrf();

    let r = b.post(&path, &[]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = b.post(&path, &[("csrf", "0".repeat(64).as_str())]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    b.origin = "https://evil.example".to_owned();
    let r = b.post(&path, &[("csrf", &csrf)]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = b
        .post(
            "/dashboard/keys/new",
            &[("csrf", &csrf), ("name", "x"), ("preset", "full")],
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let after = app.store.list_keys(key.account_id).await.unwrap();
    assert_eq!(after, keys, "nothing changed");

    // From this site with the token, it works.
    b.origin = app.base.clone();
    let r = b.post(&path, &[("csrf", &csrf)]).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    assert!(
        app.store
            .get_key(key.id)
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_some()
    );
    app.stop().await;
}
both!(csrf_and_origin_are_checked);

/// The Read-only preset makes a restricted key with `apis:read`, shown once;
/// it reads the catalog, cannot call; revoked in the dashboard, the API
/// refuses it within the contract's 5 seconds.
async fn a_read_only_key_from_the_dashboard(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let mut b = signed_in(&app, "ada@example.com").await;
    let csrf = b.get("/dashboard/keys/new").await.csrf();
    let r = b
        .post(
            "/dashboard/keys/new",
            &[
                ("csrf", &csrf),
                ("mode", "live"),
                ("name", "reporting"),
                ("preset", "read"),
                ("expires", "30d"),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.text.contains("shown this once"));
    let secret = r.secret();
    assert!(secret.starts_with("tg_restrict_"), "{secret}");

    let list = b.get("/dashboard/keys").await;
    assert!(list.text.contains("reporting"));
    assert!(list.text.contains("apis:read"));
    assert!(
        !list.text.contains(&secret),
        "the secret is shown once only"
    );

    let api = TestClient::new(&app.base, Some(&secret));
    api.get("apis").await.expect(200);
    api.call(json!({"api": "sentiment", "input": {"text": "hi"}}))
        .await
        .expect_error(403, "insufficient_permissions");

    let keys = app
        .store
        .list_keys(app.account_id.parse().unwrap())
        .await
        .unwrap();
    let id = keys.iter().find(|k| k.name == "reporting").unwrap().id;
    let path = format!("/dashboard/keys/{id}/revoke");
    let confirm = b.get(&path).await;
    assert!(confirm.text.contains("Revoke key"));
    let r = b.post(&path, &[("csrf", &confirm.csrf())]).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    // Refused within the contract's 5 s, on the server's clock.
    app.clock.advance(Duration::from_secs(5));
    assert_eq!(api.get("apis").await.status, 401, "still accepted");
    app.stop().await;
}
both!(a_read_only_key_from_the_dashboard);

/// Rolling shows the new secret once; both keys work during the grace period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_a_key_from_the_dashboard() {
    let Some(app) = TestApp::start(Backend::Sqlite).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let mut b = signed_in(&app, "ada@example.com").await;
    let old = app
        .store
        .list_keys(app.account_id.parse().unwrap())
        .await
        .unwrap();
    let live = old.iter().find(|k| k.key_type.as_str() == "live").unwrap();
    let path = format!("/dashboard/keys/{}/roll", live.id);
    let csrf = b.get(&path).await.csrf();
    let r = b.post(&path, &[("csrf", &csrf), ("grace", "1h")]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let secret = r.secret();
    TestClient::new(&app.base, Some(&secret))
        .get("apis")
        .await
        .expect(200);
    app.client(&app.live).get("apis").await.expect(200);
    app.stop().await;
}

/// Members look but change nothing (403); nobody reaches another account's
/// keys by URL (404); a disabled user's session ends.
async fn roles_and_tenancy(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let other = app.create_account("pro").await;
    user(&app, &app.account_id, "member@example.com", "member").await;
    user(&app, &other, "owner@other.example", "owner").await;
    let mut member = signed_in(&app, "member@example.com").await;
    let mut stranger = signed_in(&app, "owner@other.example").await;

    let page = member.get("/dashboard/keys").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.text.contains("Create key"));
    let csrf = page.csrf();
    let r = member.get("/dashboard/keys/new").await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = member
        .post(
            "/dashboard/keys/new",
            &[("csrf", &csrf), ("name", "x"), ("preset", "full")],
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);

    let keys = app
        .store
        .list_keys(app.account_id.parse().unwrap())
        .await
        .unwrap();
    let path = format!("/dashboard/keys/{}/revoke", keys[0].id);
    assert_eq!(stranger.get(&path).await.status, StatusCode::NOT_FOUND);
    let csrf = stranger.get("/dashboard/keys").await.csrf();
    let r = stranger.post(&path, &[("csrf", &csrf)]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(
        app.store
            .get_key(keys[0].id)
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_none()
    );
    let theirs = stranger.get("/dashboard/keys").await;
    assert!(!theirs.text.contains(keys[0].hint.as_str()));

    users::set_status(
        &*app.store,
        "member@example.com",
        taskgate_core::UserStatus::Disabled,
    )
    .await
    .unwrap();
    assert_eq!(
        member.get("/dashboard/keys").await.status,
        StatusCode::SEE_OTHER
    );
    let r = member.sign_in("member@example.com", PASSWORD).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    app.stop().await;
}
both!(roles_and_tenancy);

/// Failed sign-ins are limited per email (and per address): past the limit
/// even the right password waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_failures_are_limited() {
    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| c.dashboard.sign_in_failures_per_minute = 3)
        .start()
        .await
    else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let mut b = Browser::new(&app);
    for _ in 0..3 {
        let r = b.sign_in("ada@example.com", "wrong wrong wrong").await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }
    let r = b.sign_in("ada@example.com", PASSWORD).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(r.text.contains("Too many failed sign-ins"));
    app.stop().await;
}

/// Task history: live by default, test with the toggle, filtered like GET
/// /tasks; a task's page has its input, output, events and attempts; a
/// running test task is cancelled from its page; another account's task is
/// not found.
async fn task_history_and_cancel(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "member").await;
    let other = app.create_account("pro").await;
    user(&app, &other, "owner@other.example", "owner").await;
    let live = app.client(&app.live);
    let done = live
        .call(json!({"api": "sentiment", "input": {"text": "what a lovely day"}}))
        .await
        .expect(200);
    let done_id = done.data()["id"].as_str().unwrap().to_owned();
    let test = app.client(&app.test);
    let slow = test
        .call(
            json!({"api": "sentiment", "input": {"text": "hi"}, "mode": "async",
            "sandbox": {"delay_ms": 60000}}),
        )
        .await
        .expect(202);
    let slow_id = slow.data()["id"].as_str().unwrap().to_owned();

    let mut b = signed_in(&app, "ada@example.com").await;
    let page = b.get("/dashboard/tasks").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains(&done_id));
    assert!(
        !page.text.contains(&slow_id),
        "test tasks only in test mode"
    );
    let page = b.get("/dashboard/tasks?mode=test").await;
    assert!(page.text.contains(&slow_id));
    assert!(!page.text.contains(&done_id));
    let page = b.get("/dashboard/tasks?status=failed").await;
    assert!(!page.text.contains(&done_id));
    let page = b
        .get("/dashboard/tasks?status=succeeded&api=sentiment")
        .await;
    assert!(page.text.contains(&done_id));
    let page = b.get("/dashboard/tasks?from=2000-13-01").await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    assert!(page.text.contains("created_after"), "{}", page.text);

    let details = b.get(&format!("/dashboard/tasks/{done_id}")).await;
    assert_eq!(details.status, StatusCode::OK);
    for part in [
        "what a lovely day",
        "compound",
        "queued",
        "succeeded",
        "builtin",
    ] {
        assert!(details.text.contains(part), "{part}: {}", details.text);
    }
    assert!(!details.text.contains("Cancel task"));

    let running = b.get(&format!("/dashboard/tasks/{slow_id}")).await;
    assert!(running.text.contains("Cancel task"));
    let r = b
        .post(
            &format!("/dashboard/tasks/{slow_id}/cancel"),
            &[("csrf", &running.csrf())],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let after = test.get(&format!("tasks/{slow_id}")).await.expect(200);
    assert_eq!(after.data()["status"], json!("cancelled"));

    let mut stranger = signed_in(&app, "owner@other.example").await;
    let r = stranger.get(&format!("/dashboard/tasks/{done_id}")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let list = stranger.get("/dashboard/tasks").await;
    assert!(!list.text.contains(&done_id));
    app.stop().await;
}
both!(task_history_and_cancel);

/// The catalog with search and filters; an API's page with its schemas and
/// examples; Try it runs a test task (with the account's test key, or one
/// made for it) and shows it; bad JSON or input is explained, not run.
async fn catalog_and_try_it(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "member").await;
    let mut b = signed_in(&app, "ada@example.com").await;
    let all = b.get("/dashboard/apis").await;
    assert_eq!(all.status, StatusCode::OK);
    for slug in ["sentiment", "token-count", "language-detect"] {
        assert!(
            all.text.contains(&format!("/dashboard/apis/{slug}\"")),
            "{slug}"
        );
    }
    let found = b.get("/dashboard/apis?q=tiktoken").await;
    assert!(
        found.text.contains("token-count") && !found.text.contains("/dashboard/apis/sentiment\"")
    );
    let kind = b.get("/dashboard/apis?kind=classification").await;
    assert!(
        kind.text.contains("/dashboard/apis/sentiment\"")
            && !kind.text.contains("/dashboard/apis/token-count\"")
    );

    let page = b.get("/dashboard/apis/sentiment").await;
    assert!(page.text.contains("Input schema") && page.text.contains("Example 1"));
    assert!(
        page.text
            .contains("<label for=\"input\">Input (JSON)</label>")
    );
    let csrf = page.csrf();
    let r = b
        .post(
            "/dashboard/apis/sentiment/try",
            &[("csrf", &csrf), ("input", "{\"text\": \"I love it\"}")],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let task_page = r.location.unwrap();
    let shown = b.get(&task_page).await;
    assert!(
        shown.text.contains("succeeded") && shown.text.contains("positive"),
        "{}",
        shown.text
    );
    let id = task_page.rsplit('/').next().unwrap();
    let api = app
        .client(&app.test)
        .get(&format!("tasks/{id}"))
        .await
        .expect(200);
    assert_eq!(api.data()["mode"], json!("test"));

    for (input, says) in [("{not json", "not JSON"), ("{\"txt\": 1}", "text")] {
        let r = b
            .post(
                "/dashboard/apis/sentiment/try",
                &[("csrf", &csrf), ("input", input)],
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(r.text.contains(says), "{says}: {}", r.text);
    }
    assert_eq!(
        b.get("/dashboard/apis/nope").await.status,
        StatusCode::NOT_FOUND
    );

    // A suspended account's users may look, not run.
    let update = taskgate_store::AccountUpdate {
        status: Some(taskgate_core::AccountStatus::Suspended),
        ..Default::default()
    };
    app.store
        .update_account(
            app.account_id.parse().unwrap(),
            &update,
            &taskgate_core::AuditContext::new(
                taskgate_core::AuditActor::operator("test"),
                None,
                None,
            ),
        )
        .await
        .unwrap();
    let r = b
        .post(
            "/dashboard/apis/sentiment/try",
            &[("csrf", &csrf), ("input", "{\"text\": \"hi\"}")],
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text.contains("suspended"));
    app.stop().await;
}
both!(catalog_and_try_it);

/// Usage shows what the API enforced: the minute's requests against the
/// plan's limit, the accepted requests and the 429s, tasks by API and
/// status, spend this month, and each key's share.
async fn usage_matches_what_the_api_enforced(backend: Backend) {
    let five = taskgate_server::config::PlanLimits {
        per_minute: Some(5),
        per_day: Some(1000),
        max_running_tasks: None,
        max_running_test_tasks: None,
    };
    let Some(app) = TestApp::builder(backend)
        .plan("five")
        .config(|c| {
            c.plans.insert("five".parse().unwrap(), five);
        })
        .start()
        .await
    else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "member").await;
    let live = app.client(&app.live);
    for text in ["good", "bad", "fine"] {
        live.call(json!({"api": "sentiment", "input": {"text": text}}))
            .await
            .expect(200);
    }
    live.get("apis").await.expect(200);
    live.get("tasks").await.expect(200);
    for _ in 0..2 {
        live.get("apis")
            .await
            .expect_error(429, "rate_limit_exceeded");
    }
    // The counts reach the store within a second or two.
    let mut b = signed_in(&app, "ada@example.com").await;
    let started = Instant::now();
    let page = loop {
        let page = b.get("/dashboard/usage?range=hour").await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        if page.text.contains("5 requests</strong>") || started.elapsed() > Duration::from_secs(5) {
            break page;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    for figure in [
        "5 of 5 requests in the last 60 seconds",
        "5 requests</strong>",
        "2 refused (429)</strong>",
        "3 tasks.",
        "3 succeeded",
        "$0.000300 spent in",
        "<td>5</td><td>2</td><td>3</td><td>$0.000300</td>",
        "<svg class=\"chart\"",
        "p50 ",
    ] {
        assert!(page.text.contains(figure), "{figure}: {}", page.text);
    }
    let test = b.get("/dashboard/usage?mode=test").await;
    assert!(test.text.contains("0 requests</strong>"), "{}", test.text);
    app.stop().await;
}
both!(usage_matches_what_the_api_enforced);

/// Settings show the plan and limits; owners set the spend limit (and the
/// API then holds to it); members cannot.
async fn settings_and_the_spend_limit(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "owner@example.com", "owner").await;
    user(&app, &app.account_id, "member@example.com", "member").await;
    let mut owner = signed_in(&app, "owner@example.com").await;
    let page = owner.get("/dashboard/settings").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("Plan: "));
    assert!(
        page.text
            .contains("Monthly spend limit (USD; empty for none)")
    );
    let csrf = page.csrf();
    let r = owner
        .post(
            "/dashboard/settings/spend-limit",
            &[("csrf", &csrf), ("spend_limit", "lots")],
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = owner
        .post(
            "/dashboard/settings/spend-limit",
            &[("csrf", &csrf), ("spend_limit", "0.0001")],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert!(
        owner
            .get("/dashboard/settings")
            .await
            .text
            .contains("$0.000100 per month")
    );
    let live = app.client(&app.live);
    live.call(json!({"api": "sentiment", "input": {"text": "one"}}))
        .await
        .expect(200);
    live.call(json!({"api": "sentiment", "input": {"text": "two"}}))
        .await
        .expect_error(403, "usage_limit_exceeded");

    let mut member = signed_in(&app, "member@example.com").await;
    let page = member.get("/dashboard/settings").await;
    assert!(!page.text.contains("Save spend limit"));
    let r = member
        .post(
            "/dashboard/settings/spend-limit",
            &[("csrf", &page.csrf()), ("spend_limit", "")],
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    app.stop().await;
}
both!(settings_and_the_spend_limit);

/// Admins create accounts and users (the password shown once works),
/// change plans, suspend (the API then answers 403) and reactivate, and
/// disable users; others cannot open the admin pages.
async fn admins_manage_accounts_and_users(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "root@example.com", "admin").await;
    user(&app, &app.account_id, "owner@example.com", "owner").await;
    let mut owner = signed_in(&app, "owner@example.com").await;
    assert_eq!(
        owner.get("/dashboard/admin").await.status,
        StatusCode::FORBIDDEN
    );
    assert!(
        !owner
            .get("/dashboard/keys")
            .await
            .text
            .contains("/dashboard/admin")
    );

    let mut admin = signed_in(&app, "root@example.com").await;
    let page = admin.get("/dashboard/admin").await;
    assert_eq!(page.status, StatusCode::OK);
    let csrf = page.csrf();
    let r = admin
        .post(
            "/dashboard/admin/accounts",
            &[
                ("csrf", &csrf),
                ("name", "Globex"),
                ("plan", "pro"),
                ("spend_limit", ""),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let accounts = app.store.list_accounts().await.unwrap();
    let globex = accounts.iter().find(|a| a.name == "Globex").unwrap();
    let r = admin
        .post(
            "/dashboard/admin/users",
            &[
                ("csrf", &csrf),
                ("email", "hank@globex.example"),
                ("account", &globex.id.to_string()),
                ("role", "owner"),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let password = r.secret();
    let mut hank = Browser::new(&app);
    assert_eq!(
        hank.sign_in("hank@globex.example", &password).await.status,
        StatusCode::SEE_OTHER
    );
    assert!(hank.get("/dashboard/keys").await.text.contains("Globex"));

    let path = format!("/dashboard/admin/accounts/{}", app.account_id);
    let r = admin
        .post(&path, &[("csrf", &csrf), ("plan", "enterprise")])
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let r = admin
        .post(&path, &[("csrf", &csrf), ("status", "suspended")])
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let id = app.account_id.parse().unwrap();
    let a = app.store.get_account(id).await.unwrap().unwrap();
    assert_eq!(
        (a.plan.as_str(), a.status.as_str()),
        ("enterprise", "suspended")
    );
    // Suspended within the contract's 5 s, on the server's clock.
    app.clock.advance(Duration::from_secs(5));
    assert_eq!(app.client(&app.live).get("apis").await.status, 403);
    admin
        .post(&path, &[("csrf", &csrf), ("status", "active")])
        .await;

    let hank_user = app
        .store
        .find_user_by_email(&"hank@globex.example".parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let r = admin
        .post(
            &format!("/dashboard/admin/users/{}", hank_user.id),
            &[("csrf", &csrf), ("action", "disable")],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(
        hank.get("/dashboard/keys").await.status,
        StatusCode::SEE_OTHER
    );
    app.stop().await;
}
both!(admins_manage_accounts_and_users);

/// A session unused past the idle limit, or past its absolute end, is over:
/// the next page asks to sign in, and the session is gone from the store.
async fn sessions_end_when_idle_or_old(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let idle_ms = app.config.dashboard.session_idle_minutes as i64 * 60_000;
    let mut b = signed_in(&app, "ada@example.com").await;
    let token = b
        .cookie
        .clone()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1
        .to_owned();
    let hash = taskgate_server::dashboard::session::token_hash(&token);
    let now = taskgate_core::Timestamp::now();
    app.store
        .touch_session(&hash, now.minus_ms(idle_ms + 1_000))
        .await
        .unwrap();
    assert_eq!(b.get("/dashboard/keys").await.status, StatusCode::SEE_OTHER);
    assert!(app.store.find_session(&hash).await.unwrap().is_none());

    // Past its absolute end, however recently used.
    let mut b = signed_in(&app, "ada@example.com").await;
    let token = b
        .cookie
        .clone()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1
        .to_owned();
    let hash = taskgate_server::dashboard::session::token_hash(&token);
    let (mut session, _) = app.store.find_session(&hash).await.unwrap().unwrap();
    app.store.delete_session(&hash).await.unwrap();
    session.expires_at = now.minus_ms(1);
    app.store.create_session(&session).await.unwrap();
    assert_eq!(b.get("/dashboard/keys").await.status, StatusCode::SEE_OTHER);
    app.stop().await;
}
both!(sessions_end_when_idle_or_old);

/// Thousands of keys come fifty to a page, with a link to the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_paged() {
    let Some(app) = TestApp::start(Backend::Sqlite).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "member").await;
    for _ in 0..60 {
        app.create_key(&app.account_id, taskgate_core::KeyType::Live)
            .await;
    }
    let mut b = signed_in(&app, "ada@example.com").await;
    let first = b.get("/dashboard/keys").await;
    assert!(
        first.text.contains("61 live keys, 61 active."),
        "{}",
        first.text
    );
    assert_eq!(first.text.matches("<th scope=\"row\">").count(), 50);
    let at = first
        .text
        .find("href=\"/dashboard/keys?after=")
        .expect("a next page");
    let href = &first.text[at + 6..];
    let href = &href[..href.find('"').unwrap()];
    let second = b.get(href).await;
    assert_eq!(second.text.matches("<th scope=\"row\">").count(), 11);
    assert!(!second.text.contains("Next page"));
    app.stop().await;
}

/// Failed sign-ins from one address are limited across emails too; cookies
/// are `Secure` when configured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_limits_per_address_and_secure_cookies() {
    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| {
            c.dashboard.sign_in_failures_per_minute = 3;
            c.dashboard.secure_cookies = true;
        })
        .start()
        .await
    else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let mut b = Browser::new(&app);
    let r = b.sign_in("ada@example.com", PASSWORD).await;
    assert!(r.set_cookie.unwrap().contains("; Secure"));
    for i in 0..3 {
        let r = b
            .sign_in(&format!("nobody{i}@example.com"), "wrong wrong wrong")
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }
    let r = b.sign_in("ada@example.com", PASSWORD).await;
    assert_eq!(
        r.status,
        StatusCode::TOO_MANY_REQUESTS,
        "the address is limited"
    );
    app.stop().await;
}

/// Even the framework's refusals are pages under /dashboard, not API JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_pages() {
    let Some(app) = TestApp::start(Backend::Sqlite).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let mut b = signed_in(&app, "ada@example.com").await;
    for (page, status) in [
        (
            b.get("/dashboard/tasks?from=%zz").await,
            StatusCode::BAD_REQUEST,
        ),
        (b.get("/dashboard/nowhere").await, StatusCode::NOT_FOUND),
        (
            {
                let req = b.http.delete(format!("{}/dashboard/keys", b.base));
                b.send(req).await
            },
            StatusCode::METHOD_NOT_ALLOWED,
        ),
    ] {
        assert_eq!(page.status, status, "{}", page.text);
        assert!(page.text.starts_with("<!doctype html>"), "{}", page.text);
    }
    app.stop().await;
}

/// Issue 25: 40 sign-ins at once for one email from one address: at most the
/// limit are checked (401), the rest refused at once (429 with Retry-After),
/// because each attempt takes its slot before the password is checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_sign_ins_gets_at_most_the_limit_checked() {
    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| c.dashboard.sign_in_failures_per_minute = 10)
        .start()
        .await
    else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let attempts: Vec<_> = (0..40)
        .map(|_| {
            let mut b = Browser::new(&app);
            tokio::spawn(
                async move { b.sign_in_once("ada@example.com", "wrong wrong wrong").await },
            )
        })
        .collect();
    let (mut unauthorized, mut refused) = (0, 0);
    for a in attempts {
        let r = a.await.unwrap();
        match r.status {
            StatusCode::UNAUTHORIZED => unauthorized += 1,
            StatusCode::TOO_MANY_REQUESTS => refused += 1,
            other => panic!("unexpected {other}: {}", r.text),
        }
    }
    assert!(unauthorized <= 10, "{unauthorized} checked, limit 10");
    assert_eq!(unauthorized + refused, 40);
    // Attempts refused unchecked (the password pool was full) did not
    // count; the rest of the minute's ten are checked one by one.
    let mut b = Browser::new(&app);
    for _ in unauthorized..10 {
        let r = b.sign_in("ada@example.com", "wrong wrong wrong").await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }
    // The minute is spent: the right password waits too, and is told when.
    let req = b
        .http
        .post(format!("{}/dashboard/sign-in", app.base))
        .header(ORIGIN, &app.base)
        .form(&[("email", "ada@example.com"), ("password", PASSWORD)]);
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let after: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&after), "{after}");
    let _ = b.get("/dashboard/sign-in").await;
    app.stop().await;
}

/// A browser whose requests come through our proxy from `client`.
fn through_proxy(app: &TestApp, header: &'static str, client: &str) -> Browser {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(header, client.parse().unwrap());
    let mut b = Browser::new(app);
    b.http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .build()
        .unwrap();
    b
}

/// Issue 25: failing for a known email does not lock its user out: the
/// email's block refuses only the addresses that failed for it themselves;
/// another address with the right password signs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_cannot_lock_a_user_out() {
    let Some(app) = TestApp::builder(Backend::Sqlite)
        .config(|c| {
            c.dashboard.sign_in_failures_per_minute = 3;
            c.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
        })
        .start()
        .await
    else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    // Three attackers, one guess each: the email has its minute's failures.
    let mut attackers: Vec<Browser> = (1..=3)
        .map(|i| through_proxy(&app, "x-forwarded-for", &format!("203.0.113.{i}")))
        .collect();
    for attacker in &mut attackers {
        let r = attacker
            .sign_in("ada@example.com", "guess guess guess")
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }
    // Each attacker that failed for the email is now refused for it, even
    // with the right password.
    for attacker in &mut attackers {
        let r = attacker.sign_in("ada@example.com", PASSWORD).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    }
    // Ada, from her own address, signs in.
    let mut ada = through_proxy(&app, "x-forwarded-for", "198.51.100.20");
    let r = ada.sign_in("ada@example.com", PASSWORD).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    // A fresh address gets its one guess; having failed, it is refused.
    let mut fresh = through_proxy(&app, "x-forwarded-for", "203.0.113.99");
    let r = fresh.sign_in("ada@example.com", "guess guess guess").await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = fresh.sign_in("ada@example.com", PASSWORD).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    app.stop().await;
}

/// Issue 25: behind a proxy that sets `X-Forwarded-For` (the default
/// `client_ip_header`), a client's own `Forwarded` picks nothing: varying it
/// does not dodge the per-address limit. With `client_ip_header =
/// "forwarded"` it is `X-Forwarded-For` that is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_named_forwarding_header_names_the_client() {
    use taskgate_server::client_addr::ClientIpHeader;
    for (named, spoofed) in [
        (ClientIpHeader::XForwardedFor, "forwarded"),
        (ClientIpHeader::Forwarded, "x-forwarded-for"),
    ] {
        let Some(app) = TestApp::builder(Backend::Sqlite)
            .config(|c| {
                c.dashboard.sign_in_failures_per_minute = 3;
                c.auth_failures_per_minute = 3;
                c.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
                c.client_ip_header = named;
            })
            .start()
            .await
        else {
            return;
        };
        let spoof = |i: usize| match spoofed {
            "forwarded" => format!("for=198.51.100.{i}"),
            _ => format!("198.51.100.{i}"),
        };
        let mut statuses = Vec::new();
        for i in 0..6 {
            let mut b = through_proxy(&app, spoofed, &spoof(i));
            statuses.push(
                b.sign_in(&format!("n{i}@example.com"), "wrong")
                    .await
                    .status,
            );
        }
        assert_eq!(
            statuses[3..],
            [StatusCode::TOO_MANY_REQUESTS; 3],
            "{named:?}: {statuses:?}"
        );
        // The API's failed-authentication limit reads the same header.
        let bad = app.client("tg_not_a_key");
        let mut api = Vec::new();
        for i in 0..6 {
            let r = bad
                .send(
                    bad.request(reqwest::Method::GET, "tasks")
                        .header(spoofed, spoof(i)),
                )
                .await;
            api.push(r.status.as_u16());
        }
        assert_eq!(api[3..], [429; 3], "{named:?}: {api:?}");
        app.stop().await;
    }
}

/// Issue 25: `X-Forwarded-Host` (the origin check) and `X-Forwarded-Proto`
/// (the cookie's `Secure`) are believed only from a trusted proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_host_and_proto_only_from_a_trusted_proxy() {
    for trusted in [false, true] {
        let Some(app) = TestApp::builder(Backend::Sqlite)
            .config(|c| {
                if trusted {
                    c.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
                }
            })
            .start()
            .await
        else {
            return;
        };
        user(&app, &app.account_id, "ada@example.com", "owner").await;
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("x-forwarded-host", "taskgate.example".parse().unwrap());
        headers.insert("x-forwarded-proto", "https".parse().unwrap());
        let mut b = Browser::new(&app);
        b.http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .default_headers(headers)
            .build()
            .unwrap();
        b.origin = "https://taskgate.example".to_owned();
        let r = b.sign_in("ada@example.com", PASSWORD).await;
        if trusted {
            assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
            assert!(r.set_cookie.unwrap().contains("; Secure"));
        } else {
            assert_eq!(r.status, StatusCode::FORBIDDEN, "the origin is not ours");
            b.origin = app.base.clone();
            let r = b.sign_in("ada@example.com", PASSWORD).await;
            assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
            assert!(!r.set_cookie.unwrap().contains("Secure"), "not over HTTPS");
        }
        app.stop().await;
    }
}

/// Issue 25: a user changes their own password with the current one; their
/// other sessions end, this browser stays signed in; the old password no
/// longer signs in. A wrong current password changes nothing and counts as
/// a failed sign-in of the address.
async fn users_change_their_own_password(backend: Backend) {
    let Some(app) = TestApp::builder(backend)
        .config(|c| c.dashboard.sign_in_failures_per_minute = 3)
        .start()
        .await
    else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "member").await;
    let mut here = signed_in(&app, "ada@example.com").await;
    let mut elsewhere = signed_in(&app, "ada@example.com").await;
    let csrf = here.get("/dashboard/password").await.csrf();
    const NEW: &str = "quiet orange harbour lamps";
    let form = |current: &'static str, new: &'static str, confirm: &'static str| {
        [
            ("csrf", csrf.clone()),
            ("current", current.to_owned()),
            ("new", new.to_owned()),
            ("confirm", confirm.to_owned()),
        ]
    };
    async fn change(b: &mut Browser, fields: &[(&str, String)]) -> Page {
        let pairs: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        b.patiently("/dashboard/password", &pairs).await
    }
    // Wrong current password, mismatch, too short: refused with a message.
    let r = change(&mut here, &form("not my password", NEW, NEW)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text.contains("current password is wrong"), "{}", r.text);
    let r = change(&mut here, &form(PASSWORD, NEW, "something else entirely")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = change(&mut here, &form(PASSWORD, "short", "short")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // Without the CSRF token: 403.
    let r = change(&mut here, &form(PASSWORD, NEW, NEW)[1..]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // Right: changed; this browser keeps a (new) session, the other's ended.
    let r = change(&mut here, &form(PASSWORD, NEW, NEW)).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    assert!(r.set_cookie.is_some(), "a new session for this browser");
    assert_eq!(here.get("/dashboard/keys").await.status, StatusCode::OK);
    let r = elsewhere.get("/dashboard/keys").await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "the other session ended");
    let r = Browser::new(&app)
        .sign_in("ada@example.com", PASSWORD)
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "the old password");
    let r = Browser::new(&app).sign_in("ada@example.com", NEW).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "the new one");
    app.stop().await;
}
both!(users_change_their_own_password);

/// The operator's ceiling on an account's spend limit, set by an admin on
/// the admin page: with the owners' limit at "none" it is what holds (a
/// call past it is refused), owners see it, and they may set a lower limit
/// but neither a higher one nor none.
async fn owners_set_their_spend_limit_under_the_ceiling(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "root@example.com", "admin").await;
    user(&app, &app.account_id, "owner@example.com", "owner").await;
    let mut admin = signed_in(&app, "root@example.com").await;
    let csrf = admin.get("/dashboard/admin").await.csrf();
    let path = format!("/dashboard/admin/accounts/{}", app.account_id);
    let r = admin
        .post(&path, &[("csrf", &csrf), ("ceiling", "plenty")])
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.text.contains("The ceiling is an amount in USD"),
        "{}",
        r.text
    );
    let r = admin
        .post(&path, &[("csrf", &csrf), ("ceiling", "0.0001")])
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    assert!(
        admin
            .get("/dashboard/admin")
            .await
            .text
            .contains("$0.000100")
    );

    // The owners set no limit: the ceiling holds.
    let live = app.client(&app.live);
    live.call(json!({"api": "sentiment", "input": {"text": "one"}}))
        .await
        .expect(200);
    let refused = live
        .call(json!({"api": "sentiment", "input": {"text": "two"}}))
        .await
        .expect_error(403, "usage_limit_exceeded");
    assert!(refused.text.contains("0.0001"), "{}", refused.text);

    let mut owner = signed_in(&app, "owner@example.com").await;
    let page = owner.get("/dashboard/settings").await;
    assert!(
        page.text.contains("$0.000100 per month (the operator"),
        "what holds, and why: {}",
        page.text
    );
    assert!(
        page.text
            .contains("$0.000100 per month, set by the operator")
    );
    assert!(
        page.text
            .contains("Monthly spend limit (USD, at most $0.000100)")
    );
    let csrf = page.csrf();
    for (typed, says) in [
        ("1", "can be at most $0.000100 per month"),
        ("", "cannot be removed"),
    ] {
        let r = owner
            .post(
                "/dashboard/settings/spend-limit",
                &[("csrf", &csrf), ("spend_limit", typed)],
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{typed:?}");
        assert!(r.text.contains(says), "{typed:?}: {}", r.text);
    }
    let id = app.account_id.parse().unwrap();
    let a = app.store.get_account(id).await.unwrap().unwrap();
    assert_eq!(a.monthly_spend_limit_micros, None, "nothing was saved");

    // Lower is fine.
    let r = owner
        .post(
            "/dashboard/settings/spend-limit",
            &[("csrf", &csrf), ("spend_limit", "0.00005")],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let a = app.store.get_account(id).await.unwrap().unwrap();
    assert_eq!(a.monthly_spend_limit_micros, Some(50));
    assert_eq!(a.effective_spend_limit_micros(), Some(50));

    // Without the ceiling, the owners may remove their limit again.
    let admin_csrf = admin.get("/dashboard/admin").await.csrf();
    let r = admin
        .post(&path, &[("csrf", &admin_csrf), ("ceiling", "")])
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let r = owner
        .post(
            "/dashboard/settings/spend-limit",
            &[("csrf", &csrf), ("spend_limit", "")],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let a = app.store.get_account(id).await.unwrap().unwrap();
    assert_eq!(a.effective_spend_limit_micros(), None);
    app.stop().await;
}
both!(owners_set_their_spend_limit_under_the_ceiling);
