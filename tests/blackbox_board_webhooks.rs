//! Issue #29: the owner's webhook and operator token pages in a real browser (headless Chromium
//! over WebDriver) against the real binary on real PostgreSQL. A webhook registered from the
//! page, with JavaScript off, routes a delivery signed with the secret it showed into the queue
//! it names; a bad target is an error beside the targets and registers nothing; a rotation
//! shows a new secret that signs and when the old one stops; deleting through the confirmation
//! page makes the ingest URL 404. An operator token minted from the page works on the API until
//! revoked from the page; a bad expiry is an error beside its field. Another human's webhook or
//! token is the same 404 as an unknown one, for pages and forms alike, and a forged form changes
//! nothing. Screenshots land in `target/board-screenshots/webhook-*.png` and `token-*.png`.

mod board_support;
mod support;

use board_support::world::{Ep, Page, Web, World, fill};
use board_support::{Browser, Driver, Js};
use fantoccini::Locator;
use serde_json::{Value, json};

/// Marks the page the browser shows now, so [`wait_for_new_page`] can tell the next one from it
/// when a form answers on the same path.
async fn mark_page(browser: &Browser) {
    browser.execute("document.body.dataset.stale = '1'; return true;", vec![]).await;
}

/// Waits until the browser shows a page after the one [`mark_page`] marked, holding `css`.
async fn wait_for_new_page(browser: &Browser, css: &str) {
    browser.wait_for_element(&format!("body:not([data-stale]) {css}")).await;
}

/// Presses the submit button of the form that posts to `action`.
async fn press_form(browser: &Browser, action: &str) {
    let css = format!("form[action='{action}'] button[type=submit]");
    browser.client.find(Locator::Css(&css)).await.expect(action).click().await.expect(action);
}

/// Delivers `body` to `ingest_url` signed per Standard Webhooks with `secret`: (status, answer).
async fn deliver(ingest_url: &str, secret: &str, delivery_id: &str, body: &str) -> (u16, Value) {
    let answer = reqwest::Client::new()
        .post(ingest_url)
        .headers(support::sign(secret, delivery_id, body))
        .body(body.to_string())
        .send()
        .await
        .expect("POST ingest");
    (answer.status().as_u16(), answer.json().await.unwrap_or(Value::Null))
}

/// The owner's webhooks as the API lists them.
async fn webhooks(world: &World, token: &str) -> Vec<Value> {
    let (status, body) = world.api.get("/api/v1/webhooks", token).await;
    assert_eq!(status, 200, "list webhooks: {body}");
    body["webhooks"].as_array().expect("webhooks").clone()
}

/// The titles of the pending todos of `ep`'s queue `queue`.
async fn pending_titles(world: &World, ep: &Ep, queue: &str) -> Vec<String> {
    let path = format!("/api/v1/todos?scope={}&queue={queue}&state=pending&limit=200", ep.scope);
    let (status, body) = world.api.get(&path, &world.owner).await;
    assert_eq!(status, 200, "list pending: {body}");
    let mut titles: Vec<String> = body["todos"]
        .as_array()
        .expect("todos")
        .iter()
        .map(|t| t["title"].as_str().expect("title").to_string())
        .collect();
    titles.sort();
    titles
}

/// The session's CSRF token (the sign-out form carries it) and a plain HTTP client with its
/// cookie; the browser is closed.
async fn plain_http(world: &World, browser: Browser) -> (String, Web) {
    let csrf = browser
        .execute("return document.querySelector('form.signout input[name=csrf]').value;", vec![])
        .await
        .as_str()
        .expect("csrf")
        .to_string();
    let web = Web::new(world.base(0), &browser.session_cookie().await.expect("cookie"));
    browser.close().await;
    (csrf, web)
}

