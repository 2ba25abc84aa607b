//! `azure-blob`: the number of blobs in an Azure Storage container (KEDA's
//! `azure_blob_scaler.go`).
//!
//! Each poll lists the container (List Blobs, following `NextMarker`) and counts blobs:
//! - by default hierarchically with `blobDelimiter` (default `/`): the blobs directly under
//!   `blobPrefix` + `blobDelimiter`, not those in "subdirectories";
//! - with `recursive: true` the delimiter is dropped: every blob under `blobPrefix` (which then
//!   gets no delimiter appended);
//! - with `globPattern` a flat listing under the prefix, counting the names the pattern matches
//!   (`*` crosses `/`, as KEDA compiles it).
//!
//! Active iff the count is above `activationBlobCount`. Metric
//! `s<i>-azure-blob-<blobContainerName>`, integer target `blobCount`.

pub mod glob;

use async_trait::async_trait;
use bytes::Bytes;
use http::Method;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use self::glob::Glob;
use crate::azure::client::{self, StorageClient, StorageClientKey};
use crate::azure::{
    ACCOUNT_NAME, CLOUD, CONNECTION_BLOB, ENDPOINT_SUFFIX, Service, StorageSettings,
};
use crate::context::ScalerContext;
use crate::error::ScalerError;
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pooled::{KeyedSource, ReadCtx};
use crate::scaler::{MetricValue, MetricsAndActivity};

const BLOB_CONTAINER_NAME: Param = Param::required("blobContainerName");
const BLOB_COUNT: Param = Param::optional("blobCount")
    .default("5")
    .range(1.0, f64::MAX);
const ACTIVATION_BLOB_COUNT: Param = Param::optional("activationBlobCount").default("0");
const BLOB_DELIMITER: Param = Param::optional("blobDelimiter").default("/");
const BLOB_PREFIX: Param = Param::optional("blobPrefix");
const RECURSIVE: Param = Param::optional("recursive").default("false");
const GLOB_PATTERN: Param = Param::optional("globPattern");

/// The parameters of `azure-blob`.
pub const PARAMS: &[Param] = &[
    BLOB_CONTAINER_NAME,
    BLOB_COUNT,
    ACTIVATION_BLOB_COUNT,
    BLOB_DELIMITER,
    BLOB_PREFIX,
    RECURSIVE,
    GLOB_PATTERN,
    CONNECTION_BLOB,
    ACCOUNT_NAME,
    ENDPOINT_SUFFIX,
    CLOUD,
];

/// Blobs asked for per List Blobs page.
pub const PAGE_SIZE: usize = 2000;
/// The most pages listed in one poll: at most `PAGE_SIZE x MAX_PAGES` (1,000,000) entries.
pub const MAX_PAGES: usize = 500;

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct AzureBlobConfig {
    /// `blobContainerName`.
    pub container: String,
    /// `blobCount`.
    pub target: i64,
    /// `activationBlobCount`.
    pub activation: i64,
    /// The delimiter of the hierarchical listing: `blobDelimiter`, empty with `recursive`.
    pub delimiter: String,
    /// `blobPrefix` with the delimiter appended (when both are set), as KEDA does.
    pub prefix: String,
    /// `globPattern`, compiled.
    pub glob: Option<Glob>,
    /// Endpoint and credential.
    pub storage: StorageSettings,
    /// `s<index>-azure-blob-<blobContainerName>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// The pooled client's key: the storage endpoint, the credential and the timeout of one
    /// request (`KEDA_HTTP_DEFAULT_TIMEOUT`).
    pub key: StorageClientKey,
}

impl AzureBlobConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A parameter is missing or malformed (a `globPattern` that does not compile), or the
    /// connection string cannot be used.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let container: String = p.get(&BLOB_CONTAINER_NAME)?;
            let recursive: bool = p.get(&RECURSIVE)?;
            let delimiter = if recursive {
                String::new()
            } else {
                p.get::<String>(&BLOB_DELIMITER)?
            };
            let mut prefix = p.get_opt::<String>(&BLOB_PREFIX)?.unwrap_or_default();
            if !prefix.is_empty() {
                prefix.push_str(&delimiter);
            }
            let glob = match p.find(&GLOB_PATTERN)? {
                Some(found) => Some(Glob::compile(found.value).map_err(|why| {
                    p.invalid(
                        &GLOB_PATTERN,
                        found,
                        &format!("a valid glob pattern: {why}"),
                    )
                })?),
                None => None,
            };
            // The targets, then the connection string: the order its errors are reported in.
            let target = p.get(&BLOB_COUNT)?;
            let activation = p.get(&ACTIVATION_BLOB_COUNT)?;
            let storage = StorageSettings::parse(p, Service::Blob, &CONNECTION_BLOB)?;
            Ok(Self {
                metric_name: ctx.metric_name(&format!("azure-blob-{container}")),
                target,
                activation,
                delimiter,
                prefix,
                glob,
                key: StorageClientKey {
                    endpoint: storage.endpoint.clone(),
                    credential: storage.credential.clone(),
                    timeout: ctx.global_http_timeout,
                },
                storage,
                container,
                metric_type,
            })
        })?)
    }
}

