//! Service Bus and Event Hubs connection strings and their shared access signature (SAS)
//! tokens, as Microsoft documents them ("Service Bus access control with Shared Access
//! Signatures", <https://learn.microsoft.com/azure/service-bus-messaging/service-bus-sas>) and
//! as the Go SDK KEDA uses reads and signs them (`azservicebus/internal/conn`,
//! `azure-amqp-common-go/sas`).
//!
//! A connection string is `Endpoint=sb://<namespace>.servicebus.windows.net/;
//! SharedAccessKeyName=<rule>;SharedAccessKey=<key>[;EntityPath=<entity>]`, or carries a ready
//! token as `SharedAccessSignature=SharedAccessSignature sr=...&sig=...&se=...&skn=...`.
//!
//! A token for resource URI `uri`, valid until `expiry` (seconds since the epoch), is
//! `SharedAccessSignature sr=<audience>&sig=<signature>&se=<expiry>&skn=<rule>` where
//! `audience` is `uri` URL-encoded and lower-cased, and `signature` is the URL-encoded base64
//! HMAC-SHA256, keyed with the key's text (its UTF-8 bytes, not base64-decoded), of
//! `<audience>\n<expiry>`. Pure functions: no clock, no network.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::secret::Secret;

/// How long a token signed here is valid: one hour.
pub const TOKEN_LIFETIME_SECS: i64 = 3600;

/// How requests to the namespace are authorized.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum SasCredential {
    /// A shared access policy: its name and key; each request gets a fresh token.
    Key {
        /// `SharedAccessKeyName` (not secret).
        name: String,
        /// `SharedAccessKey`.
        key: Secret,
    },
    /// A ready token (`SharedAccessSignature` of the string), sent as it is.
    Token(Secret),
}

impl std::fmt::Debug for SasCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Key { name, .. } => f
                .debug_struct("Key")
                .field("name", name)
                .finish_non_exhaustive(),
            Self::Token(_) => f.write_str("Token(<redacted>)"),
        }
    }
}

impl SasCredential {
    /// The `Authorization` header value of a request to `uri` at `now` (seconds since the
    /// epoch).
    pub fn authorization(&self, uri: &str, now: i64) -> String {
        match self {
            Self::Key { name, key } => token(
                uri,
                name,
                key.expose(),
                now.saturating_add(TOKEN_LIFETIME_SECS),
            ),
            Self::Token(token) => token.expose().to_string(),
        }
    }

    /// The secrets that must never appear in a message.
    pub fn secrets(&self) -> Vec<&str> {
        match self {
            Self::Key { key, .. } => vec![key.expose()],
            Self::Token(token) => vec![token.expose()],
        }
    }
}

/// A Service Bus (or Event Hubs) connection string.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SasConnection {
    /// The fully qualified namespace: `Endpoint`'s host (and port, if it has one).
    pub namespace: String,
    /// `EntityPath`, when the string is scoped to one entity.
    pub entity_path: Option<String>,
    /// How requests are authorized.
    pub credential: SasCredential,
}

/// Reads a connection string as the Go SDK does: `key=value` settings separated by `;`, keys
/// compared without regard to case, the last of a repeated key winning; `Endpoint` is a URL
/// whose host is the namespace; `SharedAccessKeyName` with `SharedAccessKey`, or
/// `SharedAccessSignature`. `UseDevelopmentEmulator=true` (the emulator on the operator's own
/// `localhost`) is refused: a namespace must not reach the operator's loopback.
///
/// # Errors
/// What is wrong, naming keys of the string but never a value.
pub fn parse_connection_string(raw: &str) -> Result<SasConnection, String> {
    let mut endpoint: Option<&str> = None;
    let mut key_name: Option<&str> = None;
    let mut key: Option<&str> = None;
    let mut entity_path: Option<&str> = None;
    let mut signature: Option<&str> = None;
    for part in raw.trim().split(';').map(str::trim) {
        if part.is_empty() {
            continue;
        }
        let Some((name, value)) = part.split_once('=') else {
            return Err("it must be a list of key=value settings separated by ';'".into());
        };
        let (name, value) = (name.trim(), value.trim());
        let slot = match name.to_ascii_lowercase().as_str() {
            "endpoint" => &mut endpoint,
            "sharedaccesskeyname" => &mut key_name,
            "sharedaccesskey" => &mut key,
            "entitypath" => &mut entity_path,
            "sharedaccesssignature" => &mut signature,
            "usedevelopmentemulator" => {
                if value.eq_ignore_ascii_case("true") || value == "1" {
                    return Err("UseDevelopmentEmulator (an emulator on the operator's own \
                                localhost) is not supported by keda-rs"
                        .into());
                }
                continue;
            }
            _ => continue,
        };
        *slot = Some(value);
    }
    let endpoint = endpoint
        .filter(|e| !e.is_empty())
        .ok_or_else(|| "key \"Endpoint\" must not be empty".to_string())?;
    let url = url::Url::parse(endpoint).map_err(|_| {
        "the Endpoint is not a URL (write it as sb://<namespace>.servicebus.windows.net/)"
            .to_string()
    })?;
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| "the Endpoint has no host".to_string())?;
    let namespace = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    let credential = match (key_name, key, signature) {
        (_, _, Some(token)) if !token.is_empty() => {
            if http::HeaderValue::from_str(token).is_err() {
                return Err(
                    "SharedAccessSignature holds characters an HTTP header cannot carry".into(),
                );
            }
            SasCredential::Token(Secret::new(token))
        }
        (Some(name), Some(key), _) if !name.is_empty() && !key.is_empty() => SasCredential::Key {
            name: name.to_string(),
            key: Secret::new(key),
        },
        (None | Some(""), _, _) => {
            return Err("key \"SharedAccessKeyName\" must not be empty".into());
        }
        _ => {
            return Err(
                "key \"SharedAccessKey\" or \"SharedAccessSignature\" cannot both be empty".into(),
            );
        }
    };
    if let SasCredential::Key { name, .. } = &credential
        && name.chars().any(char::is_control)
    {
        return Err("SharedAccessKeyName holds control characters".into());
    }
    Ok(SasConnection {
        namespace,
        entity_path: entity_path.filter(|e| !e.is_empty()).map(str::to_string),
        credential,
    })
}