/// A form POST through `web` that also answers its `Cache-Control`.
async fn post_with_cache_control(web: &Web, path: &str, form: &str) -> (Page, Option<String>) {
    let response = web
        .http
        .post(format!("{}{path}", web.base))
        .header("cookie", format!("sb_session={}", web.cookie))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form.to_string())
        .send()
        .await
        .expect("POST");
    let cache = response.headers().get("cache-control").and_then(|v| v.to_str().ok()).map(str::to_string);
    let status = response.status().as_u16();
    (Page { status, location: None, body: response.text().await.expect("body") }, cache)
}

/// Submits the new-webhook form with one bad target line: the error is beside the targets and
/// the field is marked invalid, the typed values are kept, and nothing is registered.
async fn refuse_a_bad_target(world: &World, browser: &Browser, ep: &Ep) {
    fill(browser, "name", "ci").await;
    fill(browser, "targets", &format!("endpoint:{}/inbox\nendpoint:{}/Not A Queue", ep.slug, ep.slug)).await;
    mark_page(browser).await;
    browser.press_button("Create webhook").await;
    wait_for_new_page(browser, "#targets-error").await;
    let error = browser.text("#targets-error").await;
    assert!(error.contains("Line 2 (") && error.contains("queue must be"), "targets error: {error}");
    let described =
        browser.execute("return document.getElementById('targets').getAttribute('aria-describedby');", vec![]).await;
    assert_eq!(described, json!("targets-hint targets-known targets-error"));
    let invalid =
        browser.execute("return document.getElementById('targets').getAttribute('aria-invalid');", vec![]).await;
    assert_eq!(invalid, json!("true"));
    assert_eq!(browser.field_value("name").await, "ci", "the name was not kept");
    assert!(browser.field_value("targets").await.contains("Not A Queue"), "the targets were not kept");
    assert!(webhooks(world, &world.owner).await.is_empty(), "a refused form registered a webhook");
    browser.screenshot("webhook-new-error").await;
}

/// Fixes the targets and registers the webhook from the page: the ingest URL and the secret are
/// shown once, each with a copy button, and the API lists it. Answers (id, ingest URL, secret).
async fn register_through_the_page(world: &World, browser: &Browser, ep: &Ep) -> (String, String, String) {
    fill(browser, "targets", &format!("endpoint:{}/inbox", ep.slug)).await;
    browser.press_button("Create webhook").await;
    browser.wait_for_element("#secret").await;
    let ingest_url = browser.field_value("ingest-url").await;
    let secret = browser.field_value("secret").await;
    assert!(ingest_url.starts_with(&world.url("/ingest/wh_")), "ingest URL: {ingest_url}");
    assert!(secret.starts_with("whsec_"), "secret: {secret}");
    let copies =
        browser.execute("return [...document.querySelectorAll('button.copy')].map(b => b.dataset.copy);", vec![]).await;
    assert_eq!(copies, json!(["ingest-url", "secret"]), "a copy button per value");
    browser.screenshot("webhook-created").await;
    let listed = webhooks(world, &world.owner).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let id = listed[0]["id"].as_str().expect("id").to_string();
    assert_eq!(ingest_url, world.url(&format!("/ingest/{id}")));
    (id, ingest_url, secret)
}

/// Rotates the secret from the list page: a new secret is shown once, and when the old one
/// stops being accepted, in the future and in UTC without JavaScript. Answers the new secret.
async fn rotate_through_the_page(browser: &Browser, id: &str, secret: &str) -> String {
    press_form(browser, &format!("/webhooks/{id}/rotate")).await;
    browser.wait_for_element("#grace time.local").await;
    let rotated = browser.field_value("secret").await;
    assert!(rotated.starts_with("whsec_") && rotated != secret, "rotation showed {rotated}");
    let until =
        browser.execute("return document.querySelector('#grace time.local').getAttribute('datetime');", vec![]).await;
    let until = chrono::DateTime::parse_from_rfc3339(until.as_str().expect("datetime")).expect("RFC 3339");
    assert!(until > chrono::Utc::now(), "the old secret's grace ended already: {until}");
    assert!(browser.text("#grace time.local").await.contains("UTC"), "without JavaScript the time reads UTC");
    browser.screenshot("webhook-rotated").await;
    rotated
}

