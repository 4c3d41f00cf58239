//! The dashboard's Webhooks section (issue 28, item 8), as a browser uses it:
//! endpoints of the mode shown, added through the form, their secret revealed
//! and rotated, a test event and its delivery retried, disabling, deleting;
//! the account's signing secret; refusals; roles, tenancy and CSRF.
//!
//! `webhooks.allow_private_networks` stays off: `hooks.example.com` does not
//! resolve here, which `check_url` accepts (it may resolve later), and its
//! attempts fail to connect, which is all these tests need of them.

use reqwest::StatusCode;
use taskgate_core::{AccountId, Mode, WebhookEndpointId};
use taskgate_store::DeliveryQuery;

use crate::dashboard::{Browser, Page, signed_in, user};
use crate::utils::{Backend, TestApp, both};

const URL: &str = "https://hooks.example.com/x";

fn account(app: &TestApp) -> AccountId {
    app.account_id.parse().unwrap()
}

/// Adds an endpoint through the form; its id (from where the form leads).
async fn add(b: &mut Browser, mode: &str, url: &str, description: &str) -> String {
    let query = if mode == "test" { "?mode=test" } else { "" };
    let csrf = b
        .get(&format!("/dashboard/webhooks/new{query}"))
        .await
        .csrf();
    let r = b
        .post(
            "/dashboard/webhooks/new",
            &[
                ("csrf", &csrf),
                ("mode", mode),
                ("url", url),
                ("event", "task.succeeded"),
                ("event", "task.failed"),
                ("description", description),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let to = r.location.unwrap();
    let rest = to
        .strip_prefix("/dashboard/webhooks/")
        .unwrap_or_else(|| panic!("{to}"));
    assert!(rest.ends_with("?done=created"), "{to}");
    rest.trim_end_matches("?done=created").to_owned()
}

async fn post(b: &mut Browser, path: &str, csrf: &str) -> Page {
    b.post(path, &[("csrf", csrf)]).await
}

/// The id of the first delivery an endpoint's page lists.
fn first_delivery(page: &Page) -> String {
    let at = page.text.find("/deliveries/").expect("a delivery");
    let rest = &page.text[at + 12..];
    rest[..rest.find('/').unwrap()].to_owned()
}

/// An owner adds an endpoint (listed for its mode only, its description
/// escaped), reveals and rotates its secret, disables and enables it, sends
/// a test event, retries its delivery and deletes it.
async fn an_endpoint_from_the_dashboard(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let mut b = signed_in(&app, "ada@example.com").await;
    let page = b.get("/dashboard/webhooks").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains(">Webhooks</a>"), "in the navigation");
    assert!(page.text.contains("No live endpoints yet."));

    let id = add(&mut b, "live", URL, "<b>orders</b>").await;
    let list = b.get("/dashboard/webhooks").await;
    assert!(list.text.contains(URL));
    assert!(list.text.contains("task.succeeded, task.failed"));
    assert!(
        list.text.contains("&#60;b&#62;orders&#60;/b&#62;"),
        "escaped"
    );
    assert!(!list.text.contains("<b>orders</b>"));
    let test_list = b.get("/dashboard/webhooks?mode=test").await;
    assert!(!test_list.text.contains(URL), "live endpoints only in live");
    assert!(test_list.text.contains("No test endpoints yet."));

    let path = format!("/dashboard/webhooks/{id}");
    let details = b.get(&format!("{path}?done=created")).await;
    assert_eq!(details.status, StatusCode::OK, "{}", details.text);
    assert!(details.text.contains("Endpoint added."));
    assert!(details.text.contains("Nothing has been sent"));
    for button in [
        ">Reveal secret</button>",
        ">Rotate secret</button>",
        ">Send test event</button>",
        ">Disable</button>",
        ">Edit</a>",
        ">Delete</a>",
    ] {
        assert!(details.text.contains(button), "{button}");
    }
    let csrf = details.csrf();

    // Reveal, again the same; rotate: another, which reveal then shows.
    let first = post(&mut b, &format!("{path}/secret"), &csrf).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let secret = first.secret();
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert_eq!(
        post(&mut b, &format!("{path}/secret"), &csrf)
            .await
            .secret(),
        secret
    );
    let rotated = post(&mut b, &format!("{path}/rotate-secret"), &csrf).await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    assert!(rotated.text.contains("keeps signing beside this one"));
    let new = rotated.secret();
    assert_ne!(new, secret);
    assert_eq!(
        post(&mut b, &format!("{path}/secret"), &csrf)
            .await
            .secret(),
        new
    );

    let endpoint_id = WebhookEndpointId::parse(&id).unwrap();
    let stored = || async {
        app.store
            .get_endpoint(account(&app), Mode::Live, endpoint_id)
            .await
            .unwrap()
            .unwrap()
    };
    let r = post(&mut b, &format!("{path}/disable"), &csrf).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    assert!(stored().await.disabled.is_some());
    let page = b.get(&r.location.unwrap()).await;
    assert!(page.text.contains("Endpoint disabled"));
    assert!(page.text.contains(">Enable</button>"));
    let r = post(&mut b, &format!("{path}/enable"), &csrf).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    assert!(stored().await.disabled.is_none());
    assert!(b.get(&path).await.text.contains(">Disable</button>"));

    // Edit: the form shows what it is; a bad URL is refused with the form
    // again; a good one is saved (URL, events, description).
    let form = b.get(&format!("{path}/edit")).await;
    assert_eq!(form.status, StatusCode::OK, "{}", form.text);
    assert!(form.text.contains(&format!("value=\"{URL}\"")));
    assert!(form.text.contains("value=\"task.succeeded\" checked"));
    assert!(!form.text.contains("value=\"task.running\" checked"));
    let edit = |url: &'static str| {
        [
            ("csrf", csrf.clone()),
            ("url", url.to_owned()),
            ("event", "task.running".to_owned()),
            ("event", "task.cancelled".to_owned()),
            ("description", "renamed".to_owned()),
        ]
    };
    let fields = edit("ftp://hooks.example.com/x");
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = b.post(&format!("{path}/edit"), &fields).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("role=\"alert\""), "{}", r.text);
    assert!(
        r.text.contains("ftp://hooks.example.com/x"),
        "what was typed stays"
    );
    assert_eq!(stored().await.url, URL, "nothing changed");
    let fields = edit("https://hooks.example.com/edited");
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = b.post(&format!("{path}/edit"), &fields).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    assert!(
        b.get(&r.location.unwrap())
            .await
            .text
            .contains("Endpoint saved.")
    );
    let edited = stored().await;
    assert_eq!(edited.url, "https://hooks.example.com/edited");
    assert_eq!(edited.description.as_deref(), Some("renamed"));
    assert_eq!(
        edited.events.list(),
        [
            taskgate_core::WebhookEvent::TaskRunning,
            taskgate_core::WebhookEvent::TaskCancelled
        ]
    );
    assert!(edited.disabled.is_none(), "still enabled");

    let r = post(&mut b, &format!("{path}/test"), &csrf).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let page = b.get(&r.location.unwrap()).await;
    assert!(page.text.contains("A test event is on its way"));
    assert!(page.text.contains("webhook.test"));
    let delivery = first_delivery(&page);
    // Its first attempt, due at once, fails to connect: the page shows it,
    // with no HTTP status, its error and the next attempt.
    let mut tried = page;
    for _ in 0..100 {
        if tried.text.contains(", error: ") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        tried = b.get(&path).await;
    }
    assert!(tried.text.contains("HTTP status none"), "{}", tried.text);
    assert!(tried.text.contains(">Retry</button>"));
    assert!(
        tried.text.contains("status-failed\">failed<"),
        "{}",
        tried.text
    );
    let r = post(
        &mut b,
        &format!("{path}/deliveries/{delivery}/retry"),
        &csrf,
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    let page = b.get(&r.location.unwrap()).await;
    assert!(page.text.contains("will be sent again now"));
    assert!(
        ["pending", "failed"]
            .iter()
            .any(|s| page.text.contains(&format!("status-{s}\">{s}<"))),
        "{}",
        page.text
    );
    // Another endpoint's path does not retry this delivery.
    let other = add(&mut b, "live", "https://hooks.example.com/y", "").await;
    let r = post(
        &mut b,
        &format!("/dashboard/webhooks/{other}/deliveries/{delivery}/retry"),
        &csrf,
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    let confirm = b.get(&format!("{path}/delete")).await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.text);
    assert!(confirm.text.contains("cannot be undone"));
    let r = post(&mut b, &format!("{path}/delete"), &confirm.csrf()).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    assert_eq!(r.location.as_deref(), Some("/dashboard/webhooks"));
    assert!(
        !b.get("/dashboard/webhooks")
            .await
            .text
            .contains("hooks.example.com/edited")
    );
    assert_eq!(b.get(&path).await.status, StatusCode::NOT_FOUND);
    let left = app
        .store
        .list_endpoints(account(&app), Mode::Live, None, 10)
        .await
        .unwrap();
    assert_eq!(left.len(), 1, "only the other one");

    // A test endpoint is listed in test mode only, its page in test mode.
    let test_id = add(&mut b, "test", "https://hooks.example.com/t", "").await;
    assert!(
        b.get("/dashboard/webhooks?mode=test")
            .await
            .text
            .contains("https://hooks.example.com/t")
    );
    assert!(
        !b.get("/dashboard/webhooks")
            .await
            .text
            .contains("https://hooks.example.com/t")
    );
    let page = b.get(&format!("/dashboard/webhooks/{test_id}")).await;
    assert!(page.text.contains("class=\"test-mode\""));
    app.stop().await;
}
both!(an_endpoint_from_the_dashboard);

