//! `elasticsearch`: scales on a number in the answer of a search or a stored search template.
//! Compatible with KEDA's `elasticsearch` trigger (`pkg/scalers/elasticsearch_scaler.go`):
//! addresses with basic authentication, or an Elastic Cloud ID with an API key. The request and
//! the reading are shared with `opensearch` ([`crate::scalers::search`]).

use base64::Engine as _;
use http::header::{AUTHORIZATION, HeaderValue};

use std::marker::PhantomData;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{ScalerError, Source};
use crate::http_client::{self, HttpClientKey, parse_http_url};
use crate::metadata::{AUTH_METADATA, MetadataParser, Param};
use crate::scalers::search::{SearchParams, SearchSpec, SearchSystem, SearchTrigger};
use crate::secret::Secret;
use crate::tls::TlsSettings;

/// `password`: TriggerAuthentication, then `passwordFromEnv`, then the metadata (KEDA's order).
const AUTH_ENV_METADATA: &[Source] = &[Source::Auth, Source::Env, Source::Metadata];

pub(crate) const ADDRESSES: Param = Param::optional("addresses").order(AUTH_METADATA);
pub(crate) const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
pub(crate) const USERNAME: Param = Param::optional("username").order(AUTH_METADATA);
pub(crate) const PASSWORD: Param = Param::optional("password")
    .order(AUTH_ENV_METADATA)
    .secret();
pub(crate) const CLOUD_ID: Param = Param::optional("cloudID").order(AUTH_METADATA);
pub(crate) const API_KEY: Param = Param::optional("apiKey").order(AUTH_METADATA).secret();
const INDEX: Param = Param::required("index").order(AUTH_METADATA).separator(";");
const SEARCH_TEMPLATE_NAME: Param = Param::optional("searchTemplateName").order(AUTH_METADATA);
const QUERY: Param = Param::optional("query").order(AUTH_METADATA);
const PARAMETERS: Param = Param::optional("parameters").separator(";");
const VALUE_LOCATION: Param = Param::required("valueLocation").order(AUTH_METADATA);
const TARGET_VALUE: Param = Param::required("targetValue").order(AUTH_METADATA);
const ACTIVATION_TARGET_VALUE: Param = Param::optional("activationTargetValue").default("0");
const IGNORE_NULL_VALUES: Param = Param::optional("ignoreNullValues").default("false");
const METRIC_NAME: Param = Param::optional("metricName");

