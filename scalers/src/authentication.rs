//! The HTTP authentication block shared by HTTP-based scalers (KEDA's
//! `pkg/scalers/authentication`): `authModes` and the parameters of each mode, parsed once into an
//! [`HttpAuth`] that a scaler applies to its requests and keys its pooled client with.
//!
//! | mode | parameters (sources) | what is sent |
//! |---|---|---|
//! | `basic` | `username` (required), `password` (A) | `Authorization: Basic ...` |
//! | `bearer` | `bearerToken` or `token` (A) | `Authorization: Bearer <token>` |
//! | `custom` | `customAuthHeader`, `customAuthValue` (A) | `<customAuthHeader>: <customAuthValue>` |
//! | `apiKey` | `apiKey` (M, A); `method` `header` (default) or `query`; `keyParamName` (M, A) | header `X-API-KEY` or query parameter `api_key`, or `keyParamName` |
//! | `tls` | `cert`, `key`, `ca` (A), all required | a client certificate |
//!
//! `authModes` (alias `authMode`) is read from the metadata, then the TriggerAuthentication; it
//! is a comma-separated list, and `basic`, `bearer` and `oauth` exclude each other, as in KEDA.
//! `ca` is used whenever it is given (added to the system roots); `unsafeSsl` turns certificate
//! verification off. `oauth` is recognised but not supported yet: an error, never silently
//! ignored.

use std::fmt;

use http::{HeaderName, HeaderValue};

use crate::error::{MetadataError, Source};
use crate::metadata::{AUTH, METADATA_AUTH, MetadataParser, Param};
use crate::secret::Secret;
use crate::tls::TlsSettings;

/// `authModes` (alias `authMode`): a comma-separated list of modes.
pub const AUTH_MODES: Param = Param::optional("authModes")
    .aliases(&["authMode"])
    .order(METADATA_AUTH);
/// `basic`: the user name.
pub const USERNAME: Param = Param::optional("username").order(AUTH);
/// `basic`: the password (may be empty).
pub const PASSWORD: Param = Param::optional("password").order(AUTH).secret();
/// `bearer`: the token (alias `token`).
pub const BEARER_TOKEN: Param = Param::optional("bearerToken")
    .aliases(&["token"])
    .order(AUTH)
    .secret();
/// `tls`: the PEM client certificate.
pub const CERT: Param = Param::optional("cert").order(AUTH).secret();
/// `tls`: the PEM private key of `cert`.
pub const KEY: Param = Param::optional("key").order(AUTH).secret();
/// The PEM CA bundle the server certificate is checked against (added to the system roots).
pub const CA: Param = Param::optional("ca").order(AUTH).secret();
/// The password of an encrypted PKCS#8 `key`.
pub const KEY_PASSWORD: Param = Param::optional("keyPassword").order(AUTH).secret();
/// `custom`: the header name.
pub const CUSTOM_AUTH_HEADER: Param = Param::optional("customAuthHeader").order(AUTH);
/// `custom`: the header value.
pub const CUSTOM_AUTH_VALUE: Param = Param::optional("customAuthValue").order(AUTH).secret();
/// `apiKey`: the key.
pub const API_KEY: Param = Param::optional("apiKey").order(METADATA_AUTH).secret();
/// `apiKey`: send the key as a `header` (default) or a `query` parameter.
pub const METHOD: Param = Param::optional("method")
    .order(METADATA_AUTH)
    .default("header")
    .allowed(&["header", "query"]);
/// `apiKey`: the header (default `X-API-KEY`) or query parameter (default `api_key`) name.
pub const KEY_PARAM_NAME: Param = Param::optional("keyParamName").order(METADATA_AUTH);

/// Default header of `apiKey` with `method: header`.
pub const DEFAULT_API_KEY_HEADER: &str = "X-API-KEY";
/// Default query parameter of `apiKey` with `method: query`.
pub const DEFAULT_API_KEY_QUERY: &str = "api_key";

/// One value of `authModes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthMode {
    /// An API key in a header or query parameter.
    ApiKey,
    /// HTTP basic authentication.
    Basic,
    /// A client certificate.
    Tls,
    /// A bearer token.
    Bearer,
    /// A header of the user's choice.
    Custom,
    /// OAuth2 client credentials (not supported yet).
    OAuth,
}

