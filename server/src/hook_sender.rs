//! The outbound half of notify hooks (SPEC-0024): one signed POST to an endpoint's hook URL, and
//! the guard that decides whether Switchboard may make it. The outbox, retries and disabling live
//! elsewhere; this module owns exactly one call and the reasons it may refuse to make it.
//!
//! Why a guard: a hook URL is chosen by a tenant, but the request leaves from inside our network.
//! Without checks a tenant could aim it at the cloud metadata service, the database's admin port
//! or anything else on a private network (server-side request forgery). So every address a name
//! resolves to is checked (`forbidden_address`), and the call then connects to exactly those
//! checked addresses: the client's resolution is pinned (`ClientBuilder::resolve_to_addrs`, with a
//! fallback resolver that refuses every other name), because resolving again at connect time
//! would let a DNS answer that changes between check and use (rebinding) swap in a private
//! address. For the same reason proxies are off (a proxy resolves the name itself), redirects are
//! not followed (a 3xx could point anywhere), and the response body is never read or reported.
//! An `https://` hook is pinned the same way: only the connection's address is taken from the
//! pin, while the TLS server name (SNI) and the certificate check stay the URL's host, against
//! the compiled-in public roots (`crate::tls`), so pinning never weakens the certificate check.
//!
//! Must never: connect to an address it has not checked, follow a redirect, or return a
//! receiver's response body to the caller.

use models::error::Error;
use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// The whole call (resolution, connect, request, response head) must finish within this.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(5);
/// A hook says "work is ready", not the work itself, so its body stays small.
pub const HOOK_BODY_MAX_BYTES: usize = 4096;
/// Longest hook URL accepted.
const URL_LENGTH_MAX_BYTES: usize = 2048;
/// Most resolved addresses one call is pinned to (all of them are checked regardless).
const PINNED_ADDRESSES_MAX: usize = 16;
/// Longest `webhook-id` sent; the ingest side accepts 1-200 bytes, so hooks stay inside that.
const MSG_ID_LENGTH_MAX_BYTES: usize = 200;
const USER_AGENT: &str = concat!("switchboard-hooks/", env!("CARGO_PKG_VERSION"));

/// Whether private/loopback targets are allowed (operator setting
/// `SWITCHBOARD_HOOKS_ALLOW_PRIVATE`; tests use it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressPolicy {
    PublicOnly,
    AllowPrivate,
}

impl AddressPolicy {
    /// Reads `SWITCHBOARD_HOOKS_ALLOW_PRIVATE`: "1", "true" or "yes" allow private targets;
    /// anything else, or nothing, keeps hooks public-only.
    pub fn from_env() -> Self {
        Self::from_setting(std::env::var("SWITCHBOARD_HOOKS_ALLOW_PRIVATE").ok().as_deref())
    }

    fn from_setting(setting: Option<&str>) -> Self {
        match setting.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
            Some("1" | "true" | "yes") => AddressPolicy::AllowPrivate,
            _ => AddressPolicy::PublicOnly,
        }
    }
}

/// The result of one call. `Refused` means it was never made and retrying cannot help;
/// `Failed` means it was attempted (or the name did not resolve) and a retry may succeed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Delivered { status: u16 },
    Failed { reason: String },
    Refused { reason: String },
}

