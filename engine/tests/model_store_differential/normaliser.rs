//! Makes two stores' answers comparable: ids numbered by first appearance, slugs masked.

use std::collections::BTreeMap;
use std::fmt::Debug;

pub(crate) const ID_PREFIXES: [&str; 7] = ["td", "ep", "wh", "hu", "tm", "ap", "tk"];
/// `xx_` and 32 lowercase hex digits: every generated id, on both stores.
pub(crate) const ID_LENGTH: usize = 35;

/// Numbers each store's ids by first appearance (per kind) and masks its random slugs, so two
/// stores' answers compare equal exactly when they agree up to the choice of ids.
#[derive(Default)]
pub(crate) struct Normaliser {
    pub(crate) seen: BTreeMap<&'static str, Vec<String>>,
    pub(crate) slugs: Vec<(String, String)>,
}

impl Normaliser {
    pub(crate) fn of<T: Debug>(&mut self, value: &T) -> String {
        self.normalise(&format!("{value:?}"))
    }

    pub(crate) fn normalise(&mut self, text: &str) -> String {
        let mut text = text.to_string();
        for (slug, label) in &self.slugs {
            text = text.replace(slug.as_str(), label);
        }
        let bytes = text.as_bytes();
        let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let candidate = bytes
                .get(i..i + ID_LENGTH)
                .filter(|c| c[2] == b'_' && c[3..].iter().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)));
            let prefix = candidate.and_then(|c| ID_PREFIXES.iter().find(|p| p.as_bytes() == &c[..2]));
            match (candidate, prefix) {
                (Some(id), Some(prefix)) => {
                    let id = String::from_utf8_lossy(id).into_owned();
                    let seen = self.seen.entry(prefix).or_default();
                    let n = seen.iter().position(|s| s == &id).unwrap_or_else(|| {
                        seen.push(id);
                        seen.len() - 1
                    });
                    out.extend_from_slice(format!("<{prefix}#{n}>").as_bytes());
                    i += ID_LENGTH;
                }
                _ => {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    pub(crate) fn count(&self, prefix: &str) -> usize {
        self.seen.get(prefix).map_or(0, Vec::len)
    }

    pub(crate) fn nth(&self, prefix: &str, index: usize) -> Option<String> {
        self.seen.get(prefix)?.get(index).cloned()
    }

    pub(crate) fn index(&self, prefix: &str, id: &str) -> Option<usize> {
        self.seen.get(prefix)?.iter().position(|s| s == id)
    }
}
