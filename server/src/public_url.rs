//! Where clients reach this server, for the absolute URLs it hands out (`mcp_url` when an endpoint
//! is vended, `ingest_url` when a webhook is registered). Behind a TLS terminator or a proxy that
//! adds a path prefix, the address the server sees is not the one clients use, so the operator
//! names it (`switchboard serve --public-url`, `SWITCHBOARD_PUBLIC_URL`). Without it the URLs are
//! `http://` plus the request's Host header, as they always were.
//!
//! Must never: hand out a URL with a scheme other than http or https, credentials, a query or a
//! fragment (every path is appended to the base, so those would land in the wrong place).

use axum::http::{HeaderMap, header};
use reqwest::Url;

/// The Host used when a request carries none (HTTP/1.0 clients).
const HOST_FALLBACK: &str = "127.0.0.1:8080";

/// The configured public base URL, or none (derive from the request).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublicUrl {
    /// `scheme://host[:port][/prefix]`, never ending in `/`.
    base: Option<String>,
}

impl PublicUrl {
    /// No configured base: URLs follow the request's Host header over plain http.
    pub fn from_request() -> PublicUrl {
        PublicUrl { base: None }
    }

    /// Checks an operator-given base URL; the message names what is wrong, the caller names the
    /// setting (clap does, for `--public-url`).
    pub fn parse(raw: &str) -> Result<PublicUrl, String> {
        let url = Url::parse(raw.trim())
            .map_err(|e| format!("{raw:?} is not a URL ({e}); e.g. https://switchboard.example.com"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{raw:?} must start with http:// or https://"));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(format!("{raw:?} has no host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!("{raw:?} must not carry a user name or password"));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!("{raw:?} must not carry a query (?) or fragment (#): paths are appended to it"));
        }
        let base = url.as_str().trim_end_matches('/').to_string();
        assert!(base.starts_with("http://") || base.starts_with("https://"));
        Ok(PublicUrl { base: Some(base) })
    }

    /// The configured base, if any (for the start-up log line).
    pub fn configured(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// The absolute URL of `path` (which starts with `/`) as clients should use it.
    pub fn absolute(&self, headers: &HeaderMap, path: &str) -> String {
        assert!(path.starts_with('/'), "paths are absolute: {path}");
        match &self.base {
            Some(base) => format!("{base}{path}"),
            None => {
                let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or(HOST_FALLBACK);
                format!("http://{host}{path}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, value.parse().unwrap());
        headers
    }

    #[test]
    fn without_a_configured_base_urls_follow_the_host_header_over_http() {
        let public = PublicUrl::from_request();
        assert_eq!(public.absolute(&host("10.0.0.5:9000"), "/mcp/bot"), "http://10.0.0.5:9000/mcp/bot");
        assert_eq!(public.absolute(&HeaderMap::new(), "/ingest/wh_1"), "http://127.0.0.1:8080/ingest/wh_1");
    }

    #[test]
    fn a_configured_base_wins_over_the_host_header_and_keeps_its_path_prefix() {
        for raw in ["https://switchboard.example.com/base", "https://switchboard.example.com/base/"] {
            let public = PublicUrl::parse(raw).unwrap();
            let url = public.absolute(&host("127.0.0.1:8080"), "/mcp/bot");
            assert_eq!(url, "https://switchboard.example.com/base/mcp/bot", "{raw}");
        }
        let bare = PublicUrl::parse("http://sb.internal:8443").unwrap();
        assert_eq!(bare.absolute(&HeaderMap::new(), "/ingest/wh_1"), "http://sb.internal:8443/ingest/wh_1");
    }

    #[test]
    fn a_base_that_cannot_prefix_paths_is_refused() {
        for (raw, problem) in [
            ("switchboard.example.com", "not a URL"),
            ("ftp://switchboard.example.com", "http:// or https://"),
            ("https://user:pw@switchboard.example.com", "user name or password"),
            ("https://switchboard.example.com/?x=1", "query"),
            ("https://switchboard.example.com/#top", "fragment"),
        ] {
            let message = PublicUrl::parse(raw).unwrap_err();
            assert!(message.contains(problem), "{raw}: {message}");
        }
    }
}