/// Checks a hook URL's syntax only: http or https, a host, no userinfo, at most 2048 bytes.
pub fn check_url(url: &str) -> Result<Url, Error> {
    let refuse = |message: String| Error::invalid("url", message);
    if url.len() > URL_LENGTH_MAX_BYTES {
        return Err(refuse(format!("hook URL is {} bytes; at most {URL_LENGTH_MAX_BYTES} are allowed", url.len())));
    }
    let parsed = Url::parse(url).map_err(|problem| refuse(format!("hook URL does not parse ({problem})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(refuse(format!("hook URL must use http or https, not {}", parsed.scheme())));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(refuse("hook URL has no host".to_string()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(refuse("hook URL must not carry a user name or password".to_string()));
    }
    Ok(parsed)
}

/// Why an address may not be called, or `None` for an ordinary public address. Covers
/// loopback, private, link-local, cloud metadata, unspecified, multicast, broadcast, CGNAT,
/// documentation and benchmarking ranges, and IPv6 forms that embed an IPv4 address.
pub fn forbidden_address(ip: IpAddr) -> Option<&'static str> {
    classify(ip).map(Class::reason)
}

/// Resolves the URL's host (an IP literal is taken as is) and checks every address; one
/// forbidden address refuses the whole URL, since the client might connect to any of them.
pub async fn resolve_checked(url: &Url, policy: AddressPolicy) -> Result<Vec<SocketAddr>, Error> {
    resolve(url, policy).await.map_err(|refusal| match refusal {
        Refusal::Forbidden(message) | Refusal::Unresolved(message) => Error::invalid("url", message),
    })
}

/// One signed POST of `body` to `url`; see the module doc for what is checked and why.
pub async fn send(
    url: &str,
    secret: &str,
    msg_id: &str,
    timestamp_seconds: i64,
    body: &serde_json::Value,
    policy: AddressPolicy,
) -> Outcome {
    send_within(url, secret, msg_id, timestamp_seconds, body, policy, HOOK_TIMEOUT).await
}

/// `send` with the time limit handed in, so tests need not wait five seconds.
async fn send_within(
    url: &str,
    secret: &str,
    msg_id: &str,
    timestamp_seconds: i64,
    body: &serde_json::Value,
    policy: AddressPolicy,
    timeout: Duration,
) -> Outcome {
    let refused = |reason: String| Outcome::Refused { reason };
    // Everything that needs no network is decided first, so a refusal sends nothing.
    let Ok(payload) = serde_json::to_vec(body) else {
        return refused("hook body does not serialise to JSON".to_string());
    };
    if payload.len() > HOOK_BODY_MAX_BYTES {
        return refused(format!("hook body is {} bytes; at most {HOOK_BODY_MAX_BYTES} are allowed", payload.len()));
    }
    let url = match check_url(url) {
        Ok(url) => url,
        Err(error) => return refused(error.message),
    };
    let headers = match signed_headers(secret, msg_id, timestamp_seconds, &payload) {
        Ok(headers) => headers,
        Err(reason) => return refused(reason.to_string()),
    };
    let call = async {
        let addresses = match resolve(&url, policy).await {
            Ok(addresses) => addresses,
            Err(Refusal::Forbidden(reason)) => return refused(reason),
            // Often transient (the resolver is down, the record is being changed): worth a retry.
            Err(Refusal::Unresolved(reason)) => return Outcome::Failed { reason },
        };
        post_pinned(&url, &addresses, headers, payload, timeout).await
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(outcome) => outcome,
        Err(_elapsed) => Outcome::Failed { reason: "timed out".to_string() },
    }
}

/// The Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`) and
/// the content type, signed with the endpoint's `whsec_` secret exactly as `webhooks::ingest`
/// verifies incoming deliveries.
fn signed_headers(
    secret: &str,
    msg_id: &str,
    timestamp_seconds: i64,
    payload: &[u8],
) -> Result<HeaderMap, &'static str> {
    if msg_id.is_empty() || msg_id.len() > MSG_ID_LENGTH_MAX_BYTES {
        return Err("hook message id must be 1-200 bytes");
    }
    let msg_id_header = HeaderValue::from_str(msg_id).map_err(|_| "hook message id is not a valid header value")?;
    if secret.strip_prefix("whsec_").unwrap_or(secret).is_empty() {
        return Err("hook secret is empty");
    }
    let signer = standardwebhooks::Webhook::new(secret).map_err(|_| "hook secret is not a valid whsec_ secret")?;
    let signature = signer.sign(msg_id, timestamp_seconds, payload).map_err(|_| "hook body could not be signed")?;
    let signature = HeaderValue::from_str(&signature).map_err(|_| "hook signature is not a valid header value")?;
    let mut headers = HeaderMap::new();
    headers.insert(standardwebhooks::HEADER_WEBHOOK_ID, msg_id_header);
    headers.insert(standardwebhooks::HEADER_WEBHOOK_TIMESTAMP, HeaderValue::from(timestamp_seconds));
    headers.insert(standardwebhooks::HEADER_WEBHOOK_SIGNATURE, signature);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(headers)
}

/// Why resolution produced no callable address: a forbidden one (permanent) or none (maybe not).
enum Refusal {
    Forbidden(String),
    Unresolved(String),
}