impl AuthMode {
    const ALL: [(&'static str, Self); 6] = [
        ("apiKey", Self::ApiKey),
        ("basic", Self::Basic),
        ("tls", Self::Tls),
        ("bearer", Self::Bearer),
        ("custom", Self::Custom),
        ("oauth", Self::OAuth),
    ];

    /// The name written in `authModes`.
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("basic", |(name, _)| name)
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
    }
}

/// Where an API key goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ApiKeyPlacement {
    /// A request header of this name.
    Header(HeaderName),
    /// A query parameter of this name (replacing any of the same name in the URL).
    Query(String),
}

/// What the trigger's authentication block says to do on each request and for TLS. Part of a
/// pooled client's key: triggers with different credentials never share a client.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct HttpAuth {
    /// The modes that were asked for, in the order written.
    pub modes: Vec<AuthMode>,
    /// `basic`: user and password (possibly empty).
    pub basic: Option<(String, Secret)>,
    /// `bearer`: the token.
    pub bearer: Option<Secret>,
    /// `custom`: header and value.
    pub custom: Option<(HeaderName, Secret)>,
    /// `apiKey`: the key and where it goes.
    pub api_key: Option<(Secret, ApiKeyPlacement)>,
    /// `ca`, the `tls` client certificate, and `unsafeSsl`.
    pub tls: TlsSettings,
}

impl fmt::Debug for HttpAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Only the shape: user names and header names are harmless, values are not shown.
        f.debug_struct("HttpAuth")
            .field("modes", &self.modes)
            .field("basic_user", &self.basic.as_ref().map(|(u, _)| u))
            .field("bearer", &self.bearer.is_some())
            .field("custom_header", &self.custom.as_ref().map(|(h, _)| h))
            .field("api_key", &self.api_key.as_ref().map(|(_, p)| p))
            .field("tls", &self.tls)
            .finish()
    }
}

