//! URL handling of the `rabbitmq` scaler: Go's `url.QueryEscape`, the management API URLs
//! KEDA builds, and removing credentials from anything shown to users.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::secret::Secret;

/// Go's `url.QueryEscape`: everything but `A-Z a-z 0-9 - _ . ~` percent-encoded, space as `+`.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Go's `url.QueryEscape`.
pub fn query_escape(s: &str) -> String {
    utf8_percent_encode(s, QUERY)
        .to_string()
        .replace("%20", "+")
}

/// Splits what follows a URL's `scheme://` into its user info (without the `@`) and the rest.
///
/// The user info ends at the **last** `@` before the end of the URL (whitespace or the end of
/// the text), not at the first `/`: a password with an unencoded `/`, `?` or `#`
/// (`amqp://user:pa/ss@host/vh`) stays whole. A path or query with an unencoded `@` is taken as
/// user info too, which hides more than needed but never shows a password. The management URLs
/// this scaler builds encode `@` in queue names.
pub fn split_user_info(after_scheme: &str) -> (Option<&str>, &str) {
    let url_end = after_scheme
        .find(char::is_whitespace)
        .unwrap_or(after_scheme.len());
    match after_scheme[..url_end].rfind('@') {
        Some(at) => (Some(&after_scheme[..at]), &after_scheme[at + 1..]),
        None => (None, after_scheme),
    }
}

/// The password of `url`'s user info as written (still percent-encoded), found as
/// [`split_user_info`] does, so also when the URL does not parse because the password holds
/// an unencoded `/`.
pub fn raw_password(url: &str) -> Option<&str> {
    let (_, after_scheme) = url.split_once("://")?;
    let (user_info, _) = split_user_info(after_scheme);
    user_info?.split_once(':').map(|(_, password)| password)
}

/// Replaces the user info of every `scheme://user:password@` in `text` with
/// `user:password@` (KEDA's anonymization), and every occurrence of the given secrets with
/// `***`, so an error never carries credentials.
pub fn anonymize(text: &str, secrets: &[&str]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        match split_user_info(tail) {
            (Some(_), after) => {
                out.push_str("user:password@");
                rest = after;
            }
            (None, _) => rest = tail,
        }
    }
    out.push_str(rest);
    secrets
        .iter()
        .filter(|s| s.len() >= 3)
        .fold(out, |acc, s| acc.replace(s, "***"))
}

/// The management API request of a trigger: the URL without credentials, and the basic-auth
/// credentials (from `username`/`password` or the URL's user info).
#[derive(Clone, Debug, PartialEq)]
pub struct ManagementRequest {
    /// The URL to GET; never contains credentials.
    pub url: String,
    /// Basic auth.
    pub credentials: Option<(String, Secret)>,
}

/// Builds the management API URL as KEDA does (`getVhostAndPathFromURL` and
/// `getQueueInfoViaHTTP`): the last path segment of `host` is the vhost (`/` or nothing means
/// the default vhost `%2F`), unless `vhostName` overrides it; what comes before it is a path
/// prefix kept in front of `/api`.
///
/// # Errors
/// `host` is not a URL (the message does not repeat it).
pub fn management_request(
    host: &str,
    vhost_name: Option<&str>,
    credentials: Option<&(String, Secret)>,
    queue_name: &str,
    regex_page_size: Option<i64>,
) -> Result<ManagementRequest, String> {
    let mut url =
        url::Url::parse(host).map_err(|e| format!("parameter \"host\" is not a valid URL: {e}"))?;
    let from_url = (!url.username().is_empty()).then(|| {
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        (
            decode(url.username()),
            Secret::new(decode(url.password().unwrap_or(""))),
        )
    });
    let credentials = credentials.cloned().or(from_url);
    // Both calls only fail for URLs that cannot have credentials, which `parse` with a
    // http(s) scheme never produces; a failure leaves the user info in place and the
    // request fails later with a message that is anonymized anyway.
    let _ = url.set_username("");
    let _ = url.set_password(None);

    let path = url.path().to_string();
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.last().copied().unwrap_or("");
    let prefix = segments[..segments.len().saturating_sub(1)]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("/");
    let vhost = match vhost_name {
        Some(name) => query_escape(name),
        None if last.is_empty() => "%2F".to_string(),
        None => last.to_string(),
    };
    let vhost = if vhost.is_empty() {
        "%2F".to_string()
    } else {
        vhost
    };
    let mut base = format!(
        "{}://{}",
        url.scheme(),
        url.host_str().map(bracket_ipv6).unwrap_or_default()
    );
    if let Some(port) = url.port() {
        base.push_str(&format!(":{port}"));
    }
    if !prefix.is_empty() {
        base.push('/');
        base.push_str(&prefix);
    }
    let url = match regex_page_size {
        Some(page_size) => format!(
            "{base}/api/queues/{vhost}?page=1&use_regex=true&pagination=false&name={}&page_size={page_size}",
            query_escape(queue_name)
        ),
        None => format!("{base}/api/queues/{vhost}/{}", query_escape(queue_name)),
    };
    Ok(ManagementRequest { url, credentials })
}