async fn resolve(url: &Url, policy: AddressPolicy) -> Result<Vec<SocketAddr>, Refusal> {
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return Err(Refusal::Unresolved("hook URL has no host or port".to_string()));
    };
    // url renders an IPv6 host in brackets; an IP literal needs no lookup.
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let mut addresses: Vec<SocketAddr> = match literal.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => match tokio::net::lookup_host((host, port)).await {
            Ok(found) => found.collect(),
            Err(problem) => {
                return Err(Refusal::Unresolved(format!(
                    "hook URL's host {host} does not resolve ({})",
                    problem.kind()
                )));
            }
        },
    };
    // Keep the resolver's order (it is the connect preference), dropping repeats.
    let mut seen = Vec::with_capacity(addresses.len());
    addresses.retain(|address| {
        !seen.contains(address) && {
            seen.push(*address);
            true
        }
    });
    if addresses.is_empty() {
        return Err(Refusal::Unresolved(format!("hook URL's host {host} resolves to no address")));
    }
    for address in &addresses {
        if let Some(class) = classify(address.ip()).filter(|class| !class.allowed_under(policy)) {
            let reason = class.reason();
            let article = if reason.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
            return Err(Refusal::Forbidden(format!(
                "hook URL resolves to {article} {reason} address ({}), which hooks may not call",
                address.ip()
            )));
        }
    }
    addresses.truncate(PINNED_ADDRESSES_MAX);
    Ok(addresses)
}

/// POSTs to `url`, connecting only to `addresses` (already checked), never following a redirect.
async fn post_pinned(
    url: &Url,
    addresses: &[SocketAddr],
    headers: HeaderMap,
    payload: Vec<u8>,
    timeout: Duration,
) -> Outcome {
    let failed = |reason: String| Outcome::Failed { reason };
    let tls = match crate::tls::public_roots() {
        Ok(tls) => tls,
        Err(problem) => return failed(format!("hook TLS settings could not be built ({problem})")),
    };
    let mut builder = reqwest::Client::builder()
        // A proxy would resolve the name itself, outside the guard.
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        // One call is one attempt; the outbox owns retries.
        .retry(reqwest::retry::never())
        .timeout(timeout)
        .user_agent(USER_AGENT)
        .tls_backend_preconfigured(tls)
        .dns_resolver(PinnedOnly);
    if let Some(domain) = url.domain() {
        builder = builder.resolve_to_addrs(domain, addresses);
    }
    let client = match builder.build() {
        Ok(client) => client,
        Err(_) => return failed("hook HTTP client could not be built".to_string()),
    };
    match client.post(url.clone()).headers(headers).body(payload).send().await {
        // The response body is never read: it is the receiver's, and may be anything.
        Ok(response) if response.status().is_success() => Outcome::Delivered { status: response.status().as_u16() },
        Ok(response) if response.status().is_redirection() => {
            failed(format!("HTTP {} (redirects are not followed)", response.status().as_u16()))
        }
        Ok(response) => failed(format!("HTTP {}", response.status().as_u16())),
        Err(error) => failed(error_kind(&error)),
    }
}

/// A short, body-free description of a transport error: its kind and, if any, the TLS or I/O
/// cause (a refused certificate is worth naming: the receiver must fix it, not wait it out).
fn error_kind(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "connection failed"
    } else if error.is_builder() {
        "request could not be built"
    } else {
        "request failed"
    };
    if let Some(problem) = crate::tls::tls_problem(error) {
        return format!("{kind} (TLS: {problem})");
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return format!("{kind} ({})", io.kind());
        }
        source = cause.source();
    }
    kind.to_string()
}

/// The client's resolver for any name not pinned by `resolve_to_addrs`: it refuses, so the
/// client can never resolve a name itself and connect to an address nobody checked.
struct PinnedOnly;

impl reqwest::dns::Resolve for PinnedOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let message = format!("{} is not a pinned hook address", name.as_str());
        Box::pin(std::future::ready(Err(message.into())))
    }
}

/// The kinds of address a hook may not call; `AllowPrivate` lifts only the private ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Loopback,
    Private,
    SharedCgnat,
    LinkLocal,
    CloudMetadata,
    Unspecified,
    Multicast,
    Broadcast,
    Documentation,
    Benchmarking,
    Reserved,
}

impl Class {
    fn reason(self) -> &'static str {
        match self {
            Class::Loopback => "loopback",
            Class::Private => "private",
            Class::SharedCgnat => "shared (CGNAT)",
            Class::LinkLocal => "link-local",
            Class::CloudMetadata => "cloud metadata",
            Class::Unspecified => "unspecified",
            Class::Multicast => "multicast",
            Class::Broadcast => "broadcast",
            Class::Documentation => "documentation",
            Class::Benchmarking => "benchmarking",
            Class::Reserved => "reserved",
        }
    }

    /// Link-local stays refused even when private targets are allowed: it holds the metadata
    /// services (credentials) and no real receiver lives there. Unspecified connects to this
    /// host on Linux, so it is never a legitimate target either.
    fn allowed_under(self, policy: AddressPolicy) -> bool {
        policy == AddressPolicy::AllowPrivate && matches!(self, Class::Loopback | Class::Private | Class::SharedCgnat)
    }
}