/// Go's `url.QueryEscape`: every byte but `A-Z a-z 0-9 - _ . ~` percent-encoded (upper-case
/// hex), a space as `+`.
pub fn query_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The token for `uri`, signed with rule `key_name`'s `key`, valid until `expiry`.
pub fn token(uri: &str, key_name: &str, key: &str, expiry: i64) -> String {
    let audience = query_escape(uri).to_lowercase();
    let signature = query_escape(&signature(key, &format!("{audience}\n{expiry}")));
    format!("SharedAccessSignature sr={audience}&sig={signature}&se={expiry}&skn={key_name}")
}

/// Base64 of the HMAC-SHA256 of `string_to_sign` keyed with the UTF-8 bytes of `key`.
pub fn signature(key: &str, string_to_sign: &str) -> String {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key.as_bytes()) else {
        return String::new();
    };
    mac.update(string_to_sign.as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_follow_microsofts_construction() {
        // The key is any text: the HMAC is keyed with its bytes, not its base64 decoding.
        let uri = "https://keda.servicebus.windows.net/orders?api-version=2021-05";
        let got = token(uri, "RootManageSharedAccessKey", "c2VjcmV0", 1_700_000_000);
        let audience = "https%3a%2f%2fkeda.servicebus.windows.net%2forders%3fapi-version%3d2021-05";
        let sig = signature("c2VjcmV0", &format!("{audience}\n1700000000"));
        assert_eq!(
            got,
            format!(
                "SharedAccessSignature sr={audience}&sig={}&se=1700000000&skn=RootManageSharedAccessKey",
                query_escape(&sig)
            )
        );
        // The HMAC-SHA256 example vector (Python's hmac.new(b"key", msg, sha256) agrees).
        assert_eq!(
            signature("key", "The quick brown fox jumps over the lazy dog"),
            "97yD9DBThCSxMpjmqm+xQ+9NWaFJRhdZl0edvC0aPNg="
        );
        assert_eq!(query_escape("a b/+="), "a+b%2F%2B%3D");
    }

    #[test]
    fn connection_strings_read_as_the_go_sdk_reads_them() {
        let c = parse_connection_string(
            "Endpoint=sb://keda.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=abc=def=;EntityPath=orders",
        )
        .unwrap();
        assert_eq!(c.namespace, "keda.servicebus.windows.net");
        assert_eq!(c.entity_path.as_deref(), Some("orders"));
        assert_eq!(
            c.credential,
            SasCredential::Key {
                name: "Root".into(),
                key: Secret::new("abc=def=")
            }
        );
        let c = parse_connection_string(
            "endpoint=sb://keda.servicebus.windows.net:5671;sharedaccesssignature=SharedAccessSignature sr=x&sig=y&se=1&skn=r",
        )
        .unwrap();
        assert_eq!(c.namespace, "keda.servicebus.windows.net:5671");
        assert_eq!(
            c.credential.authorization("https://x", 0),
            "SharedAccessSignature sr=x&sig=y&se=1&skn=r"
        );
        assert_eq!(format!("{:?}", c.credential), "Token(<redacted>)");
        let rows = [
            ("garbage", "key=value"),
            ("SharedAccessKeyName=a;SharedAccessKey=b", "\"Endpoint\""),
            (
                "Endpoint=sb://ns/;SharedAccessKey=b",
                "\"SharedAccessKeyName\"",
            ),
            (
                "Endpoint=sb://ns/;SharedAccessKeyName=a",
                "cannot both be empty",
            ),
            (
                "Endpoint=nohost;SharedAccessKeyName=a;SharedAccessKey=b",
                "not a URL",
            ),
            (
                "Endpoint=sb://localhost:5672;SharedAccessKeyName=a;SharedAccessKey=s3cret;UseDevelopmentEmulator=true",
                "UseDevelopmentEmulator",
            ),
        ];
        for (raw, why) in rows {
            let err = parse_connection_string(raw).expect_err(raw);
            assert!(err.contains(why), "{raw}: {err}");
            assert!(!err.contains("s3cret"), "{err}");
        }
    }
}