fn bracket_ipv6(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_escape_matches_go() {
        assert_eq!(query_escape("a b/c.d~e_f-g"), "a+b%2Fc.d~e_f-g");
        assert_eq!(query_escape("^q-.*$"), "%5Eq-.%2A%24");
        assert_eq!(query_escape("ü"), "%C3%BC");
    }

    #[test]
    fn anonymize_removes_user_info_and_known_secrets() {
        assert_eq!(
            anonymize(
                "dial amqp://guest:hunter2@rabbit:5672/vh failed; also http://a@b/x and hunter2",
                &["hunter2"]
            ),
            "dial amqp://user:password@rabbit:5672/vh failed; also http://user:password@b/x and ***"
        );
        assert_eq!(anonymize("no url here", &[]), "no url here");
    }

    #[test]
    fn a_slash_in_the_password_does_not_end_the_user_info() {
        // An unencoded `/`, `?` or `#` in the password: before, the user info was taken to end
        // there, so no `@` was found and the whole password was shown.
        for (text, password) in [
            ("dial amqp://guest:xq/zv@rabbit:5672/vh failed", "xq/zv"),
            ("dial amqp://guest:xx/yy/zz@rabbit/vh failed", "xx/yy/zz"),
            (
                "GET http://guest:qq?rr#kk@rabbit:15672/api failed",
                "qq?rr#kk",
            ),
            ("dial amqp://guest:pp@tt/uu@rabbit failed", "pp@tt/uu"),
        ] {
            let shown = anonymize(text, &[]);
            for fragment in password.split(['/', '?', '#', '@']) {
                assert!(!shown.contains(fragment), "{text} -> {shown}");
            }
            assert!(shown.contains("user:password@rabbit"), "{text} -> {shown}");
            assert!(shown.ends_with(" failed"), "{text} -> {shown}");
            let url = text.split_whitespace().nth(1).unwrap();
            assert_eq!(raw_password(url), Some(password), "{text}");
        }
        assert_eq!(
            anonymize("amqp://u:p/w@h/vh and then amqp://h2/vh", &[]),
            "amqp://user:password@h/vh and then amqp://h2/vh"
        );
        assert_eq!(raw_password("amqp://h/vh"), None);
        assert_eq!(raw_password("amqp://user@h/vh"), None);
    }

    #[test]
    fn management_urls_follow_keda() {
        // (host, vhostName, queue, expected URL, expected user)
        let rows = [
            (
                "http://guest:pw@rabbit:15672",
                None,
                "q",
                "http://rabbit:15672/api/queues/%2F/q",
                Some("guest"),
            ),
            (
                "http://guest:pw@rabbit:15672/",
                None,
                "q",
                "http://rabbit:15672/api/queues/%2F/q",
                Some("guest"),
            ),
            (
                "https://rabbit/myvhost",
                None,
                "a/b",
                "https://rabbit/api/queues/myvhost/a%2Fb",
                None,
            ),
            (
                "http://rabbit:15672/prefix/path/vh",
                None,
                "q",
                "http://rabbit:15672/prefix/path/api/queues/vh/q",
                None,
            ),
            (
                "http://rabbit:15672/vh",
                Some("other/vh"),
                "q",
                "http://rabbit:15672/api/queues/other%2Fvh/q",
                None,
            ),
            (
                "http://rabbit:15672/%2F",
                None,
                "q",
                "http://rabbit:15672/api/queues/%2F/q",
                None,
            ),
        ];
        for (host, vhost, queue, expected, user) in rows {
            let r = management_request(host, vhost, None, queue, None).unwrap();
            assert_eq!(r.url, expected, "{host}");
            assert_eq!(r.credentials.as_ref().map(|c| c.0.as_str()), user, "{host}");
        }
    }

    #[test]
    fn regex_urls_carry_the_page_size_and_auth_params_win_over_the_url() {
        let auth = ("admin".to_string(), Secret::new("s"));
        let r = management_request(
            "http://g:p@h:15672/",
            None,
            Some(&auth),
            "^jobs-.*",
            Some(50),
        )
        .unwrap();
        assert_eq!(
            r.url,
            "http://h:15672/api/queues/%2F?page=1&use_regex=true&pagination=false&name=%5Ejobs-.%2A&page_size=50"
        );
        assert_eq!(r.credentials.map(|c| c.0), Some("admin".to_string()));
    }
}
