//! Azure Storage Shared Key authorization (`Authorization: SharedKey <account>:<signature>`),
//! the scheme of the Blob and Queue services from version 2009-09-19 on: an HMAC-SHA256, keyed
//! with the decoded account key, of a string built from the request's method, standard headers,
//! `x-ms-*` headers and resource. Pure functions; the rules are those of Microsoft's "Authorize
//! with Shared Key" page, and Azurite (the Azure Storage emulator) checks every signature in the
//! tests.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The standard headers of the string to sign, in its order.
const STANDARD_HEADERS: [&str; 11] = [
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
];

/// The string to sign of a request: `method`, the standard headers (empty lines for those
/// absent; a `content-length` of `0` counts as absent, as from version 2015-02-21 on), the
/// canonicalized `x-ms-*` headers and the canonicalized resource (`/<account><path>`, then each
/// query parameter as `\n<name>:<values>`, names lower-cased and sorted, values decoded, sorted
/// and joined with commas).
///
/// `headers` are the request's headers; names are compared without regard to case.
pub fn string_to_sign(
    method: &str,
    headers: &[(&str, &str)],
    account: &str,
    url: &url::Url,
) -> String {
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map_or("", |(_, v)| *v)
    };
    let mut out = String::with_capacity(256);
    out.push_str(method);
    out.push('\n');
    for name in STANDARD_HEADERS {
        let value = header(name);
        if !(name == "content-length" && value == "0") {
            out.push_str(value);
        }
        out.push('\n');
    }
    // Canonicalized headers: x-ms-* names lower-cased and sorted, whitespace in values folded.
    let mut ms: Vec<(String, String)> = headers
        .iter()
        .filter(|(n, _)| n.to_ascii_lowercase().starts_with("x-ms-"))
        .map(|(n, v)| {
            let folded: Vec<&str> = v.split_whitespace().collect();
            (n.trim().to_ascii_lowercase(), folded.join(" "))
        })
        .collect();
    ms.sort();
    for (name, value) in ms {
        out.push_str(&name);
        out.push(':');
        out.push_str(&value);
        out.push('\n');
    }
    // Canonicalized resource.
    out.push('/');
    out.push_str(account);
    let path = url.path();
    out.push_str(if path.is_empty() { "/" } else { path });
    let mut params: Vec<(String, Vec<String>)> = Vec::new();
    for (name, value) in url.query_pairs() {
        let name = name.to_ascii_lowercase();
        match params.iter_mut().find(|(n, _)| *n == name) {
            Some((_, values)) => values.push(value.into_owned()),
            None => params.push((name, vec![value.into_owned()])),
        }
    }
    params.sort();
    for (name, mut values) in params {
        values.sort();
        out.push('\n');
        out.push_str(&name);
        out.push(':');
        out.push_str(&values.join(","));
    }
    out
}

/// Base64 of the HMAC-SHA256 of `string_to_sign` keyed with `key` (the decoded account key).
pub fn signature(key: &[u8], string_to_sign: &str) -> String {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let mut mac = match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => return String::new(),
    };
    mac.update(string_to_sign.as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

/// The `Authorization` header value of a request: `SharedKey <account>:<signature>`.
pub fn authorization(
    account: &str,
    key: &[u8],
    method: &str,
    headers: &[(&str, &str)],
    url: &url::Url,
) -> String {
    let to_sign = string_to_sign(method, headers, account, url);
    format!("SharedKey {account}:{}", signature(key, &to_sign))
}

/// The decoded bytes of a base64 account key, or `None` when it is not base64.
pub fn decode_key(key: &str) -> Option<Vec<u8>> {
    STANDARD.decode(key.trim()).ok().filter(|k| !k.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Azurite's well-known development account key (public, documented by Microsoft).
    const DEV_KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    #[test]
    fn the_string_to_sign_follows_the_shared_key_rules() {
        let url = url::Url::parse(
            "http://127.0.0.1:10000/devstoreaccount1/jobs?restype=container&comp=list&prefix=in%2Fbox%2F&delimiter=%2F&include=a&include=B",
        )
        .unwrap();
        let headers = [
            ("x-ms-version", "2021-12-02"),
            ("X-MS-Date", "Fri, 27 Nov 2026 18:41:25 GMT"),
            ("x-ms-client-request-id", "  a   b "),
            ("Content-Length", "0"),
            ("content-type", "application/xml"),
        ];
        let expected = "GET\n\n\n\n\napplication/xml\n\n\n\n\n\n\n\
            x-ms-client-request-id:a b\n\
            x-ms-date:Fri, 27 Nov 2026 18:41:25 GMT\n\
            x-ms-version:2021-12-02\n\
            /devstoreaccount1/devstoreaccount1/jobs\n\
            comp:list\n\
            delimiter:/\n\
            include:B,a\n\
            prefix:in/box/\n\
            restype:container";
        assert_eq!(
            string_to_sign("GET", &headers, "devstoreaccount1", &url),
            expected
        );
        let url = url::Url::parse("https://acct.queue.core.windows.net").unwrap();
        assert_eq!(
            string_to_sign("PUT", &[("content-length", "12")], "acct", &url),
            "PUT\n\n\n12\n\n\n\n\n\n\n\n\n/acct/"
        );
    }

    #[test]
    fn the_signature_matches_a_vector_from_microsofts_own_implementation() {
        // Computed with Azurite's `computeHMACSHA256` (Node's crypto: HMAC-SHA256 keyed with the
        // base64-decoded key, base64 digest), the routine Azurite checks SharedKey requests with.
        let to_sign = "GET\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:Fri, 27 Nov 2026 18:41:25 GMT\nx-ms-version:2021-12-02\n/devstoreaccount1/devstoreaccount1/jobs\ncomp:metadata";
        let key = decode_key(DEV_KEY).unwrap();
        assert_eq!(signature(&key, to_sign), AZURITE_SIGNATURE);
        let url =
            url::Url::parse("http://127.0.0.1:10001/devstoreaccount1/jobs?comp=metadata").unwrap();
        assert_eq!(
            authorization(
                "devstoreaccount1",
                &key,
                "GET",
                &[
                    ("x-ms-version", "2021-12-02"),
                    ("x-ms-date", "Fri, 27 Nov 2026 18:41:25 GMT"),
                ],
                &url,
            ),
            format!("SharedKey devstoreaccount1:{AZURITE_SIGNATURE}")
        );
    }

    const AZURITE_SIGNATURE: &str = "hgS6Fq/8NGlFwl9fN1m9yKmBN+WOY+MM/cNHlLz+pLE=";

    #[test]
    fn keys_must_be_base64() {
        assert_eq!(decode_key("AAEC").as_deref(), Some(&[0u8, 1, 2][..]));
        assert_eq!(decode_key("not base64!"), None);
        assert_eq!(decode_key(""), None);
    }
}
