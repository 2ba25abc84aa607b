//! The answers `huawei-cloudeye` reads: IAM's version document, service and endpoint lists
//! (Keystone v3's shapes, which Huawei IAM keeps) and Cloud Eye's batch query of metric data.
//! Messages say what is wrong in keda-rs' words, never quoting the answer.

use crate::remote::json_error;

/// The `(id, type)` of each service of a page, and the next page's URL.
pub type ServicesPage = (Vec<(String, String)>, Option<String>);

/// One page of `GET /v3/services`: `(id, type)` of each service and the next page's URL.
///
/// # Errors
/// Not `{"services": [...]}`.
pub fn services_page(body: &[u8]) -> Result<ServicesPage, String> {
    #[derive(serde::Deserialize)]
    struct Page {
        services: Vec<Service>,
        #[serde(default)]
        links: Option<Links>,
    }
    #[derive(serde::Deserialize)]
    struct Service {
        #[serde(default)]
        id: String,
        #[serde(default, rename = "type")]
        type_: String,
    }
    let page: Page = serde_json::from_slice(body).map_err(|e| {
        format!(
            "the IAM service list is not {{\"services\": [...]}}: {}",
            json_error(&e)
        )
    })?;
    Ok((
        page.services.into_iter().map(|s| (s.id, s.type_)).collect(),
        page.links.and_then(|l| l.next).filter(|n| !n.is_empty()),
    ))
}

/// An endpoint of IAM's endpoint list.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub struct Endpoint {
    /// The service it belongs to.
    #[serde(default)]
    pub service_id: String,
    /// `public`, `internal` or `admin`.
    #[serde(default)]
    pub interface: String,
    /// Its URL (may hold `$(tenant_id)s`).
    #[serde(default)]
    pub url: String,
}

/// The `links` of a Keystone list.
#[derive(serde::Deserialize)]
struct Links {
    #[serde(default)]
    next: Option<String>,
}

/// One page of `GET /v3/endpoints`: its endpoints and the next page's URL.
///
/// # Errors
/// Not `{"endpoints": [...]}`.
pub fn endpoints_page(body: &[u8]) -> Result<(Vec<Endpoint>, Option<String>), String> {
    #[derive(serde::Deserialize)]
    struct Page {
        endpoints: Vec<Endpoint>,
        #[serde(default)]
        links: Option<Links>,
    }
    let page: Page = serde_json::from_slice(body).map_err(|e| {
        format!(
            "the IAM endpoint list is not {{\"endpoints\": [...]}}: {}",
            json_error(&e)
        )
    })?;
    Ok((
        page.endpoints,
        page.links.and_then(|l| l.next).filter(|n| !n.is_empty()),
    ))
}

/// gophercloud's `ChooseVersion` over a version document (`{"versions": {"values": [{"id",
/// "status", "links": [{"href", "rel"}]}]}}`): the `self` link of the version whose link is
/// `identity` itself, else of the highest of v3 and v2.0 whose status is current, supported
/// or stable. Links are returned with a trailing `/`.
///
/// # Errors
/// Not a version document, no usable version, or the chosen version has no link.
pub fn choose_version(body: &[u8], identity: &str) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct Document {
        versions: Values,
    }
    #[derive(serde::Deserialize)]
    struct Values {
        #[serde(default)]
        values: Vec<Version>,
    }
    #[derive(serde::Deserialize)]
    struct Version {
        #[serde(default)]
        id: String,
        #[serde(default)]
        status: String,
        #[serde(default)]
        links: Vec<Link>,
    }
    #[derive(serde::Deserialize)]
    struct Link {
        #[serde(default)]
        href: String,
        #[serde(default)]
        rel: String,
    }
    let document: Document = serde_json::from_slice(body).map_err(|e| {
        format!(
            "the identity endpoint's version document is not {{\"versions\": {{\"values\": [...]}}}}: {}",
            json_error(&e)
        )
    })?;
    let normalize = |href: &str| {
        if href.is_empty() || href.ends_with('/') {
            href.to_string()
        } else {
            format!("{href}/")
        }
    };
    let mut highest: Option<(u8, String)> = None;
    for version in &document.versions.values {
        let href = version
            .links
            .iter()
            .rev()
            .find(|l| l.rel == "self")
            .map(|l| normalize(&l.href))
            .unwrap_or_default();
        for (id, priority) in [("v2.0", 20), ("v3", 30)] {
            if !version.id.contains(id) {
                continue;
            }
            if !href.is_empty() && href == identity {
                return Ok(href);
            }
            let good = matches!(
                version.status.to_ascii_lowercase().as_str(),
                "current" | "supported" | "stable"
            );
            if good && highest.as_ref().is_none_or(|(p, _)| priority > *p) {
                highest = Some((priority, href.clone()));
            }
        }
    }
    match highest {
        None => Err("the identity endpoint offers no supported version (v3 or v2.0)".into()),
        Some((_, href)) if href.is_empty() => {
            Err("the identity endpoint's chosen version has no link".into())
        }
        Some((_, href)) => Ok(href),
    }
}

/// KEDA's reading of Cloud Eye's batch query answer (`{"metrics": [{"datapoints":
/// [{"<filter>": 1.5, "timestamp": ...}], ...}]}`): the `filter` field of the first datapoint
/// of the first metric.
///
/// # Errors
/// Not that shape, no metric, no datapoint (KEDA: "metric Data not received"), or the field is
/// not a finite number.
pub fn first_datapoint(body: &[u8], filter: &str) -> Result<f64, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        metrics: Vec<Metric>,
    }
    #[derive(serde::Deserialize)]
    struct Metric {
        #[serde(default)]
        datapoints: Option<Vec<serde_json::Map<String, serde_json::Value>>>,
    }
    let answer: Answer = serde_json::from_slice(body).map_err(|e| {
        format!(
            "the Cloud Eye answer is not {{\"metrics\": [...]}}: {}",
            json_error(&e)
        )
    })?;
    let metric = answer
        .metrics
        .first()
        .ok_or("the Cloud Eye answer holds no metric")?;
    let point = metric
        .datapoints
        .as_deref()
        .and_then(<[_]>::first)
        .ok_or("Cloud Eye returned no datapoint for the metric in the collection time")?;
    match point.get(filter) {
        Some(serde_json::Value::Number(n)) => n
            .as_f64()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("the datapoint's \"{filter}\" is not a finite number")),
        Some(_) => Err(format!("the datapoint's \"{filter}\" is not a number")),
        None => Err(format!("the datapoint has no \"{filter}\" value")),
    }
}

/// The error code of a Huawei Cloud error answer: API Gateway's `error_code`
/// (`{"error_code": "APIGW.0301", "error_msg": ...}`) or Cloud Eye's `details.code`
/// (`{"details": {"code": "ces.0014", "details": ...}}`).
pub fn error_code(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let code = value
        .get("error_code")
        .or_else(|| value.get("details").and_then(|d| d.get("code")))?;
    code.as_str().map(str::to_string)
}
