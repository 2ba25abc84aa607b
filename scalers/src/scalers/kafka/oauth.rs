//! SASL/OAUTHBEARER tokens for the `kafka` trigger (`sasl: oauthbearer`), fetched by keda-rs
//! itself and handed to librdkafka through its token-refresh event, so librdkafka needs no HTTP
//! client (it is built without libcurl).
//!
//! - `saslTokenProvider: bearer` (default): KEDA's `OAuthBearerTokenProvider`, the OAuth 2.0
//!   client-credentials grant at `oauthTokenEndpointUri` with `username` as client id,
//!   `password` as client secret and `scopes`, through [`crate::oauth2`] (golang.org/x/oauth2's
//!   `clientcredentials`); a new token each time librdkafka asks, its lifetime bounded for
//!   librdkafka.
//! - `saslTokenProvider: aws_msk_iam`: KEDA's `OAuthMSKTokenProvider`, the token of AWS's MSK
//!   IAM signers (aws-msk-iam-sasl-signer-go): a Signature Version 4 presigned
//!   `GET https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect` (signing name
//!   `kafka-cluster`, valid 900 s, payload hash of the empty body), with a `User-Agent` query
//!   parameter added after signing, encoded as unpadded base64url.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use std::time::Duration;

use crate::aws::client::{AwsClient, AwsClientKey, STS, Signer};
use crate::aws::sigv4::{self, Credentials, Scope};
use crate::context::Clock;
use crate::http_client::{describe_url, reqwest_client};
use crate::oauth2;
use crate::secret::Secret;

/// How long an MSK IAM token is valid (the signers' `X-Amz-Expires`).
pub const MSK_TOKEN_SECONDS: u32 = 900;
/// The lifetime given to librdkafka for a bearer token whose endpoint sent no (or a
/// non-positive) `expires_in`: x/oauth2 treats such a token as never expiring; librdkafka needs
/// an expiry, and refreshes at 80 % of it.
pub const DEFAULT_TOKEN_SECONDS: i64 = 3600;
/// The longest `expires_in` taken as is; a longer one is capped (a token is fetched again at
/// least every 80 % of a day).
pub const MAX_TOKEN_SECONDS: i64 = 86_400;
/// The signing name and host prefix of MSK's IAM authentication.
const MSK_SIGNING_NAME: &str = "kafka-cluster";
/// The `User-Agent` query parameter of the MSK token: the signers put their own name there.
const MSK_USER_AGENT: &str = concat!("keda-rs/", env!("CARGO_PKG_VERSION"));

/// Where a SASL/OAUTHBEARER token comes from: part of the cluster client's pool key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenProvider {
    /// `saslTokenProvider: bearer`: the client-credentials grant.
    Bearer(BearerSettings),
    /// `saslTokenProvider: aws_msk_iam`.
    MskIam {
        /// `awsRegion`.
        region: String,
        /// The credentials (static, the operator's, or a role assumed through STS).
        signer: Signer,
    },
}

/// The client-credentials grant of `saslTokenProvider: bearer`: `oauthTokenEndpointUri`,
/// `username` (client id), `password` (client secret), `scopes` split at commas (empty ones left
/// out), no endpoint parameters.
pub type BearerSettings = oauth2::ClientCredentials;

/// A token for librdkafka.
pub struct Token {
    /// The token.
    pub value: Secret,
    /// When it expires, in milliseconds since the Unix epoch.
    pub expires_at_ms: i64,
    /// The principal librdkafka records with it.
    pub principal: String,
}

/// Why no token could be had. Never contains the client secret, a token or a secret key.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token endpoint could not be reached or did not answer in time.
    #[error("requesting a token from oauthTokenEndpointUri {endpoint} failed: {message}")]
    Request {
        /// The endpoint, without credentials or query.
        endpoint: String,
        /// Why.
        message: String,
    },
    /// The token endpoint answered with an error.
    #[error(
        "the token endpoint (oauthTokenEndpointUri) {endpoint} answered HTTP {status}{detail}; check the client id and secret (username, password) and scopes"
    )]
    Refused {
        /// The endpoint.
        endpoint: String,
        /// The status.
        status: u16,
        /// `: <error>` of an OAuth error answer, if any.
        detail: String,
    },
    /// The answer is not a token response.
    #[error(
        "the token endpoint (oauthTokenEndpointUri) {endpoint} answered something that is not a token: {message}"
    )]
    Invalid {
        /// The endpoint.
        endpoint: String,
        /// Why.
        message: String,
    },
    /// The AWS credentials could not be had (assuming `awsRoleArn` failed).
    #[error(
        "getting the AWS credentials for the MSK IAM token (saslTokenProvider aws_msk_iam) failed: {0}"
    )]
    Aws(String),
}

