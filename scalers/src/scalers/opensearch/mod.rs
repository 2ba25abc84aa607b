//! `opensearch`: scales on a number in the answer of a search or a stored search template.
//! Compatible with KEDA's `opensearch` trigger (`pkg/scalers/opensearch_scaler.go`): basic
//! authentication, or a client certificate with `enableTLS`. The request and the reading are
//! shared with `elasticsearch` ([`crate::scalers::search`]).

use std::marker::PhantomData;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{ScalerError, Source};
use crate::http_client::{self, HttpClientKey, parse_http_url};
use crate::metadata::{AUTH_METADATA, METADATA_AUTH, Param};
use crate::scalers::search::{SearchParams, SearchSpec, SearchSystem, SearchTrigger};
use crate::secret::Secret;
use crate::tls::TlsSettings;

/// `password`: TriggerAuthentication, then `passwordFromEnv`, then the metadata (KEDA's order).
const AUTH_ENV_METADATA: &[Source] = &[Source::Auth, Source::Env, Source::Metadata];

const ADDRESSES: Param = Param::required("addresses").order(AUTH_METADATA);
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
const ENABLE_TLS: Param = Param::optional("enableTLS")
    .order(METADATA_AUTH)
    .default("false");
const USERNAME: Param = Param::optional("username").order(AUTH_METADATA);
const PASSWORD: Param = Param::optional("password")
    .order(AUTH_ENV_METADATA)
    .secret();
const CA_CERT: Param = Param::optional("caCert").order(AUTH_METADATA).secret();
const CLIENT_CERT: Param = Param::optional("clientCert").order(AUTH_METADATA).secret();
const CLIENT_KEY: Param = Param::optional("clientKey").order(AUTH_METADATA).secret();
const INDEX: Param = Param::required("index").order(AUTH_METADATA).separator(";");
const SEARCH_TEMPLATE_NAME: Param = Param::optional("searchTemplateName").order(AUTH_METADATA);
const QUERY: Param = Param::optional("query").order(AUTH_METADATA);
const PARAMETERS: Param = Param::optional("parameters").separator(";");
const VALUE_LOCATION: Param = Param::required("valueLocation").order(AUTH_METADATA);
const TARGET_VALUE: Param = Param::required("targetValue").order(AUTH_METADATA);
const ACTIVATION_TARGET_VALUE: Param = Param::optional("activationTargetValue").default("0");
const IGNORE_NULL_VALUES: Param = Param::optional("ignoreNullValues").default("false");
const METRIC_NAME: Param = Param::optional("metricName");

/// The parameters of `opensearch`.
pub const PARAMS: &[Param] = &[
    ADDRESSES,
    UNSAFE_SSL,
    ENABLE_TLS,
    USERNAME,
    PASSWORD,
    CA_CERT,
    CLIENT_CERT,
    CLIENT_KEY,
    INDEX,
    SEARCH_TEMPLATE_NAME,
    QUERY,
    PARAMETERS,
    VALUE_LOCATION,
    TARGET_VALUE,
    ACTIVATION_TARGET_VALUE,
    IGNORE_NULL_VALUES,
    METRIC_NAME,
];

const SEARCH: SearchParams = SearchParams {
    index: INDEX,
    search_template_name: SEARCH_TEMPLATE_NAME,
    query: QUERY,
    parameters: PARAMETERS,
    value_location: VALUE_LOCATION,
};

/// The `opensearch` trigger type.
#[derive(Clone, Copy, Debug)]
pub struct OpenSearch;

impl SearchSystem for OpenSearch {
    const TYPE: &'static str = "opensearch";

    fn parse(ctx: &ScalerContext) -> Result<OpenSearchConfig, ScalerError> {
        OpenSearchConfig::parse(ctx)
    }
}

/// The parsed trigger.
pub type OpenSearchConfig = SearchTrigger<OpenSearch>;