/// The parameters of `elasticsearch`.
pub const PARAMS: &[Param] = &[
    ADDRESSES,
    UNSAFE_SSL,
    USERNAME,
    PASSWORD,
    CLOUD_ID,
    API_KEY,
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

/// The `elasticsearch` trigger type.
#[derive(Clone, Copy, Debug)]
pub struct Elasticsearch;

impl SearchSystem for Elasticsearch {
    const TYPE: &'static str = "elasticsearch";

    fn parse(ctx: &ScalerContext) -> Result<ElasticsearchConfig, ScalerError> {
        ElasticsearchConfig::parse(ctx)
    }
}

/// The parsed trigger.
pub type ElasticsearchConfig = SearchTrigger<Elasticsearch>;

/// The address of an Elastic Cloud ID (`<name>:<base64 of host$es-id$kibana-id>`), as the Go
/// client derives it: `https://<es-id>.<host>`.
///
/// # Errors
/// Not of that form; the message does not quote it.
pub fn cloud_address(cloud_id: &str) -> Result<url::Url, String> {
    let malformed = || {
        "parameter \"cloudID\" is not an Elastic Cloud ID (<name>:<base64 of host$elasticsearch-id$kibana-id>)"
            .to_string()
    };
    let (_, encoded) = cloud_id.split_once(':').ok_or_else(malformed)?;
    if encoded.contains(':') {
        return Err(malformed());
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| malformed())?;
    let decoded = String::from_utf8(decoded).map_err(|_| malformed())?;
    let mut parts = decoded.split('$');
    let (Some(host), Some(id)) = (parts.next(), parts.next()) else {
        return Err(malformed());
    };
    if host.is_empty() || id.is_empty() {
        return Err(malformed());
    }
    url::Url::parse(&format!("https://{id}.{host}"))
        .ok()
        .filter(|u| u.path() == "/" && u.query().is_none())
        .ok_or_else(malformed)
}

impl ElasticsearchConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// KEDA's rules between `addresses`, `username`, `password`, `cloudID` and `apiKey`, and
    /// between `searchTemplateName` and `query`; a missing `index`, `valueLocation` or
    /// `targetValue`; an address that is not an http(s) URL, a Cloud ID that does not decode.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let addresses: Vec<String> = p.get_opt(&ADDRESSES)?.unwrap_or_default();
            let username: Option<String> = p.get_opt(&USERNAME)?;
            let password: Option<Secret> = p.get_opt(&PASSWORD)?;
            let cloud_id: Option<String> = p.get_opt(&CLOUD_ID)?;
            let api_key: Option<Secret> = p.get_opt(&API_KEY)?;
            let endpoint = !addresses.is_empty() || username.is_some() || password.is_some();
            let cloud = cloud_id.is_some() || api_key.is_some();
            if cloud && endpoint {
                return Err(p.rule("can't provide both cloud config and endpoint addresses"));
            }
            if !cloud && !endpoint {
                return Err(p.rule("must provide either cloud config or endpoint addresses"));
            }
            let tls = TlsSettings {
                insecure: p.get(&UNSAFE_SSL)?,
                ..TlsSettings::default()
            };
            let (urls, auth) = if cloud {
                let (Some(cloud_id), Some(api_key)) = (cloud_id, api_key) else {
                    return Err(p.rule(
                        "both cloudID and apiKey must be provided when cloudID or apiKey is used",
                    ));
                };
                let url = cloud_address(&cloud_id).map_err(|why| p.rule(why))?;
                (vec![url], api_key_auth(p, &api_key, tls)?)
            } else {
                let (Some(username), Some(password)) = (username, password) else {
                    return Err(p.rule(
                        "both username and password must be provided when addresses is used",
                    ));
                };
                if addresses.is_empty() {
                    // The Go client would ask ELASTICSEARCH_URL of the operator's own
                    // environment, or its localhost: never on a tenant's behalf.
                    return Err(p.rule(
                        "parameter \"addresses\" is required when username and password are used",
                    ));
                }
                let urls = addresses
                    .iter()
                    .map(|a| parse_http_url(p, &ADDRESSES, a))
                    .collect::<Result<Vec<_>, _>>()?;
                let auth = HttpAuth {
                    modes: vec![AuthMode::Basic],
                    basic: Some((username, password)),
                    tls,
                    ..HttpAuth::default()
                };
                (urls, auth)
            };
            let search = SearchSpec::parse(p, &SEARCH, false)?;
            let _: Option<String> = p.get_opt(&METRIC_NAME)?;
            let servers = urls
                .into_iter()
                .map(|url| {
                    let key = HttpClientKey {
                        origin: http_client::origin(&url),
                        auth: auth.clone(),
                        timeout: ctx.global_http_timeout,
                    };
                    (url, key)
                })
                .collect();
            Ok(Self {
                servers,
                metric_name: ctx.metric_name(&search.metric_stem("elasticsearch")),
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

/// `Authorization: ApiKey <apiKey>`, Elastic's API key scheme.
pub(crate) fn api_key_auth(
    p: &MetadataParser<'_>,
    api_key: &Secret,
    tls: TlsSettings,
) -> Result<HttpAuth, crate::error::MetadataError> {
    let value = format!("ApiKey {}", api_key.expose());
    if HeaderValue::from_str(&value).is_err() {
        return Err(p.rule(
            "parameter \"apiKey\" contains characters that are not allowed in an HTTP header",
        ));
    }
    Ok(HttpAuth {
        modes: vec![AuthMode::Custom],
        custom: Some((AUTHORIZATION, Secret::new(value))),
        tls,
        ..HttpAuth::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;
    use crate::scalers::search::Search;

    fn parse(
        metadata: &[(&str, &str)],
        auth: &[(&str, &str)],
    ) -> Result<ElasticsearchConfig, String> {
        ElasticsearchConfig::parse(&test_context("elasticsearch", 0, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    const TEMPLATE: &[(&str, &str)] = &[
        ("addresses", "http://es-1:9200, https://es-2:9200"),
        ("index", "index1; index2"),
        ("searchTemplateName", "myAwesomeSearch"),
        ("parameters", "param1:value1;param2: 10:30"),
        ("valueLocation", "hits.total.value"),
        ("targetValue", "12.2"),
        ("activationTargetValue", "3.33"),
    ];

    #[test]
    fn keda_test_cases_parse_the_same() {
        let config = parse(TEMPLATE, &[("username", "admin"), ("password", "password")]).unwrap();
        assert_eq!(config.metric_name, "s0-elasticsearch-myAwesomeSearch");
        assert_eq!(config.search.indices, vec!["index1", "index2"]);
        assert_eq!(config.servers.len(), 2);
        assert_eq!(config.servers[1].1.origin, "https://es-2:9200");
        assert_eq!(
            config.search.search,
            Ok(Search::Template {
                id: "myAwesomeSearch".into(),
                params: vec![
                    ("param1".into(), "value1".into()),
                    ("param2".into(), "10:30".into())
                ],
            })
        );
        assert!(!config.ignore_null_values);
        assert_eq!(
            (config.target_value, config.activation_target_value),
            (12.2, 3.33)
        );
        let (user, _) = config.servers[0].1.auth.basic.clone().unwrap();
        assert_eq!(user, "admin");

        let id = format!(
            "my-cluster:{}",
            base64::engine::general_purpose::STANDARD
                .encode("eu-west-1.aws.found.io:443$es-uuid$kb-uuid")
        );
        let config = parse(
            &[
                ("cloudID", &id),
                ("index", "jobs"),
                ("query", r#"{"query":{"match_all":{}}}"#),
                ("valueLocation", "hits.total.value"),
                ("targetValue", "5"),
            ],
            &[("apiKey", "a2V5")],
        )
        .unwrap();
        assert_eq!(config.metric_name, "s0-elasticsearch-query");
        assert_eq!(
            config.servers[0].0.as_str(),
            "https://es-uuid.eu-west-1.aws.found.io/"
        );
        let (header, value) = config.servers[0].1.auth.custom.clone().unwrap();
        assert_eq!(
            (header.as_str(), value.expose()),
            ("authorization", "ApiKey a2V5")
        );
    }

    #[test]
    fn keda_rules_refuse_with_its_messages() {
        let base = [
            ("index", "i"),
            ("query", "{}"),
            ("valueLocation", "v"),
            ("targetValue", "1"),
        ];
        // (metadata added, auth, error)
        type Pairs<'a> = &'a [(&'a str, &'a str)];
        let rows: &[(Pairs<'_>, Pairs<'_>, &str)] = &[
            (
                &[],
                &[],
                "must provide either cloud config or endpoint addresses",
            ),
            (
                &[("cloudID", "my-cluster:xxxxxxxxxxx")],
                &[],
                "both cloudID and apiKey must be provided when cloudID or apiKey is used",
            ),
            (
                &[
                    ("addresses", "http://localhost:9200"),
                    ("cloudID", "my-cluster:xxxxxxxxxxx"),
                ],
                &[],
                "can't provide both cloud config and endpoint addresses",
            ),
            (
                &[
                    ("addresses", "http://localhost:9200"),
                    ("username", "admin"),
                ],
                &[],
                "both username and password must be provided when addresses is used",
            ),
            (
                &[("username", "admin")],
                &[("password", "p4ss")],
                "parameter \"addresses\" is required when username and password are used",
            ),
            (
                &[("cloudID", "my-cluster:xxxxxxxxxxx")],
                &[("apiKey", "k")],
                "parameter \"cloudID\" is not an Elastic Cloud ID (<name>:<base64 of host$elasticsearch-id$kibana-id>)",
            ),
            (
                &[("addresses", "es:9200"), ("username", "u")],
                &[("password", "p4ss")],
                "parameter \"addresses\" must be an http:// or https:// URL, not es:",
            ),
            (
                &[("addresses", "http://es:9200"), ("searchTemplateName", "t")],
                &[("username", "u"), ("password", "p4ss")],
                "cannot provide both searchTemplateName and query",
            ),
            (
                &[
                    ("addresses", "http://es:9200"),
                    ("query", ""),
                    ("targetValue", "x"),
                ],
                &[("username", "u"), ("password", "p4ss")],
                "either searchTemplateName or query must be provided",
            ),
            (
                &[("addresses", "http://es:9200"), ("index", "")],
                &[("username", "u"), ("password", "p4ss")],
                "missing required parameter \"index\"",
            ),
        ];
        for (i, (metadata, auth, expected)) in rows.iter().enumerate() {
            let mut all: std::collections::BTreeMap<&str, &str> = base.iter().copied().collect();
            all.extend(metadata.iter().copied());
            let pairs: Vec<(&str, &str)> = all.into_iter().collect();
            let err = parse(&pairs, auth).unwrap_err();
            assert_eq!(
                err,
                format!("trigger 0 (elasticsearch): {expected}"),
                "row {i}"
            );
            assert!(!err.contains("p4ss"), "{err}");
        }
        // A parameters item without ':' fails the reads, naming it.
        let mut metadata = TEMPLATE.to_vec();
        metadata.push(("parameters", "novalue"));
        let config = parse(&metadata, &[("username", "a"), ("password", "b")]).unwrap();
        assert_eq!(
            config.search.search.unwrap_err().to_string(),
            "trigger 0 (elasticsearch): parameter \"parameters\": invalid parameter format \"novalue\", expected key:value"
        );
    }
}
