//! AWS Signature Version 4 (`AWS4-HMAC-SHA256`): the headers that make AWS (or a local
//! emulator) accept a request signed with an access key. Pure functions, tested against the
//! examples AWS publishes in its Signature Version 4 documentation and test suite.
//!
//! Only what the aws-* scalers send is covered: requests to services other than S3 (each path
//! segment URI-encoded once more), a payload hashed in full, the `Authorization` header form.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::secret::Secret;

/// The algorithm name in the `Authorization` header and the string to sign.
pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// An access key, and the session token of temporary credentials.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Credentials {
    /// `AKIA...` or `ASIA...`: not secret, it names the key.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: Secret,
    /// The session token of temporary credentials (STS), sent as `X-Amz-Security-Token`.
    pub session_token: Option<Secret>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// What a signature is scoped to: the region and the signing name of the service (`sqs`,
/// `monitoring` for CloudWatch, `dynamodb`, `sts`).
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    /// `us-east-1`.
    pub region: &'a str,
    /// The service's signing name.
    pub service: &'a str,
}

/// One request to sign. `headers` are the request's own headers that are signed besides
/// `host` (taken from `url`), `x-amz-date` and `x-amz-security-token` (added by [`sign`]).
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// `GET`, `POST`.
    pub method: &'a str,
    /// The full URL, query included.
    pub url: &'a url::Url,
    /// Further headers to sign, e.g. `content-type` and `x-amz-target`.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body.
    pub body: &'a [u8],
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length, so `new_from_slice` cannot fail; an empty output would
    // only make the signature wrong, never panic.
    match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mut mac) => {
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// AWS' URI encoding: every byte except `A-Z a-z 0-9 - _ . ~` as `%XX` (upper case).
pub fn uri_encode(input: &str) -> String {
    let mut out = String::with_capacity(input.len());
    for b in input.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The `host` header value as the HTTP client sends it: the host, with the port when it is not
/// the scheme's default.
pub fn host_header(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// `20150830T123600Z`.
pub fn amz_date(at: jiff::Timestamp) -> String {
    at.strftime("%Y%m%dT%H%M%SZ").to_string()
}

fn canonical_uri(url: &url::Url) -> String {
    let path = url.path();
    if path.is_empty() {
        return "/".to_string();
    }
    // `url` keeps the path percent-encoded once; services other than S3 sign each segment
    // encoded once more.
    path.split('/')
        .map(uri_encode)
        .collect::<Vec<_>>()
        .join("/")
}

fn canonical_query(url: &url::Url) -> String {
    let mut pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (uri_encode(&k), uri_encode(&v)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// A header value as signed: trimmed, inner runs of spaces collapsed to one.
fn canonical_value(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The canonical request and the signed-headers list of `request` with these extra signed
/// headers (already lower case).
pub fn canonical_request(request: &Request<'_>, extra: &[(&str, &str)]) -> (String, String) {
    let host = host_header(request.url);
    let mut headers: Vec<(String, String)> = request
        .headers
        .iter()
        .chain(extra)
        .map(|(k, v)| (k.to_ascii_lowercase(), canonical_value(v)))
        .collect();
    headers.push(("host".to_string(), host));
    headers.sort();
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed_headers = headers
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let canonical = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        request.method,
        canonical_uri(request.url),
        canonical_query(request.url),
        canonical_headers,
        signed_headers,
        sha256_hex(request.body)
    );
    (canonical, signed_headers)
}

/// `<date>/<region>/<service>/aws4_request`.
pub fn credential_scope(at: jiff::Timestamp, scope: Scope<'_>) -> String {
    format!(
        "{}/{}/{}/aws4_request",
        at.strftime("%Y%m%d"),
        scope.region,
        scope.service
    )
}

/// The string to sign for a canonical request.
pub fn string_to_sign(at: jiff::Timestamp, scope: Scope<'_>, canonical_request: &str) -> String {
    format!(
        "{ALGORITHM}\n{}\n{}\n{}",
        amz_date(at),
        credential_scope(at, scope),
        sha256_hex(canonical_request.as_bytes())
    )
}

/// The key derived from the secret for one day, region and service.
pub fn signing_key(secret: &str, at: jiff::Timestamp, scope: Scope<'_>) -> Vec<u8> {
    let date = at.strftime("%Y%m%d").to_string();
    let k_date = hmac(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac(&k_date, scope.region.as_bytes());
    let k_service = hmac(&k_region, scope.service.as_bytes());
    hmac(&k_service, b"aws4_request")
}

/// The headers to add to `request` so that it is signed with `credentials` at `at`:
/// `x-amz-date`, `x-amz-security-token` (temporary credentials only) and `authorization`.
pub fn sign(
    credentials: &Credentials,
    scope: Scope<'_>,
    at: jiff::Timestamp,
    request: &Request<'_>,
) -> Vec<(&'static str, String)> {
    let date = amz_date(at);
    let mut added = vec![("x-amz-date", date)];
    if let Some(token) = &credentials.session_token {
        added.push(("x-amz-security-token", token.expose().to_string()));
    }
    let extra: Vec<(&str, &str)> = added.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (canonical, signed_headers) = canonical_request(request, &extra);
    let to_sign = string_to_sign(at, scope, &canonical);
    let key = signing_key(credentials.secret_access_key.expose(), at, scope);
    let signature = hex(&hmac(&key, to_sign.as_bytes()));
    added.push((
        "authorization",
        format!(
            "{ALGORITHM} Credential={}/{}, SignedHeaders={signed_headers}, Signature={signature}",
            credentials.access_key_id,
            credential_scope(at, scope)
        ),
    ));
    added
}

/// `url` presigned with `credentials` at `at` for `expires_seconds` (AWS' query-string
/// authentication): `X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`,
/// `X-Amz-SignedHeaders` (`host` only), `X-Amz-Security-Token` (temporary credentials) and
/// `X-Amz-Signature` are added to its query. `payload_hash` is the hex SHA-256 of the body, or
/// `UNSIGNED-PAYLOAD` where the service accepts it.
pub fn presign(
    credentials: &Credentials,
    scope: Scope<'_>,
    at: jiff::Timestamp,
    expires_seconds: u32,
    url: &url::Url,
    payload_hash: &str,
) -> url::Url {
    let mut signed = url.clone();
    {
        let mut query = signed.query_pairs_mut();
        query
            .append_pair("X-Amz-Algorithm", ALGORITHM)
            .append_pair(
                "X-Amz-Credential",
                &format!(
                    "{}/{}",
                    credentials.access_key_id,
                    credential_scope(at, scope)
                ),
            )
            .append_pair("X-Amz-Date", &amz_date(at))
            .append_pair("X-Amz-Expires", &expires_seconds.to_string())
            .append_pair("X-Amz-SignedHeaders", "host");
        if let Some(token) = &credentials.session_token {
            query.append_pair("X-Amz-Security-Token", token.expose());
        }
    }
    let canonical = format!(
        "GET\n{}\n{}\nhost:{}\n\nhost\n{payload_hash}",
        canonical_uri(&signed),
        canonical_query(&signed),
        host_header(&signed)
    );
    let to_sign = string_to_sign(at, scope, &canonical);
    let key = signing_key(credentials.secret_access_key.expose(), at, scope);
    let signature = hex(&hmac(&key, to_sign.as_bytes()));
    signed
        .query_pairs_mut()
        .append_pair("X-Amz-Signature", &signature);
    signed
}

#[cfg(test)]
mod tests {
    use super::*;

    // The example credentials of the AWS Signature Version 4 documentation and test suite.
    fn example() -> Credentials {
        Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            session_token: None,
        }
    }

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_documented_signing_key_derivation() {
        // "Examples of how to derive a signing key": 20120215, us-east-1, iam.
        let key = signing_key(
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            at("2012-02-15T00:00:00Z"),
            Scope {
                region: "us-east-1",
                service: "iam",
            },
        );
        assert_eq!(
            hex(&key),
            "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"
        );
    }

    #[test]
    fn the_documented_iam_list_users_request() {
        // The worked example of the signing documentation: GET ListUsers on IAM.
        let url = url::Url::parse("https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08")
            .unwrap();
        let request = Request {
            method: "GET",
            url: &url,
            headers: &[(
                "Content-Type",
                "application/x-www-form-urlencoded; charset=utf-8",
            )],
            body: b"",
        };
        let when = at("2015-08-30T12:36:00Z");
        let scope = Scope {
            region: "us-east-1",
            service: "iam",
        };
        let (canonical, signed) = canonical_request(&request, &[("x-amz-date", &amz_date(when))]);
        assert_eq!(
            canonical,
            "GET\n/\nAction=ListUsers&Version=2010-05-08\n\
             content-type:application/x-www-form-urlencoded; charset=utf-8\n\
             host:iam.amazonaws.com\nx-amz-date:20150830T123600Z\n\n\
             content-type;host;x-amz-date\n\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(signed, "content-type;host;x-amz-date");
        assert_eq!(
            sha256_hex(canonical.as_bytes()),
            "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59"
        );
        assert_eq!(
            string_to_sign(when, scope, &canonical),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/iam/aws4_request\n\
             f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59"
        );
        let headers = sign(&example(), scope, when, &request);
        assert_eq!(
            headers,
            vec![
                ("x-amz-date", "20150830T123600Z".to_string()),
                (
                    "authorization",
                    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, \
                     SignedHeaders=content-type;host;x-amz-date, \
                     Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
                        .to_string()
                ),
            ]
        );
    }

    #[test]
    fn the_test_suite_vanilla_get_and_post() {
        // aws-sig-v4-test-suite: get-vanilla and post-vanilla.
        let url = url::Url::parse("https://example.amazonaws.com/").unwrap();
        let scope = Scope {
            region: "us-east-1",
            service: "service",
        };
        let when = at("2015-08-30T12:36:00Z");
        for (method, signature) in [
            (
                "GET",
                "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
            ),
            (
                "POST",
                "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
            ),
        ] {
            let request = Request {
                method,
                url: &url,
                headers: &[],
                body: b"",
            };
            let headers = sign(&example(), scope, when, &request);
            let authorization = &headers[1].1;
            assert!(
                authorization.ends_with(&format!(
                    "SignedHeaders=host;x-amz-date, Signature={signature}"
                )),
                "{method}: {authorization}"
            );
        }
    }

    #[test]
    fn temporary_credentials_sign_their_session_token() {
        let url = url::Url::parse("http://127.0.0.1:5000/").unwrap();
        let credentials = Credentials {
            session_token: Some(Secret::new("token-1")),
            ..example()
        };
        let request = Request {
            method: "POST",
            url: &url,
            headers: &[("X-Amz-Target", "AmazonSQS.GetQueueAttributes")],
            body: b"{}",
        };
        let headers = sign(
            &credentials,
            Scope {
                region: "eu-west-1",
                service: "sqs",
            },
            at("2024-01-02T03:04:05Z"),
            &request,
        );
        assert_eq!(headers[1], ("x-amz-security-token", "token-1".to_string()));
        assert!(
            headers[2]
                .1
                .contains("SignedHeaders=host;x-amz-date;x-amz-security-token;x-amz-target"),
            "{}",
            headers[2].1
        );
        // The port is part of the signed host, as the client sends it.
        let (canonical, _) = canonical_request(&request, &[]);
        assert!(canonical.contains("\nhost:127.0.0.1:5000\n"), "{canonical}");
        // The secret never shows in Debug.
        assert!(!format!("{credentials:?}").contains("wJalr"));
    }

    #[test]
    fn paths_and_queries_are_encoded_as_aws_signs_them() {
        let url = url::Url::parse("https://h/a b/c%2Fd?b=2&a=x y&a=1").unwrap();
        assert_eq!(canonical_uri(&url), "/a%2520b/c%252Fd");
        assert_eq!(canonical_query(&url), "a=1&a=x%20y&b=2");
        assert_eq!(uri_encode("~a-Z_0.9/+="), "~a-Z_0.9%2F%2B%3D");
        assert_eq!(canonical_value("  a   b "), "a b");
    }
    #[test]
    fn the_documented_presigned_url() {
        // "Authenticating Requests: Using Query Parameters (AWS Signature Version 4)", the S3
        // example: GET /test.txt, expires 86400, UNSIGNED-PAYLOAD.
        let credentials = Credentials {
            access_key_id: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            session_token: None,
        };
        let url = url::Url::parse("https://examplebucket.s3.amazonaws.com/test.txt").unwrap();
        let signed = presign(
            &credentials,
            Scope {
                region: "us-east-1",
                service: "s3",
            },
            at("2013-05-24T00:00:00Z"),
            86400,
            &url,
            "UNSIGNED-PAYLOAD",
        );
        assert_eq!(
            signed
                .query_pairs()
                .find(|(k, _)| k == "X-Amz-Signature")
                .map(|(_, v)| v.into_owned()),
            Some("aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404".to_string())
        );
        assert_eq!(
            canonical_query(&signed),
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&\
             X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&\
             X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&\
             X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404&\
             X-Amz-SignedHeaders=host"
        );
    }
}