/// Fetches tokens for one cluster client.
pub struct TokenSource {
    source: Source,
    http: reqwest::Client,
    clock: Clock,
}

enum Source {
    Bearer(oauth2::TokenSource),
    MskIam {
        region: String,
        signer: Signer,
        /// The STS client of `Signer::AssumeRole`.
        aws: Option<Box<AwsClient>>,
    },
}

impl TokenSource {
    /// A source for `provider`, with requests limited to `timeout`.
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(provider: TokenProvider, timeout: Duration, clock: Clock) -> Result<Self, String> {
        let http = reqwest_client(&Default::default(), timeout).map_err(|e| e.to_string())?;
        let source = match provider {
            TokenProvider::Bearer(settings) => Source::Bearer(oauth2::TokenSource::new(settings)),
            TokenProvider::MskIam { region, signer } => {
                let aws = match &signer {
                    Signer::AssumeRole { sts_endpoint, .. } => Some(Box::new(
                        AwsClient::new(AwsClientKey {
                            service: STS,
                            region: region.clone(),
                            endpoint: sts_endpoint.clone(),
                            signer: signer.clone(),
                            timeout,
                        })
                        .map_err(|e| e.to_string())?,
                    )),
                    Signer::Static(_) => None,
                };
                Source::MskIam {
                    region,
                    signer,
                    aws,
                }
            }
        };
        Ok(Self {
            source,
            http,
            clock,
        })
    }

    /// A fresh token.
    ///
    /// # Errors
    /// See [`TokenError`].
    pub async fn token(&self) -> Result<Token, TokenError> {
        match &self.source {
            Source::Bearer(bearer) => self.client_credentials(bearer).await,
            Source::MskIam {
                region,
                signer,
                aws,
            } => {
                let credentials = match (aws, signer) {
                    (Some(aws), _) => aws
                        .signing_credentials(&self.clock)
                        .await
                        .map_err(|e| TokenError::Aws(e.to_string()))?,
                    (None, Signer::Static(credentials)) => credentials.clone(),
                    (None, Signer::AssumeRole { .. }) => {
                        return Err(TokenError::Aws("no STS client".into()));
                    }
                };
                let now = self.clock.now();
                Ok(Token {
                    value: Secret::new(msk_iam_token(&credentials, region, now)),
                    expires_at_ms: now.as_millisecond() + i64::from(MSK_TOKEN_SECONDS) * 1000,
                    principal: String::new(),
                })
            }
        }
    }

    async fn client_credentials(&self, bearer: &oauth2::TokenSource) -> Result<Token, TokenError> {
        // librdkafka asks when it wants a new token (at 80 % of the last one's lifetime), so
        // the source's cached token is not reused.
        let token = bearer.new_token(&self.http).await.map_err(|e| match e {
            oauth2::TokenError::Request { url, reason } => TokenError::Request {
                endpoint: url,
                message: reason,
            },
            oauth2::TokenError::Refused {
                url, status, code, ..
            } => TokenError::Refused {
                endpoint: url,
                status: status.as_u16(),
                detail: code.map(|c| format!(": {c}")).unwrap_or_default(),
            },
            oauth2::TokenError::Answer { url, reason } => TokenError::Invalid {
                endpoint: url,
                message: reason,
            },
        })?;
        // librdkafka accepts only printable ASCII, space, tab, CR and LF in a token.
        if !token
            .access_token()
            .bytes()
            .all(|b| b.is_ascii_graphic() || matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        {
            return Err(TokenError::Invalid {
                endpoint: describe_url(&bearer.settings().token_url),
                message: "\"access_token\" has characters a SASL token cannot carry".to_string(),
            });
        }
        let seconds = match token.expires_in() {
            Some(seconds) => i64::try_from(seconds)
                .unwrap_or(MAX_TOKEN_SECONDS)
                .min(MAX_TOKEN_SECONDS),
            None => DEFAULT_TOKEN_SECONDS,
        };
        Ok(Token {
            value: Secret::new(token.access_token()),
            expires_at_ms: self.clock.now().as_millisecond() + seconds * 1000,
            principal: bearer.settings().client_id.clone(),
        })
    }
}

/// The MSK IAM token for `credentials` in `region` at `at`.
pub fn msk_iam_token(credentials: &Credentials, region: &str, at: jiff::Timestamp) -> String {
    let suffix = if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    };
    let mut url = match url::Url::parse(&format!("https://kafka.{region}.{suffix}/")) {
        Ok(url) => url,
        // The region was checked to be a region name when parsed; an empty token is refused
        // by the broker, never a panic.
        Err(_) => return String::new(),
    };
    url.query_pairs_mut()
        .append_pair("Action", "kafka-cluster:Connect");
    let empty_payload = sigv4::hex(&<sha2::Sha256 as sha2::Digest>::digest(b""));
    let mut signed = sigv4::presign(
        credentials,
        Scope {
            region,
            service: MSK_SIGNING_NAME,
        },
        at,
        MSK_TOKEN_SECONDS,
        &url,
        &empty_payload,
    );
    signed
        .query_pairs_mut()
        .append_pair("User-Agent", MSK_USER_AGENT);
    base64url(signed.as_str().as_bytes())
}