/// One page of a List Blobs answer.
#[derive(Debug, PartialEq)]
pub(crate) struct Page {
    /// The names of the blobs (not of the prefixes).
    pub(crate) names: Vec<String>,
    /// `NextMarker`, when there are more.
    pub(crate) next: Option<String>,
}

impl AzureBlobConfig {
    /// The number of blobs now, counted as the module docs say.
    ///
    /// # Errors
    /// The service cannot be reached or answers an error (a missing container, a key it
    /// refuses), an answer cannot be read, the listing has more than [`MAX_PAGES`] pages.
    async fn blob_count(
        &self,
        client: &StorageClient,
        read: ReadCtx<'_>,
    ) -> Result<i64, ScalerError> {
        // A glob pattern lists flat, as KEDA does.
        let delimiter = if self.glob.is_some() {
            ""
        } else {
            self.delimiter.as_str()
        };
        let what = format!("container \"{}\" (blobContainerName)", self.container);
        let page_size = PAGE_SIZE.to_string();
        let mut marker: Option<String> = None;
        let mut count: i64 = 0;
        for _ in 0..MAX_PAGES {
            let mut query = vec![
                ("restype", "container"),
                ("comp", "list"),
                ("maxresults", page_size.as_str()),
            ];
            if !self.prefix.is_empty() {
                query.push(("prefix", self.prefix.as_str()));
            }
            if !delimiter.is_empty() {
                query.push(("delimiter", delimiter));
            }
            if let Some(marker) = &marker {
                query.push(("marker", marker.as_str()));
            }
            let answer = client
                .send(
                    Method::GET,
                    &[self.container.as_str()],
                    &query,
                    &[],
                    Bytes::new(),
                    read.clock,
                )
                .await
                .map_err(|e| client::query_error(client, read.trigger, "List Blobs", &what, &e))?;
            let page = parse_page(&answer.body).map_err(|message| {
                read.unexpected(format!(
                    "List Blobs of container \"{}\" answered {message}",
                    self.container
                ))
            })?;
            let matched = match &self.glob {
                Some(glob) => page.names.iter().filter(|n| glob.matches(n)).count(),
                None => page.names.len(),
            };
            count = count.saturating_add(i64::try_from(matched).unwrap_or(i64::MAX));
            match page.next {
                Some(next) => marker = Some(next),
                None => return Ok(count),
            }
        }
        Err(read.unexpected(format!(
            "container \"{}\" lists more than {} entries under the prefix (the most one poll \
             reads); narrow it with blobPrefix",
            self.container,
            PAGE_SIZE * MAX_PAGES
        )))
    }
}

/// The first child element of `node` named `name`.
fn child<'a, 'input>(
    node: roxmltree::Node<'a, 'input>,
    name: &str,
) -> Option<roxmltree::Node<'a, 'input>> {
    node.children().find(|n| n.has_tag_name(name))
}