/// The secret that signs calls' own webhooks, per mode: revealed (the same
/// again) and rotated (another).
async fn the_signing_secret(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let mut b = signed_in(&app, "ada@example.com").await;
    let csrf = b.get("/dashboard/webhooks").await.csrf();
    let path = "/dashboard/webhooks/signing-secret";
    let mut secrets = Vec::new();
    for mode in ["live", "test"] {
        let r = b.post(path, &[("csrf", &csrf), ("mode", mode)]).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let s = r.secret();
        assert!(s.starts_with("whsec_"));
        let again = b.post(path, &[("csrf", &csrf), ("mode", mode)]).await;
        assert_eq!(again.secret(), s);
        secrets.push(s);
    }
    assert_ne!(secrets[0], secrets[1], "one per mode");
    let r = b
        .post(
            "/dashboard/webhooks/signing-secret/rotate",
            &[("csrf", &csrf), ("mode", "live")],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let rotated = r.secret();
    assert_ne!(rotated, secrets[0]);
    let r = b
        .post(
            "/dashboard/webhooks/signing-secret",
            &[("csrf", &csrf), ("mode", "live")],
        )
        .await;
    assert_eq!(r.secret(), rotated);
    app.stop().await;
}
both!(the_signing_secret);

/// A URL that cannot be a webhook's, or no event, shows the form again with
/// the reason, and stores nothing; so does a 17th endpoint of a mode.
async fn bad_endpoints_are_refused(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let mut b = signed_in(&app, "ada@example.com").await;
    let csrf = b.get("/dashboard/webhooks/new").await.csrf();
    for (url, event, says) in [
        (
            "ftp://hooks.example.com/x",
            Some("task.succeeded"),
            "The URL must be an http or https URL.",
        ),
        (
            "http://127.0.0.1/",
            Some("task.succeeded"),
            "The URL must reach a public address",
        ),
        (
            "not a url",
            Some("task.succeeded"),
            "The URL is not a valid absolute URL.",
        ),
        (URL, None, "Choose at least one event."),
    ] {
        let mut form = vec![("csrf", csrf.as_str()), ("mode", "live"), ("url", url)];
        if let Some(e) = event {
            form.push(("event", e));
        }
        let r = b.post("/dashboard/webhooks/new", &form).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{url}: {}", r.text);
        assert!(r.text.contains(says), "{url}: {}", r.text);
        assert!(r.text.contains(&format!("value=\"{url}\"")), "kept");
    }
    let r = b
        .post(
            "/dashboard/webhooks/new",
            &[("csrf", &csrf), ("url", URL), ("event", "task.nope")],
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    for mode in [Mode::Live, Mode::Test] {
        let stored = app
            .store
            .list_endpoints(account(&app), mode, None, 10)
            .await
            .unwrap();
        assert!(stored.is_empty(), "nothing stored");
    }

    // At most 16 endpoints of a mode: the 17th is refused, in words.
    for i in 0..16 {
        add(&mut b, "live", &format!("{URL}/{i}"), "").await;
    }
    let r = b
        .post(
            "/dashboard/webhooks/new",
            &[
                ("csrf", &csrf),
                ("mode", "live"),
                ("url", URL),
                ("event", "task.failed"),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.text.contains("16 endpoints of this mode already"),
        "{}",
        r.text
    );
    // The test mode has room of its own.
    add(&mut b, "test", URL, "").await;
    app.stop().await;
}
both!(bad_endpoints_are_refused);

/// Members, who may not change keys, may not change webhooks either nor see
/// their secrets (403); they see the list and the deliveries. Another
/// account's owner does not find the endpoint (404).
async fn members_and_strangers(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    let other = app.create_account("pro").await;
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    user(&app, &app.account_id, "member@example.com", "member").await;
    user(&app, &other, "owner@other.example", "owner").await;
    let mut owner = signed_in(&app, "ada@example.com").await;
    let id = add(&mut owner, "live", URL, "").await;
    let csrf = owner.get("/dashboard/webhooks").await.csrf();
    let r = post(&mut owner, &format!("/dashboard/webhooks/{id}/test"), &csrf).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let delivery = first_delivery(&owner.get(&format!("/dashboard/webhooks/{id}")).await);
    let before = app
        .store
        .get_endpoint(
            account(&app),
            Mode::Live,
            WebhookEndpointId::parse(&id).unwrap(),
        )
        .await
        .unwrap()
        .unwrap();

    let mut member = signed_in(&app, "member@example.com").await;
    let list = member.get("/dashboard/webhooks").await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(list.text.contains(URL));
    assert!(!list.text.contains("Add endpoint"));
    assert!(!list.text.contains("Reveal signing secret"));
    let page = member.get(&format!("/dashboard/webhooks/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("webhook.test"), "deliveries are shown");
    assert!(!page.text.contains("Reveal secret"));
    assert!(!page.text.contains(">Retry<"));
    let csrf = page.csrf();
    for path in [
        "/dashboard/webhooks/new".to_owned(),
        format!("/dashboard/webhooks/{id}/edit"),
    ] {
        assert_eq!(
            member.get(&path).await.status,
            StatusCode::FORBIDDEN,
            "{path}"
        );
    }
    assert_eq!(
        member
            .get(&format!("/dashboard/webhooks/{id}/delete"))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    let r = member
        .post(
            "/dashboard/webhooks/new",
            &[
                ("csrf", &csrf),
                ("url", "https://hooks.example.com/m"),
                ("event", "task.failed"),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let actions = [
        "secret",
        "rotate-secret",
        "test",
        "disable",
        "enable",
        "edit",
        "delete",
    ]
    .map(|a| format!("/dashboard/webhooks/{id}/{a}"));
    let retry = format!("/dashboard/webhooks/{id}/deliveries/{delivery}/retry");
    for path in actions.iter().chain([&retry]) {
        let r = post(&mut member, path, &csrf).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}");
        assert!(!r.text.contains("whsec_"), "{path}");
    }
    for path in [
        "/dashboard/webhooks/signing-secret",
        "/dashboard/webhooks/signing-secret/rotate",
    ] {
        let r = member
            .post(path, &[("csrf", &csrf), ("mode", "live")])
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}");
    }

    let mut stranger = signed_in(&app, "owner@other.example").await;
    let theirs = stranger.get("/dashboard/webhooks").await;
    assert!(!theirs.text.contains(URL));
    let csrf = theirs.csrf();
    assert_eq!(
        stranger
            .get(&format!("/dashboard/webhooks/{id}"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    for path in actions.iter().chain([&retry]) {
        let r = post(&mut stranger, path, &csrf).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
    }

    let after = app
        .store
        .get_endpoint(account(&app), Mode::Live, before.id)
        .await
        .unwrap()
        .expect("not deleted");
    assert_eq!(after.secret.expose(), before.secret.expose(), "not rotated");
    assert_eq!(after.url, URL, "not edited");
    assert!(after.disabled.is_none());
    let deliveries = app
        .store
        .list_deliveries(&DeliveryQuery {
            account_id: account(&app),
            mode: Mode::Live,
            endpoint_id: Some(before.id),
            task_id: None,
            status: None,
            before: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 1, "no other test event");
    app.stop().await;
}
both!(members_and_strangers);

/// Every POST of the section without the CSRF token, with a wrong one, or
/// from another site is 403 and changes nothing.
async fn csrf_on_every_post(backend: Backend) {
    let Some(app) = TestApp::start(backend).await else {
        return;
    };
    user(&app, &app.account_id, "ada@example.com", "owner").await;
    let mut b = signed_in(&app, "ada@example.com").await;
    let id = add(&mut b, "live", URL, "").await;
    let csrf = b.get("/dashboard/webhooks").await.csrf();
    let r = post(&mut b, &format!("/dashboard/webhooks/{id}/test"), &csrf).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let delivery = first_delivery(&b.get(&format!("/dashboard/webhooks/{id}")).await);
    let endpoint_id = WebhookEndpointId::parse(&id).unwrap();
    let before = app
        .store
        .get_endpoint(account(&app), Mode::Live, endpoint_id)
        .await
        .unwrap()
        .unwrap();

    let mut paths: Vec<String> = [
        "secret",
        "rotate-secret",
        "test",
        "disable",
        "enable",
        "edit",
        "delete",
    ]
    .iter()
    .map(|a| format!("/dashboard/webhooks/{id}/{a}"))
    .collect();
    paths.push(format!(
        "/dashboard/webhooks/{id}/deliveries/{delivery}/retry"
    ));
    paths.push("/dashboard/webhooks/new".to_owned());
    paths.push("/dashboard/webhooks/signing-secret".to_owned());
    paths.push("/dashboard/webhooks/signing-secret/rotate".to_owned());
    let wrong = "0".repeat(64);
    for path in &paths {
        let fields = [
            ("mode", "live"),
            ("url", "https://hooks.example.com/new"),
            ("event", "task.failed"),
        ];
        let r = b.post(path, &fields).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path} without a token");
        let mut with_wrong = fields.to_vec();
        with_wrong.push(("csrf", &wrong));
        let r = b.post(path, &with_wrong).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path} with a wrong one");
        b.origin = "https://evil.example".to_owned();
        let mut with_right = fields.to_vec();
        with_right.push(("csrf", &csrf));
        let r = b.post(path, &with_right).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path} from elsewhere");
        assert!(!r.text.contains("whsec_"));
        b.origin = app.base.clone();
    }

    let after = app
        .store
        .get_endpoint(account(&app), Mode::Live, endpoint_id)
        .await
        .unwrap()
        .expect("not deleted");
    assert_eq!(after.secret.expose(), before.secret.expose());
    assert_eq!(after.url, URL, "not edited");
    assert!(after.disabled.is_none());
    let all = app
        .store
        .list_endpoints(account(&app), Mode::Live, None, 10)
        .await
        .unwrap();
    assert_eq!(all.len(), 1, "none added");
    app.stop().await;
}
both!(csrf_on_every_post);