fn classify(ip: IpAddr) -> Option<Class> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, network: [u8; 4], prefix_bits: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - prefix_bits).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(network)) & mask
}

fn in_v6(ip: Ipv6Addr, network: [u16; 8], prefix_bits: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - prefix_bits).unwrap_or(0);
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(network)) & mask
}

fn classify_v4(ip: Ipv4Addr) -> Option<Class> {
    // AWS/GCP/Azure, AWS ECS task credentials, EKS pod identity, Alibaba Cloud.
    const METADATA: [[u8; 4]; 4] =
        [[169, 254, 169, 254], [169, 254, 170, 2], [169, 254, 170, 23], [100, 100, 100, 200]];
    let class = if METADATA.contains(&ip.octets()) {
        Class::CloudMetadata
    } else if ip.is_unspecified() {
        Class::Unspecified
    } else if ip.is_loopback() {
        Class::Loopback
    } else if ip.is_private() {
        Class::Private
    } else if ip.is_link_local() {
        Class::LinkLocal
    } else if in_v4(ip, [100, 64, 0, 0], 10) {
        Class::SharedCgnat
    } else if ip.is_broadcast() {
        Class::Broadcast
    } else if ip.is_multicast() {
        Class::Multicast
    } else if ip.is_documentation() {
        Class::Documentation
    } else if in_v4(ip, [198, 18, 0, 0], 15) {
        Class::Benchmarking
    } else if in_v4(ip, [0, 0, 0, 0], 8)
        || in_v4(ip, [192, 0, 0, 0], 24)
        || in_v4(ip, [192, 88, 99, 0], 24)
        || in_v4(ip, [240, 0, 0, 0], 4)
    {
        Class::Reserved
    } else {
        return None;
    };
    Some(class)
}

fn classify_v6(ip: Ipv6Addr) -> Option<Class> {
    // AWS's IPv6 instance metadata and EKS pod identity; both sit inside fc00::/7.
    const METADATA: [Ipv6Addr; 2] =
        [Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254), Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)];
    let embedded_v4 = |bits: u128| Ipv4Addr::from((bits & u128::from(u32::MAX)) as u32);
    let bits = u128::from(ip);
    let class = if METADATA.contains(&ip) {
        Class::CloudMetadata
    } else if ip.is_unspecified() {
        Class::Unspecified
    } else if ip.is_loopback() {
        Class::Loopback
    } else if let Some(v4) = ip.to_ipv4_mapped() {
        // ::ffff:a.b.c.d reaches the IPv4 address itself, so it is judged as that address.
        return classify_v4(v4);
    } else if in_v6(ip, [0, 0, 0, 0, 0, 0, 0, 0], 96) {
        // IPv4-compatible (::a.b.c.d) is deprecated: reserved even when the IPv4 part is public.
        return classify_v4(embedded_v4(bits)).or(Some(Class::Reserved));
    } else if in_v6(ip, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96) {
        // NAT64 (64:ff9b::a.b.c.d): the gateway reaches the embedded IPv4 address.
        return classify_v4(embedded_v4(bits));
    } else if in_v6(ip, [0x2002, 0, 0, 0, 0, 0, 0, 0], 16) {
        // 6to4: the IPv4 address sits in bits 16-48.
        return classify_v4(embedded_v4(bits >> 80));
    } else if ip.is_multicast() {
        Class::Multicast
    } else if ip.is_unique_local() || in_v6(ip, [0xfec0, 0, 0, 0, 0, 0, 0, 0], 10) {
        Class::Private
    } else if ip.is_unicast_link_local() {
        Class::LinkLocal
    } else if in_v6(ip, [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32) || in_v6(ip, [0x3fff, 0, 0, 0, 0, 0, 0, 0], 20) {
        Class::Documentation
    } else if in_v6(ip, [0x2001, 0x2, 0, 0, 0, 0, 0, 0], 48) {
        Class::Benchmarking
    } else if in_v6(ip, [0x64, 0xff9b, 0x1, 0, 0, 0, 0, 0], 48) {
        Class::Private
    } else if in_v6(ip, [0x100, 0, 0, 0, 0, 0, 0, 0], 64) || in_v6(ip, [0x2001, 0, 0, 0, 0, 0, 0, 0], 32) {
        // Discard-only, and Teredo (which hides an IPv4 address the relay would reach).
        Class::Reserved
    } else {
        return None;
    };
    Some(class)
}

#[cfg(test)]
mod tests;
