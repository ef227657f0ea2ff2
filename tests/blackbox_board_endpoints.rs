//! Issue #29: the owner's endpoint pages in a real browser (headless Chromium over WebDriver)
//! against the real binary on real PostgreSQL: list, detail, revoke (the token fails at once),
//! rotate (a new token shown once works, the old fails), delete through a confirmation page;
//! another human's endpoint is the same 404 as an unknown one, for pages and forms alike.
//! Screenshots land in `target/board-screenshots/endpoint-*.png`.

mod board_support;
mod support;

use board_support::Driver;
use board_support::Js;
use board_support::world::{Ep, Web, World, claim_next};
use fantoccini::Locator;
use serde_json::json;

/// The HTTP status of an MCP `tools/list` with `key`: 200 while the token works, 401 after.
async fn mcp_status(world: &World, ep: &Ep, key: &str) -> u16 {
    world.api.rpc(&ep.slug, key, "tools/list", json!({})).await.0
}

// Issue #29: revoke from the page makes the token fail; rotate shows a new one that works;
// delete goes through its confirmation page. With JavaScript off, as plain forms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_pages_revoke_rotate_and_delete_as_the_api_does() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["inbox"]).await;
    let todo = world.create(&world.owner, &ep, "inbox", "keep me").await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;

    // The list names it; its page shows its queues and grant.
    browser.goto(&world.url("/endpoints")).await;
    let row = browser.text("table tbody tr").await;
    assert!(row.contains("research") && row.contains("inbox") && row.contains("live"), "list row: {row}");
    browser.screenshot("endpoint-list").await;
    browser.client.find(Locator::LinkText("research")).await.expect("link").click().await.expect("open");
    browser.wait_for_path(&format!("/endpoints/{}", ep.id)).await;
    let page = browser.text("main").await;
    assert!(page.contains(&format!("/mcp/{}", ep.slug)), "the page shows the MCP URL: {page}");
    assert!(page.contains("claim_next"), "the page shows the grant: {page}");
    browser.screenshot("endpoint-detail").await;

    // Revoke: the token is refused at once; the endpoint and its work stay.
    assert_eq!(mcp_status(&world, &ep, &ep.key).await, 200);
    browser.press_button("Revoke the token").await;
    browser.wait_for_element("p.warning[role=status]").await;
    assert_eq!(mcp_status(&world, &ep, &ep.key).await, 401, "a revoked token still works");
    assert_eq!(world.todo_state(&world.owner, &todo).await, "pending", "revoking lost the work");
    browser.screenshot("endpoint-revoked").await;

    // Rotate: a new token, shown once, works; the old one stays refused.
    browser.press_button("Rotate the token").await;
    browser.wait_for_element("#token").await;
    let key = browser.execute("return document.getElementById('token').value;", vec![]).await;
    let key = key.as_str().expect("new token").to_string();
    assert!(key.starts_with("sbk_") && key != ep.key, "rotation showed {key}");
    let rotated = Ep { key, ..ep.clone() };
    assert_eq!(claim_next(&world.api, &rotated).await, Some(todo.clone()), "the new token cannot claim");
    assert_eq!(mcp_status(&world, &ep, &ep.key).await, 401, "the old token works after rotation");

    // Delete, through its confirmation page.
    browser.goto(&world.url(&format!("/endpoints/{}", ep.id))).await;
    browser.client.find(Locator::LinkText("Delete the endpoint…")).await.expect("link").click().await.expect("open");
    browser.wait_for_path(&format!("/endpoints/{}/delete", ep.id)).await;
    browser.screenshot("endpoint-delete").await;
    browser.press_button("Delete research").await;
    browser.wait_for_path("/endpoints").await;
    let (_, endpoints) = world.api.get("/api/v1/endpoints", &world.owner).await;
    assert_eq!(endpoints["endpoints"], json!([]), "the endpoint was not deleted");
    assert_eq!(mcp_status(&world, &ep, &rotated.key).await, 401, "a deleted endpoint's token works");
    browser.close().await;
}

// Issue #29, SPEC-0030 REQ-11: another human's endpoint pages and forms answer byte for byte
// what an unknown endpoint's do, and a forged form changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_humans_endpoint_is_the_same_404_as_an_unknown_one() {
    let world = World::start(1).await;
    let stranger = world.human("stranger");
    let theirs = world.vend(&stranger, "private", &["secret"]).await;
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::On, 0).await;
    let csrf = browser
        .execute("return document.querySelector('form.signout input[name=csrf]').value;", vec![])
        .await
        .as_str()
        .expect("csrf")
        .to_string();
    let web = Web::new(world.base(0), &browser.session_cookie().await.expect("cookie"));
    browser.close().await;

    for reference in [&theirs.id, &theirs.slug] {
        for suffix in ["", "/delete"] {
            let foreign = web.get(&format!("/endpoints/{reference}{suffix}")).await;
            let unknown = web.get(&format!("/endpoints/no-such-endpoint{suffix}")).await;
            assert_eq!(foreign.status, 404, "GET foreign{suffix}: {foreign:?}");
            assert_eq!((unknown.status, &unknown.body), (foreign.status, &foreign.body), "GET {suffix} differs");
        }
        for suffix in ["/revoke", "/rotate", "/delete"] {
            let form = format!("csrf={csrf}");
            let foreign = web.post(&format!("/endpoints/{reference}{suffix}"), &form).await;
            let unknown = web.post(&format!("/endpoints/no-such-endpoint{suffix}"), &form).await;
            assert_eq!(foreign.status, 404, "POST foreign{suffix}: {foreign:?}");
            assert_eq!((unknown.status, &unknown.body), (foreign.status, &foreign.body), "POST {suffix} differs");
        }
    }
    assert_eq!(mcp_status(&world, &theirs, &theirs.key).await, 200, "a refused form changed their token");

    // My own endpoint, with a forged token: refused, and the token still works.
    let mine = world.vend(&world.owner, "research", &["inbox"]).await;
    for suffix in ["/revoke", "/rotate", "/delete"] {
        let forged = web.post(&format!("/endpoints/{}{suffix}", mine.id), "csrf=forged").await;
        assert_eq!(forged.status, 403, "forged POST {suffix}: {forged:?}");
    }
    assert_eq!(mcp_status(&world, &mine, &mine.key).await, 200, "a forged form changed my token");
}