impl HttpAuth {
    /// Parses `authModes` and the parameters of each mode, with `unsafe_ssl` (the scaler's own
    /// `unsafeSsl`) for certificate verification.
    ///
    /// # Errors
    /// An unknown or unsupported mode, two of `basic`/`bearer`/`oauth`, or a parameter a mode
    /// needs is missing or malformed. Errors name the parameter and never show secret values.
    pub fn parse(p: &MetadataParser<'_>, unsafe_ssl: bool) -> Result<Self, MetadataError> {
        let mut auth = Self {
            tls: TlsSettings {
                insecure: unsafe_ssl,
                ca: p.get_opt(&CA)?,
                client: None,
            },
            ..Self::default()
        };
        let Some(found) = p.find(&AUTH_MODES)? else {
            return Ok(auth);
        };
        for name in found.value.split(',').map(str::trim) {
            let mode = AuthMode::parse(name).ok_or_else(|| {
                let names: Vec<&str> = AuthMode::ALL.iter().map(|(n, _)| *n).collect();
                // The unknown entry is named only where the value itself may be shown: never
                // one from a TriggerAuthentication (found by the fuzz target scaler_metadata).
                let unknown = if found.source == Source::Metadata {
                    format!(" (\"{name}\" is unknown)")
                } else {
                    String::new()
                };
                p.invalid(
                    &AUTH_MODES,
                    found,
                    &format!("a list of {}{unknown}", names.join(", ")),
                )
            })?;
            if !auth.modes.contains(&mode) {
                auth.modes.push(mode);
            }
        }
        let exclusive: Vec<&str> = auth
            .modes
            .iter()
            .filter(|m| matches!(m, AuthMode::Basic | AuthMode::Bearer | AuthMode::OAuth))
            .map(|m| m.as_str())
            .collect();
        if exclusive.len() > 1 {
            return Err(p.rule(format!(
                "parameter \"{}\" may contain only one of basic, bearer and oauth, not {}",
                found.name,
                exclusive.join(" and ")
            )));
        }
        let needs = |param: &Param, mode: AuthMode| {
            p.rule(format!(
                "missing required parameter \"{}\" (TriggerAuthentication) for authModes {}",
                param.name,
                mode.as_str()
            ))
        };
        for mode in auth.modes.clone() {
            match mode {
                AuthMode::Basic => {
                    let user: String = p
                        .get_opt(&USERNAME)?
                        .ok_or_else(|| needs(&USERNAME, mode))?;
                    let password: Secret = p.get_opt(&PASSWORD)?.unwrap_or_default();
                    auth.basic = Some((user, password));
                }
                AuthMode::Bearer => {
                    let token: Secret = p
                        .get_opt(&BEARER_TOKEN)?
                        .ok_or_else(|| needs(&BEARER_TOKEN, mode))?;
                    if HeaderValue::from_str(&format!("Bearer {}", token.expose())).is_err() {
                        return Err(header_value_error(p, &BEARER_TOKEN));
                    }
                    auth.bearer = Some(token);
                }
                AuthMode::Custom => {
                    let header: String = p
                        .get_opt(&CUSTOM_AUTH_HEADER)?
                        .ok_or_else(|| needs(&CUSTOM_AUTH_HEADER, mode))?;
                    let value: Secret = p
                        .get_opt(&CUSTOM_AUTH_VALUE)?
                        .ok_or_else(|| needs(&CUSTOM_AUTH_VALUE, mode))?;
                    let header = HeaderName::from_bytes(header.as_bytes()).map_err(|_| {
                        p.rule(format!(
                            "parameter \"customAuthHeader\": \"{header}\" is not a valid HTTP header name"
                        ))
                    })?;
                    if HeaderValue::from_str(value.expose()).is_err() {
                        return Err(header_value_error(p, &CUSTOM_AUTH_VALUE));
                    }
                    auth.custom = Some((header, value));
                }
                AuthMode::ApiKey => {
                    let key: Secret = p.get_opt(&API_KEY)?.ok_or_else(|| needs(&API_KEY, mode))?;
                    let name: Option<String> = p.get_opt(&KEY_PARAM_NAME)?;
                    let placement = if p.get::<String>(&METHOD)? == "query" {
                        ApiKeyPlacement::Query(name.unwrap_or_else(|| DEFAULT_API_KEY_QUERY.into()))
                    } else {
                        let name = name.unwrap_or_else(|| DEFAULT_API_KEY_HEADER.into());
                        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                            p.rule(format!(
                                "parameter \"keyParamName\": \"{name}\" is not a valid HTTP header name"
                            ))
                        })?;
                        if HeaderValue::from_str(key.expose()).is_err() {
                            return Err(header_value_error(p, &API_KEY));
                        }
                        ApiKeyPlacement::Header(header)
                    };
                    auth.api_key = Some((key, placement));
                }
                AuthMode::Tls => {
                    let cert: Secret = p.get_opt(&CERT)?.ok_or_else(|| needs(&CERT, mode))?;
                    let key: Secret = p.get_opt(&KEY)?.ok_or_else(|| needs(&KEY, mode))?;
                    if auth.tls.ca.is_none() {
                        return Err(needs(&CA, mode));
                    }
                    auth.tls.client = Some((cert, key));
                }
                AuthMode::OAuth => {
                    return Err(p.rule(
                        "authModes oauth is not supported by keda-rs yet; use basic, bearer, custom, apiKey or tls",
                    ));
                }
            }
        }
        Ok(auth)
    }

    /// The request with this authentication: headers for `basic`, `bearer`, `custom` and a
    /// header `apiKey`; a query `apiKey` must be put in the URL with
    /// [`HttpAuth::apply_to_url`] before the request is built.
    pub fn apply(&self, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if let Some((user, password)) = &self.basic {
            request = request.basic_auth(user, Some(password.expose()));
        }
        if let Some(token) = &self.bearer {
            request = request.bearer_auth(token.expose());
        }
        if let Some((header, value)) = &self.custom {
            request = request.header(header.clone(), value.expose());
        }
        if let Some((key, ApiKeyPlacement::Header(header))) = &self.api_key {
            request = request.header(header.clone(), key.expose());
        }
        request
    }

    /// Puts a query-parameter `apiKey` into `url`, replacing a parameter of the same name.
    pub fn apply_to_url(&self, url: &mut url::Url) {
        let Some((key, ApiKeyPlacement::Query(name))) = &self.api_key else {
            return;
        };
        let kept: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(k, _)| k != name.as_str())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        url.query_pairs_mut()
            .clear()
            .extend_pairs(kept)
            .append_pair(name, key.expose());
    }

    /// Values that must never appear in a message (passwords, tokens, keys).
    pub fn secrets(&self) -> Vec<&str> {
        let mut secrets = Vec::new();
        if let Some((_, password)) = &self.basic {
            secrets.push(password.expose());
        }
        if let Some(token) = &self.bearer {
            secrets.push(token.expose());
        }
        if let Some((_, value)) = &self.custom {
            secrets.push(value.expose());
        }
        if let Some((key, _)) = &self.api_key {
            secrets.push(key.expose());
        }
        secrets.retain(|s| !s.is_empty());
        secrets
    }
}

