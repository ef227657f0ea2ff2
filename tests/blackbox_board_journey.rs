//! Issue #29, "Done when": an owner goes from `admin login-link` to a working agent, a budget
//! chosen with the preview, and a webhook, without leaving the browser. One real Chromium
//! session (JavaScript on, as a person has it) against the real binary on real PostgreSQL; the
//! agent speaks MCP and the webhook provider signs a delivery, as they would from outside.

mod board_support;
mod support;

use board_support::world::{Ep, World, claim_next, fill};
use board_support::{Browser, Driver, Js};
use fantoccini::Locator;
use serde_json::{Value, json};

/// Presses the submit button whose text is `text`, then waits for `css` on the next page.
async fn press_then(browser: &Browser, text: &str, css: &str) {
    let xpath = format!("//button[normalize-space()='{text}']");
    browser.client.find(Locator::XPath(&xpath)).await.expect(text).click().await.expect(text);
    browser.wait_for_element(css).await;
}

/// Follows the link whose text is `text`.
async fn follow(browser: &Browser, text: &str) {
    browser.client.find(Locator::LinkText(text)).await.expect(text).click().await.expect(text);
}

// Issue #29: the owner's whole day on the board.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_vends_an_agent_budgets_it_with_the_preview_and_routes_a_webhook_from_the_browser() {
    let world = World::start(1).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::On, 0).await;

    // 1. A working agent, through the vend wizard.
    browser.goto(&world.url("/")).await;
    follow(&browser, "Endpoints").await;
    follow(&browser, "New endpoint…").await;
    browser.wait_for_element("#name").await;
    fill(&browser, "name", "triage").await;
    fill(&browser, "queues", "inbox").await;
    press_then(&browser, "Next: what it may do", "#verb-list_todos").await;
    press_then(&browser, "Next: review", "ul.consent").await;
    press_then(&browser, "Create endpoint", "#token").await;
    let (url, key) = (browser.field_value("mcp-url").await, browser.field_value("token").await);
    let slug = url.rsplit_once("/mcp/").map(|(_, slug)| slug.to_string()).expect("an MCP URL");
    let agent = Ep { id: String::new(), scope: format!("endpoint:{slug}"), slug, key };

    // 2. A webhook that routes into the agent's queue, and a signed delivery through it.
    follow(&browser, "Webhooks").await;
    follow(&browser, "New webhook…").await;
    browser.wait_for_element("#targets").await;
    fill(&browser, "name", "ci").await;
    fill(&browser, "targets", &format!("{}/inbox", agent.scope)).await;
    press_then(&browser, "Create webhook", "#secret").await;
    let (ingest, secret) = (browser.field_value("ingest-url").await, browser.field_value("secret").await);
    for n in 0..3 {
        let body = format!(r#"{{"title": "build {n} failed"}}"#);
        let answer = reqwest::Client::new()
            .post(&ingest)
            .headers(support::sign(&secret, &format!("msg_{n}"), &body))
            .body(body)
            .send()
            .await
            .expect("deliver");
        assert!(answer.status().is_success(), "delivery {n}: {}", answer.status());
    }

    // The agent claims the delivered work over MCP.
    let claimed = claim_next(&world.api, &agent).await.expect("the agent claims a delivered todo");
    let (_, todo) = world.api.get(&format!("/api/v1/todos/{claimed}"), &world.owner).await;
    assert!(todo["todo"]["title"].as_str().is_some_and(|t| t.starts_with("build ")), "{todo}");

    // 3. A budget chosen with the preview: one claim a day; the preview counts the claim made.
    browser.goto(&world.url("/")).await;
    follow(&browser, "triage / inbox").await;
    browser.wait_for_element("#edit-budget").await;
    browser.client.find(Locator::Id("edit-budget")).await.expect("edit").click().await.expect("edit");
    browser.wait_for_element("#max_claims_per_window").await;
    fill(&browser, "max_claims_per_window", "1").await;
    fill(&browser, "tz", "UTC").await;
    press_then(&browser, "Preview", "#preview-deferred").await;
    let status = browser.text(".preview p[role=status]").await;
    assert!(status.contains("Of the 1 claim committed"), "the preview replays the agent's claim: {status}");
    assert_eq!(browser.text("#preview-deferred").await, "0");
    press_then(&browser, "Save budget", "section.card").await;

    // The budget holds. The claim made before it existed was not charged (REQ-1: no policy, no
    // charge), so today admits one more claim and defers the next.
    let (status, detail) = world.api.get(&format!("/api/v1/admission/{}/inbox", agent.scope), &world.owner).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["policy"]["max_claims_per_window"], 1, "{detail}");
    assert!(claim_next(&world.api, &agent).await.is_some(), "the day's one claim was refused");
    let (is_error, answer): (bool, Value) =
        world.api.tool(&agent.slug, &agent.key, "claim_next", json!({"lease_ttl_seconds": 60})).await;
    assert!(!is_error, "{answer}");
    assert_eq!(answer["empty"], true, "a second claim was admitted under a budget of one: {answer}");
    assert_eq!(answer["deferred"][0]["reason"], "window_exhausted", "{answer}");
    browser.screenshot("journey-end").await;
    browser.close().await;
}

// Contract §6: the navigation links the owner's pages (board, endpoints with the vend wizard,
// webhooks, tokens) from every page a signed-in owner opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_signed_in_page_links_the_owners_pages() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["inbox"]).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;
    let queue = format!("/queues/endpoint:{}/inbox", ep.id);
    let pages = [
        "/".to_string(),
        "/endpoints".to_string(),
        "/endpoints/new".to_string(),
        format!("/endpoints/{}", ep.id),
        "/webhooks".to_string(),
        "/webhooks/new".to_string(),
        "/tokens".to_string(),
        "/settings/capacity".to_string(),
        queue.clone(),
        format!("{queue}/budget"),
    ];
    for page in &pages {
        browser.goto(&world.url(page)).await;
        let links = browser
            .execute(
                "return [...document.querySelectorAll('nav[aria-label=Main] a')].map(a => a.getAttribute('href'));",
                vec![],
            )
            .await;
        for wanted in ["/", "/endpoints", "/endpoints/new", "/webhooks", "/tokens"] {
            assert!(
                links.as_array().is_some_and(|l| l.iter().any(|h| h == wanted)),
                "{page} has no link to {wanted}: {links}"
            );
        }
    }
    browser.close().await;
}