/// Deletes the webhook through its confirmation page: the API lists it no more.
async fn delete_through_the_confirmation_page(world: &World, browser: &Browser, id: &str) {
    browser.goto(&world.url("/webhooks")).await;
    let delete = format!("a[href='/webhooks/{id}/delete']");
    browser.client.find(Locator::Css(&delete)).await.expect("delete link").click().await.expect("open");
    browser.wait_for_path(&format!("/webhooks/{id}/delete")).await;
    browser.screenshot("webhook-delete").await;
    browser.press_button("Delete ci").await;
    browser.wait_for_path("/webhooks").await;
    assert!(webhooks(world, &world.owner).await.is_empty(), "the webhook was not deleted");
}

/// The webhook `stranger` registers through the API on their own endpoint's queue `secret`:
/// (their endpoint, webhook id, secret, ingest URL).
async fn their_webhook(world: &World, stranger: &str) -> (Ep, String, String, String) {
    let theirs = world.vend(stranger, "private", &["secret"]).await;
    let targets = json!([{"scope": theirs.scope, "queue": "secret"}]);
    let (status, hook) =
        world.api.post("/api/v1/webhooks", stranger, json!({"name": "theirs", "targets": targets})).await;
    assert_eq!(status, 201, "{hook}");
    let (their_id, their_secret) = (hook["id"].as_str().expect("id"), hook["secret"].as_str().expect("secret"));
    let their_url = hook["ingest_url"].as_str().expect("ingest_url").to_string();
    (theirs, their_id.to_string(), their_secret.to_string(), their_url)
}

/// Another human's webhook's delete page, rotate form and delete form answer byte for byte
/// what an unknown webhook's do: 404.
async fn foreign_webhook_answers_as_unknown(web: &Web, csrf: &str, their_id: &str) {
    let foreign = web.get(&format!("/webhooks/{their_id}/delete")).await;
    let unknown = web.get("/webhooks/no-such-webhook/delete").await;
    assert_eq!(foreign.status, 404, "GET foreign delete page: {foreign:?}");
    assert_eq!((unknown.status, &unknown.body), (foreign.status, &foreign.body), "GET differs");
    for suffix in ["/rotate", "/delete"] {
        let form = format!("csrf={csrf}");
        let foreign = web.post(&format!("/webhooks/{their_id}{suffix}"), &form).await;
        let unknown = web.post(&format!("/webhooks/no-such-webhook{suffix}"), &form).await;
        assert_eq!(foreign.status, 404, "POST foreign{suffix}: {foreign:?}");
        assert_eq!((unknown.status, &unknown.body), (foreign.status, &foreign.body), "POST {suffix} differs");
    }
}

/// A target in another human's endpoint is refused as one that does not exist, and registers
/// nothing.
async fn refuse_a_foreign_target(world: &World, web: &Web, csrf: &str, theirs: &Ep) {
    let target_form = |scope: &str| format!("csrf={csrf}&name=sneaky&targets={scope}%2Fsecret");
    let foreign = web.post("/webhooks/new", &target_form(&theirs.scope)).await;
    let unknown = web.post("/webhooks/new", &target_form("endpoint:no-such-endpoint")).await;
    assert_eq!((foreign.status, unknown.status), (404, 404), "{foreign:?}");
    let message = "A target names an endpoint or a team that does not exist or that you do not manage.";
    assert!(foreign.body.contains(message) && unknown.body.contains(message), "{}", foreign.body);
    assert!(webhooks(world, &world.owner).await.is_empty(), "a foreign target registered a webhook");
}