fn header_value_error(p: &MetadataParser<'_>, param: &Param) -> MetadataError {
    p.rule(format!(
        "parameter \"{}\" contains characters that are not allowed in an HTTP header",
        param.name
    ))
}

/// The TLS settings of KEDA's IBM MQ and ActiveMQ Artemis scalers: `unsafe_ssl` (their
/// `unsafeSsl`), a client certificate from `cert`, `key` and `keyPassword`, and `ca`, which
/// KEDA reads only with a client certificate (it builds its TLS configuration only then).
///
/// # Errors
/// `cert` without `key` or the reverse, a key that cannot be decrypted, a malformed boolean:
/// each naming the parameter.
pub fn client_certificate_tls(
    p: &MetadataParser<'_>,
    unsafe_ssl: &Param,
) -> Result<TlsSettings, MetadataError> {
    let insecure: bool = p.get(unsafe_ssl)?;
    let client = crate::tls::client_identity(
        p.get_opt(&CERT)?,
        p.get_opt(&KEY)?,
        p.get_opt(&KEY_PASSWORD)?,
    )
    .map_err(|e| p.rule(e.to_string()))?;
    let ca = if client.is_some() {
        p.get_opt(&CA)?
    } else {
        None
    };
    Ok(TlsSettings {
        insecure,
        ca,
        client,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::error::TriggerId;

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<HttpAuth, String> {
        let id = TriggerId {
            index: 0,
            trigger_type: "metrics-api".into(),
        };
        let metadata: BTreeMap<String, String> = metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let auth: BTreeMap<String, Secret> = auth
            .iter()
            .map(|(k, v)| (k.to_string(), Secret::new(*v)))
            .collect();
        let env = BTreeMap::new();
        let p = MetadataParser::new(&id, &metadata, &env, &auth);
        HttpAuth::parse(&p, false).map_err(|e| e.to_string())
    }

    #[test]
    fn each_mode_reads_its_parameters() {
        let a = parse(&[("authMode", "basic")], &[("username", "u")]).unwrap();
        assert_eq!(a.basic, Some(("u".into(), Secret::new(""))));
        let a = parse(&[], &[("authModes", "bearer"), ("token", "t")]).unwrap();
        assert_eq!(a.bearer, Some(Secret::new("t")));
        let a = parse(
            &[("authModes", "custom")],
            &[("customAuthHeader", "X-Org"), ("customAuthValue", "v")],
        )
        .unwrap();
        assert_eq!(a.custom.map(|(h, _)| h.to_string()), Some("x-org".into()));
        let a = parse(
            &[("authModes", "apiKey"), ("method", "query")],
            &[("apiKey", "k")],
        )
        .unwrap();
        assert_eq!(
            a.api_key.map(|(_, p)| p),
            Some(ApiKeyPlacement::Query("api_key".into()))
        );
        let a = parse(
            &[("authModes", "apiKey, tls")],
            &[
                ("apiKey", "k"),
                ("keyParamName", "X-Key"),
                ("cert", "C"),
                ("key", "K"),
                ("ca", "CA"),
            ],
        )
        .unwrap();
        assert_eq!(a.modes, vec![AuthMode::ApiKey, AuthMode::Tls]);
        assert_eq!(
            a.api_key.map(|(_, p)| p),
            Some(ApiKeyPlacement::Header(HeaderName::from_static("x-key")))
        );
        assert!(a.tls.client.is_some());
        // No authModes: nothing but a CA.
        let a = parse(&[], &[("ca", "CA"), ("username", "ignored")]).unwrap();
        assert!(a.basic.is_none() && a.tls.ca.is_some() && a.modes.is_empty());
    }

    #[test]
    fn errors_name_the_parameter_a_mode_needs() {
        // (metadata, auth params, error)
        type Pairs<'a> = &'a [(&'a str, &'a str)];
        let rows: &[(Pairs<'_>, Pairs<'_>, &str)] = &[
            (
                &[("authModes", "basic")],
                &[],
                r#"trigger 0 (metrics-api): missing required parameter "username" (TriggerAuthentication) for authModes basic"#,
            ),
            (
                &[("authModes", "bearer")],
                &[],
                r#"trigger 0 (metrics-api): missing required parameter "bearerToken" (TriggerAuthentication) for authModes bearer"#,
            ),
            (
                &[("authModes", "tls")],
                &[("cert", "C"), ("key", "K")],
                r#"trigger 0 (metrics-api): missing required parameter "ca" (TriggerAuthentication) for authModes tls"#,
            ),
            (
                &[("authModes", "custom")],
                &[("customAuthHeader", "X")],
                r#"trigger 0 (metrics-api): missing required parameter "customAuthValue" (TriggerAuthentication) for authModes custom"#,
            ),
            (
                &[("authModes", "apiKey")],
                &[],
                r#"trigger 0 (metrics-api): missing required parameter "apiKey" (TriggerAuthentication) for authModes apiKey"#,
            ),
            (
                &[("authModes", "basic,bearer")],
                &[("username", "u"), ("bearerToken", "t")],
                r#"trigger 0 (metrics-api): parameter "authModes" may contain only one of basic, bearer and oauth, not basic and bearer"#,
            ),
            (
                &[("authModes", "digest")],
                &[],
                r#"trigger 0 (metrics-api): parameter "authModes": "digest" is not a list of apiKey, basic, tls, bearer, custom, oauth ("digest" is unknown)"#,
            ),
            (
                &[],
                &[("authModes", "s3cret-mode")],
                r#"trigger 0 (metrics-api): parameter "authModes": the value from TriggerAuthentication is not a list of apiKey, basic, tls, bearer, custom, oauth"#,
            ),
            (
                &[("authModes", "oauth")],
                &[],
                "trigger 0 (metrics-api): authModes oauth is not supported by keda-rs yet; use basic, bearer, custom, apiKey or tls",
            ),
            (
                &[("authModes", "apiKey"), ("method", "cookie")],
                &[("apiKey", "k")],
                r#"trigger 0 (metrics-api): parameter "method": "cookie" is not one of header, query"#,
            ),
            (
                &[("authModes", "custom")],
                &[("customAuthHeader", "bad header"), ("customAuthValue", "v")],
                r#"trigger 0 (metrics-api): parameter "customAuthHeader": "bad header" is not a valid HTTP header name"#,
            ),
            (
                &[("authModes", "bearer")],
                &[("bearerToken", "line\nbreak-s3cret")],
                r#"trigger 0 (metrics-api): parameter "bearerToken" contains characters that are not allowed in an HTTP header"#,
            ),
        ];
        for (i, (metadata, auth, expected)) in rows.iter().enumerate() {
            assert_eq!(parse(metadata, auth).unwrap_err(), *expected, "row {i}");
        }
    }

    #[test]
    fn a_query_api_key_replaces_a_parameter_of_the_same_name() {
        let a = parse(
            &[
                ("authModes", "apiKey"),
                ("method", "query"),
                ("keyParamName", "k"),
            ],
            &[("apiKey", "s3cret")],
        )
        .unwrap();
        let mut url = url::Url::parse("http://h/stats?k=old&x=1").unwrap();
        a.apply_to_url(&mut url);
        assert_eq!(url.as_str(), "http://h/stats?x=1&k=s3cret");
        assert_eq!(a.secrets(), vec!["s3cret"]);
        assert!(!format!("{a:?}").contains("s3cret"));
    }
}