impl OpenSearchConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// KEDA's rules (`clientCert` and `clientKey` with `enableTLS`, else `username` and
    /// `password`; exactly one of `searchTemplateName` and `query`); a missing `addresses`,
    /// `index`, `valueLocation` or `targetValue`; an address that is not an http(s) URL.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let addresses: Vec<String> = p.get(&ADDRESSES)?;
            let enable_tls: bool = p.get(&ENABLE_TLS)?;
            let username: Option<String> = p.get_opt(&USERNAME)?;
            let password: Option<Secret> = p.get_opt(&PASSWORD)?;
            let client_cert: Option<Secret> = p.get_opt(&CLIENT_CERT)?;
            let client_key: Option<Secret> = p.get_opt(&CLIENT_KEY)?;
            let mut auth = HttpAuth {
                tls: TlsSettings {
                    insecure: p.get(&UNSAFE_SSL)?,
                    ca: p.get_opt(&CA_CERT)?,
                    client: None,
                },
                ..HttpAuth::default()
            };
            if enable_tls {
                let (Some(cert), Some(key)) = (client_cert, client_key) else {
                    return Err(p.rule(
                        "both clientCert and clientKey must be provided when enableTLS is true",
                    ));
                };
                auth.modes = vec![AuthMode::Tls];
                auth.tls.client = Some((cert, key));
            } else {
                let (Some(username), Some(password)) = (username, password) else {
                    return Err(
                        p.rule("both username and password must be provided for basic auth")
                    );
                };
                auth.modes = vec![AuthMode::Basic];
                auth.basic = Some((username, password));
            }
            let search = SearchSpec::parse(p, &SEARCH, true)?;
            let _: Option<String> = p.get_opt(&METRIC_NAME)?;
            let servers = addresses
                .iter()
                .map(|a| {
                    parse_http_url(p, &ADDRESSES, a).map(|url| {
                        let key = HttpClientKey {
                            origin: http_client::origin(&url),
                            auth: auth.clone(),
                            timeout: ctx.global_http_timeout,
                        };
                        (url, key)
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Self {
                servers,
                metric_name: ctx.metric_name(&search.metric_stem("opensearch")),
                search,
                target_value: p.get(&TARGET_VALUE)?,
                activation_target_value: p.get(&ACTIVATION_TARGET_VALUE)?,
                ignore_null_values: p.get(&IGNORE_NULL_VALUES)?,
                metric_type,
                system: PhantomData,
            })
        })?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<OpenSearchConfig, String> {
        OpenSearchConfig::parse(&test_context("opensearch", 1, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    const BASE: &[(&str, &str)] = &[
        ("addresses", "https://os-0:9200,https://os-1:9200"),
        ("index", "jobs"),
        ("query", r#"{"query":{"term":{"state":"pending"}}}"#),
        ("valueLocation", "hits.total.value"),
        ("targetValue", "10"),
    ];

    #[test]
    fn basic_or_client_certificate_authentication_as_keda_reads_them() {
        let config = parse(BASE, &[("username", "admin"), ("password", "p4ss")]).unwrap();
        assert_eq!(config.metric_name, "s1-opensearch-query");
        assert_eq!(config.servers.len(), 2);
        assert_eq!(config.servers[0].1.auth.basic.as_ref().unwrap().0, "admin");
        assert!(config.search.search.is_ok());

        let mut tls = BASE.to_vec();
        tls.push(("enableTLS", "true"));
        let config = parse(
            &tls,
            &[("clientCert", "C"), ("clientKey", "K"), ("caCert", "CA")],
        )
        .unwrap();
        let auth = &config.servers[0].1.auth;
        assert!(auth.basic.is_none() && auth.tls.client.is_some() && auth.tls.ca.is_some());

        // (changes, auth, error)
        type Pairs<'a> = &'a [(&'a str, &'a str)];
        let rows: &[(Pairs<'_>, Pairs<'_>, &str)] = &[
            (
                &[("enableTLS", "true")],
                &[("clientCert", "C")],
                "both clientCert and clientKey must be provided when enableTLS is true",
            ),
            (
                &[],
                &[("username", "admin")],
                "both username and password must be provided for basic auth",
            ),
            (
                &[("searchTemplateName", "t")],
                &[("username", "a"), ("password", "p4ss")],
                "cannot provide both searchTemplateName and query",
            ),
            (
                &[("addresses", "")],
                &[("username", "a"), ("password", "p4ss")],
                "missing required parameter \"addresses\"",
            ),
        ];
        for (i, (changes, auth, expected)) in rows.iter().enumerate() {
            let mut all: std::collections::BTreeMap<&str, &str> = BASE.iter().copied().collect();
            all.extend(changes.iter().copied());
            let pairs: Vec<(&str, &str)> = all.into_iter().collect();
            assert_eq!(
                parse(&pairs, auth).unwrap_err(),
                format!("trigger 1 (opensearch): {expected}"),
                "row {i}"
            );
        }
        // A query that is not JSON fails the reads, as KEDA's "invalid query JSON".
        let mut bad = BASE.to_vec();
        bad.push(("query", "{not json"));
        let config = parse(&bad, &[("username", "a"), ("password", "b")]).unwrap();
        assert_eq!(
            config.search.search.unwrap_err().to_string(),
            "trigger 1 (opensearch): parameter \"query\" is not valid JSON (invalid query JSON)"
        );
        let mut template = BASE.to_vec();
        template.retain(|(k, _)| *k != "query");
        template.push(("searchTemplateName", "my.template"));
        let config = parse(&template, &[("username", "a"), ("password", "b")]).unwrap();
        assert_eq!(config.metric_name, "s1-opensearch-my-template");
    }
}