/// My own webhook, over plain HTTP: 201, not cached; then forged rotate, delete and new forms
/// are 403 and change nothing, so the secret the API gave still signs after one rotation.
async fn forged_forms_leave_my_webhook_alone(world: &World, web: &Web, csrf: &str) {
    let ep = world.vend(&world.owner, "research", &["inbox"]).await;
    let form = format!("csrf={csrf}&name=mine&targets=endpoint:{}%2Finbox", ep.slug);
    let (created, cache) = post_with_cache_control(web, "/webhooks/new", &form).await;
    assert_eq!((created.status, cache.as_deref()), (201, Some("no-store")), "{created:?}");
    assert!(created.body.contains("value=\"whsec_"), "the page shows no secret: {}", created.body);
    assert_eq!(webhooks(world, &world.owner).await.len(), 1, "the form registered no webhook");
    let (status, hook) = world
        .api
        .post(
            "/api/v1/webhooks",
            &world.owner,
            json!({"name": "api", "targets": [{"scope": ep.scope, "queue": "inbox"}]}),
        )
        .await;
    assert_eq!(status, 201, "{hook}");
    let (mine_id, secret) = (hook["id"].as_str().expect("id"), hook["secret"].as_str().expect("secret"));
    for suffix in ["/rotate", "/delete"] {
        let forged = web.post(&format!("/webhooks/{mine_id}{suffix}"), "csrf=forged").await;
        assert_eq!(forged.status, 403, "forged POST {suffix}: {forged:?}");
    }
    let forged = web.post("/webhooks/new", &form.replace(csrf, "forged")).await;
    assert_eq!(forged.status, 403, "forged new webhook: {forged:?}");
    assert_eq!(webhooks(world, &world.owner).await.len(), 2, "a forged form registered or deleted one");
    let (status, _) = world.api.post(&format!("/api/v1/webhooks/{mine_id}/rotate"), &world.owner, json!({})).await;
    assert_eq!(status, 200);
    let ingest_url = world.url(&format!("/ingest/{mine_id}"));
    let (status, answer) = deliver(&ingest_url, secret, "mine_1", r#"{"title": "mine"}"#).await;
    assert_eq!(status, 202, "a forged form rotated my webhook: {answer}");
}

/// Another human's operator token is the same 404 as an unknown one and stays working; forged
/// token forms are refused and mint or revoke nothing.
async fn foreign_and_forged_token_forms_change_nothing(world: &World, web: &Web, csrf: &str, stranger: &str) {
    let (_, tokens) = world.api.get("/api/v1/tokens", stranger).await;
    let their_token_id = tokens["tokens"][0]["id"].as_str().expect("their token id").to_string();
    let form = format!("csrf={csrf}");
    let foreign = web.post(&format!("/tokens/{their_token_id}/revoke"), &form).await;
    let unknown = web.post("/tokens/tk_nosuchtoken/revoke", &form).await;
    assert_eq!(foreign.status, 404, "POST foreign token revoke: {foreign:?}");
    assert_eq!((unknown.status, &unknown.body), (foreign.status, &foreign.body), "token revoke differs");
    assert_eq!(world.api.get("/api/v1/endpoints", stranger).await.0, 200, "a refused form revoked their token");
    let (_, mine) = world.api.get("/api/v1/tokens", &world.owner).await;
    let my_token_id = mine["tokens"][0]["id"].as_str().expect("my token id").to_string();
    let forged = web.post(&format!("/tokens/{my_token_id}/revoke"), "csrf=forged").await;
    assert_eq!(forged.status, 403, "forged token revoke: {forged:?}");
    let forged = web.post("/tokens/new", "csrf=forged&label=x").await;
    assert_eq!(forged.status, 403, "forged token mint: {forged:?}");
    let (_, after) = world.api.get("/api/v1/tokens", &world.owner).await;
    assert_eq!(after, mine, "a forged form minted or revoked a token");
    assert!(!web.get("/tokens").await.body.contains(&their_token_id), "my token page shows their token");
}

// Issue #29: a webhook registered from the page (JavaScript off) routes a signed delivery into
// its queue; a bad target registers nothing; rotate shows a new secret that signs; delete makes
// the ingest URL 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_pages_register_rotate_and_delete_as_the_api_does() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["inbox"]).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;

    browser.goto(&world.url("/webhooks")).await;
    assert!(browser.text("main").await.contains("No webhooks yet"), "an empty list says so");
    browser.client.find(Locator::LinkText("New webhook…")).await.expect("link").click().await.expect("open");
    browser.wait_for_path("/webhooks/new").await;
    let autofocus = browser.execute("return document.activeElement.id;", vec![]).await;
    assert_eq!(autofocus, json!("name"), "the form opens on its first field");
    let known = browser.text("#targets-known").await;
    assert!(known.contains(&format!("endpoint:{}/inbox", ep.slug)), "the form suggests no target: {known}");

    // A bad target: the error is beside the targets, values are kept, nothing is registered.
    refuse_a_bad_target(&world, &browser, &ep).await;

    // Fixed: the ingest URL and the secret are shown once.
    let (id, ingest_url, secret) = register_through_the_page(&world, &browser, &ep).await;

    // A delivery signed with the shown secret becomes a todo in the queue it names.
    let (status, answer) = deliver(&ingest_url, &secret, "msg_1", r#"{"title": "build failed"}"#).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(pending_titles(&world, &ep, "inbox").await, ["build failed"]);

    // The list shows it and where it routes.
    browser.goto(&world.url("/webhooks")).await;
    let row = browser.text("table tbody tr").await;
    assert!(row.contains("ci") && row.contains(&format!("endpoint:{}/inbox", ep.id)), "list row: {row}");
    browser.screenshot("webhook-list").await;

    // Rotate: a new secret, shown once, signs; the old one is accepted until the time shown.
    let rotated = rotate_through_the_page(&browser, &id, &secret).await;
    let (status, answer) = deliver(&ingest_url, &rotated, "msg_2", r#"{"title": "deploy done"}"#).await;
    assert_eq!(status, 202, "the new secret does not sign: {answer}");
    let (status, answer) = deliver(&ingest_url, &secret, "msg_3", r#"{"title": "late provider"}"#).await;
    assert_eq!(status, 202, "the old secret's grace is not kept: {answer}");
    assert_eq!(pending_titles(&world, &ep, "inbox").await, ["build failed", "deploy done", "late provider"]);

    // Delete, through its confirmation page: the ingest URL is 404; the todos stay.
    delete_through_the_confirmation_page(&world, &browser, &id).await;
    let (status, answer) = deliver(&ingest_url, &rotated, "msg_4", r#"{"title": "after delete"}"#).await;
    assert_eq!(status, 404, "a deleted webhook's ingest URL answers: {answer}");
    assert_eq!(pending_titles(&world, &ep, "inbox").await.len(), 3, "deleting lost the todos it made");
    browser.close().await;
}

// Issue #29, SPEC-0030 REQ-11: another human's webhook pages and forms answer byte for byte what
// an unknown webhook's do, a target outside the viewer's reach registers nothing, and a forged
// form changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_humans_webhook_is_the_same_404_as_an_unknown_one() {
    let world = World::start(1).await;
    let stranger = world.human("stranger");
    let (theirs, their_id, their_secret, their_url) = their_webhook(&world, &stranger).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::On, 0).await;
    let (csrf, web) = plain_http(&world, browser).await;

    foreign_webhook_answers_as_unknown(&web, &csrf, &their_id).await;
    let list = web.get("/webhooks").await;
    assert!(!list.body.contains(&their_id) && !list.body.contains("theirs"), "my list shows their webhook");
    // Their webhook was neither rotated nor deleted: after one rotation of their own, the secret
    // they started with is the replaced one and still signs (a rotation by the refused form would
    // have pushed it out).
    let (status, rotation) = world.api.post(&format!("/api/v1/webhooks/{their_id}/rotate"), &stranger, json!({})).await;
    assert_eq!(status, 200, "{rotation}");
    let (status, answer) = deliver(&their_url, &their_secret, "their_1", r#"{"title": "theirs"}"#).await;
    assert_eq!(status, 202, "a refused form changed their webhook: {answer}");

    // A target in their endpoint is refused as one that does not exist, and registers nothing.
    refuse_a_foreign_target(&world, &web, &csrf, &theirs).await;

    // My own webhook, over plain HTTP: 201, not cached; then forged forms change nothing.
    forged_forms_leave_my_webhook_alone(&world, &web, &csrf).await;

    // Tokens: theirs is the same 404 as an unknown one; forged forms are refused.
    foreign_and_forged_token_forms_change_nothing(&world, &web, &csrf, &stranger).await;
}

// Issue #29: an operator token minted from the page (JavaScript off) works on the API until it
// is revoked from the page; a bad expiry is an error beside its field and mints nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_page_mints_and_revokes_as_the_api_does() {
    let world = World::start(1).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;
    let (_, before) = world.api.get("/api/v1/tokens", &world.owner).await;
    let count_before = before["tokens"].as_array().expect("tokens").len();

    browser.goto(&world.url("/tokens")).await;
    assert_eq!(browser.text("main table caption").await, "Your tokens");

    // A bad expiry, then one out of range: each beside its field, values kept, nothing minted.
    for (typed, expected) in [("1.5", "expires_in_days must be a whole number"), ("400", "between 1 and 366")] {
        fill(&browser, "label", "deploy script").await;
        fill(&browser, "expires_in_days", typed).await;
        mark_page(&browser).await;
        browser.press_button("Create a token").await;
        wait_for_new_page(&browser, "#expires_in_days-error").await;
        let error = browser.text("#expires_in_days-error").await;
        assert!(error.contains(expected), "expiry {typed}: {error}");
        assert_eq!(browser.field_value("expires_in_days").await, typed);
        assert_eq!(browser.field_value("label").await, "deploy script");
        let focus = browser.execute("return document.activeElement.id;", vec![]).await;
        assert_eq!(focus, json!("expires_in_days"), "the page opens on the field in error");
    }
    browser.screenshot("token-error").await;
    let (_, unchanged) = world.api.get("/api/v1/tokens", &world.owner).await;
    assert_eq!(unchanged, before, "a refused form minted a token");

    // Minted: shown once, and it works on the operator API.
    fill(&browser, "expires_in_days", "30").await;
    browser.press_button("Create a token").await;
    browser.wait_for_element("#token").await;
    let token = browser.field_value("token").await;
    assert!(token.starts_with("sbh_"), "token: {token}");
    browser.screenshot("token-minted").await;
    assert_eq!(world.api.get("/api/v1/endpoints", &token).await.0, 200, "the minted token does not work");
    let (_, listed) = world.api.get("/api/v1/tokens", &world.owner).await;
    let listed = listed["tokens"].as_array().expect("tokens").clone();
    assert_eq!(listed.len(), count_before + 1);
    let minted = listed.iter().find(|t| t["label"] == "deploy script").expect("the minted token listed");
    let expires =
        chrono::DateTime::parse_from_rfc3339(minted["expires_at"].as_str().expect("an expiry")).expect("RFC 3339");
    let days = (expires.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_hours() as f64 / 24.0;
    assert!((29.9..=30.1).contains(&days), "expires in {days} days, not 30");
    let minted_id = minted["id"].as_str().expect("id").to_string();

    // Listed with its label and expiry; revoking from the page makes it 401 at once.
    browser.goto(&world.url("/tokens")).await;
    let page = browser.text("main table").await;
    assert!(page.contains("deploy script") && page.contains("UTC"), "token list: {page}");
    browser.screenshot("token-list").await;
    mark_page(&browser).await;
    press_form(&browser, &format!("/tokens/{minted_id}/revoke")).await;
    browser.wait_for_path("/tokens").await;
    wait_for_new_page(&browser, "main h1").await;
    assert!(!browser.text("main").await.contains("deploy script"), "the revoked token is still listed");
    assert_eq!(world.api.get("/api/v1/endpoints", &token).await.0, 401, "a revoked token still works");
    assert_eq!(world.api.get("/api/v1/endpoints", &world.owner).await.0, 200, "revoking hit another token");
    browser.close().await;
}