/// Unpadded base64url (RFC 4648 section 5).
pub fn base64url(data: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_has_no_padding_and_the_url_safe_alphabet() {
        // RFC 4648 section 10's vectors, padding removed.
        for (input, expected) in [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64url(input.as_bytes()), expected);
        }
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }

    fn decode(token: &str) -> String {
        const ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut bits = 0u32;
        let mut count = 0;
        let mut out = Vec::new();
        for c in token.chars() {
            let v = u32::try_from(ALPHABET.find(c).expect("base64url symbol")).expect("small");
            bits = (bits << 6) | v;
            count += 6;
            if count >= 8 {
                count -= 8;
                out.push(u8::try_from(bits >> count).expect("one byte"));
                bits &= (1 << count) - 1;
            }
        }
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn the_msk_iam_token_is_a_presigned_connect_url() {
        let credentials = Credentials {
            access_key_id: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            session_token: Some(Secret::new("session/token+1=")),
        };
        let at: jiff::Timestamp = "2024-05-06T07:08:09Z".parse().unwrap();
        let token = msk_iam_token(&credentials, "eu-west-1", at);
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{token}"
        );
        let url = url::Url::parse(&decode(&token)).expect("a URL");
        assert_eq!(url.scheme(), "https");
        assert_eq!(url.host_str(), Some("kafka.eu-west-1.amazonaws.com"));
        assert_eq!(url.path(), "/");
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let names: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "Action",
                "X-Amz-Algorithm",
                "X-Amz-Credential",
                "X-Amz-Date",
                "X-Amz-Expires",
                "X-Amz-SignedHeaders",
                "X-Amz-Security-Token",
                "X-Amz-Signature",
                "User-Agent"
            ]
        );
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .unwrap_or_default()
        };
        assert_eq!(get("Action"), "kafka-cluster:Connect");
        assert_eq!(get("X-Amz-Algorithm"), "AWS4-HMAC-SHA256");
        assert_eq!(
            get("X-Amz-Credential"),
            "AKIAIOSFODNN7EXAMPLE/20240506/eu-west-1/kafka-cluster/aws4_request"
        );
        assert_eq!(get("X-Amz-Date"), "20240506T070809Z");
        assert_eq!(get("X-Amz-Expires"), "900");
        assert_eq!(get("X-Amz-SignedHeaders"), "host");
        assert_eq!(get("X-Amz-Security-Token"), "session/token+1=");
        assert!(get("User-Agent").starts_with("keda-rs/"));
        // The signature is the one of the canonical request of the published algorithm,
        // recomputed here from its parts.
        let canonical = String::from(
            "GET\n/\nAction=kafka-cluster%3AConnect&X-Amz-Algorithm=AWS4-HMAC-SHA256&\
             X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20240506%2Feu-west-1%2Fkafka-cluster%2Faws4_request&\
             X-Amz-Date=20240506T070809Z&X-Amz-Expires=900&\
             X-Amz-Security-Token=session%2Ftoken%2B1%3D&X-Amz-SignedHeaders=host\n\
             host:kafka.eu-west-1.amazonaws.com\n\nhost\n\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        );
        let scope = Scope {
            region: "eu-west-1",
            service: "kafka-cluster",
        };
        let to_sign = sigv4::string_to_sign(at, scope, &canonical);
        let key = sigv4::signing_key("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", at, scope);
        use hmac::Mac;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
        mac.update(to_sign.as_bytes());
        assert_eq!(
            get("X-Amz-Signature"),
            sigv4::hex(&mac.finalize().into_bytes())
        );
        // China regions sign for the .com.cn host.
        let cn = decode(&msk_iam_token(&credentials, "cn-north-1", at));
        assert!(
            cn.starts_with("https://kafka.cn-north-1.amazonaws.com.cn/?"),
            "{cn}"
        );
    }
}