/// The blob names and `NextMarker` of a List Blobs answer.
pub(crate) fn parse_page(body: &[u8]) -> Result<Page, String> {
    let text = std::str::from_utf8(body).map_err(|_| "a body that is not UTF-8".to_string())?;
    let doc = crate::remote::xml(text.trim_start_matches('\u{feff}').trim())
        .map_err(|e| crate::remote::xml_error(&e))?;
    let root = doc.root_element();
    if !root.has_tag_name("EnumerationResults") {
        // The element's name is the server's text: not shown.
        return Err("another root element than <EnumerationResults>".to_string());
    }
    let names = child(root, "Blobs")
        .map(|blobs| {
            blobs
                .children()
                .filter(|n| n.has_tag_name("Blob"))
                .map(|blob| {
                    child(blob, "Name")
                        .and_then(|n| n.text())
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default();
    let next = child(root, "NextMarker")
        .and_then(|n| n.text())
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_string);
    Ok(Page { names, next })
}

#[async_trait]
impl KeyedSource for AzureBlobConfig {
    type Client = StorageClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        AzureBlobConfig::parse(ctx)
    }

    fn key(&self) -> &StorageClientKey {
        &self.key
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target(self.metric_type, self.target),
        )]
    }

    async fn read(
        &self,
        client: &StorageClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let count = self.blob_count(client, read).await?;
        Ok(MetricsAndActivity {
            values: vec![MetricValue::new(metric_name, count as f64)],
            active: count > self.activation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    const AUTH: &[(&str, &str)] = &[("connection", "UseDevelopmentStorage=true")];

    fn parse(metadata: &[(&str, &str)]) -> Result<AzureBlobConfig, ScalerError> {
        AzureBlobConfig::parse(&test_context("azure-blob", 0, metadata, &[], AUTH))
    }

    #[test]
    fn defaults_prefix_and_delimiter_follow_keda() {
        let config = parse(&[("blobContainerName", "Uploads.In")]).unwrap();
        assert_eq!(config.metric_name, "s0-azure-blob-Uploads-In");
        assert_eq!((config.target, config.activation), (5, 0));
        assert_eq!(
            (config.delimiter.as_str(), config.prefix.as_str()),
            ("/", "")
        );
        assert!(config.glob.is_none());
        // (metadata, delimiter, prefix)
        type Row<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
        let rows: &[Row<'_>] = &[
            (&[("blobPrefix", "in")], "/", "in/"),
            (&[("blobPrefix", "in"), ("blobDelimiter", "-")], "-", "in-"),
            (&[("blobPrefix", "in"), ("recursive", "true")], "", "in"),
            (&[("recursive", "true")], "", ""),
            (&[("blobDelimiter", "")], "/", ""),
        ];
        for (i, (metadata, delimiter, prefix)) in rows.iter().enumerate() {
            let mut metadata = metadata.to_vec();
            metadata.push(("blobContainerName", "c"));
            let config = parse(&metadata).unwrap();
            assert_eq!(config.delimiter, *delimiter, "row {i}");
            assert_eq!(config.prefix, *prefix, "row {i}");
        }
    }

    #[test]
    fn errors_name_the_trigger_and_the_parameter() {
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[],
                r#"trigger 0 (azure-blob): missing required parameter "blobContainerName""#,
            ),
            (
                &[("blobContainerName", "c"), ("blobCount", "-1")],
                r#"trigger 0 (azure-blob): parameter "blobCount": "-1" is not at least 1"#,
            ),
            (
                &[("blobContainerName", "c"), ("recursive", "yes")],
                r#"trigger 0 (azure-blob): parameter "recursive": "yes" is not a valid boolean"#,
            ),
            (
                &[("blobContainerName", "c"), ("globPattern", "*.{csv")],
                r#"trigger 0 (azure-blob): parameter "globPattern": "*.{csv" is not a valid glob pattern: the '{' at position 2 is not closed"#,
            ),
        ];
        for (i, (metadata, expected)) in rows.iter().enumerate() {
            assert_eq!(
                parse(metadata).expect_err("invalid").to_string(),
                *expected,
                "row {i}"
            );
        }
    }

    #[test]
    fn a_page_gives_blob_names_and_the_next_marker() {
        let body = b"<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults ServiceEndpoint=\"x\" ContainerName=\"c\">\
            <Prefix>in/</Prefix><Delimiter>/</Delimiter><Blobs>\
            <Blob><Name>in/a.csv</Name><Properties/></Blob>\
            <BlobPrefix><Name>in/sub/</Name></BlobPrefix>\
            <Blob><Name>in/b.csv</Name></Blob></Blobs><NextMarker>m2</NextMarker></EnumerationResults>";
        assert_eq!(
            parse_page(body),
            Ok(Page {
                names: vec!["in/a.csv".into(), "in/b.csv".into()],
                next: Some("m2".into()),
            })
        );
        let body = b"<EnumerationResults><Blobs/><NextMarker/></EnumerationResults>";
        assert_eq!(
            parse_page(body),
            Ok(Page {
                names: vec![],
                next: None
            })
        );
        assert_eq!(
            parse_page(b"<Error/>"),
            Err("another root element than <EnumerationResults>".into())
        );
    }
}
