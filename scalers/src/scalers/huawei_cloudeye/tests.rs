use super::*;
use crate::context::test_context;

const META: &[(&str, &str)] = &[
    ("namespace", "SYS.ELB"),
    ("dimensionName", "lbaas_instance_id"),
    ("dimensionValue", "5e052238-0346-xxb0-86ea-92d9f33e29d2"),
    ("metricName", "mb_l7_qps"),
    ("targetMetricValue", "100"),
    ("activationTargetMetricValue", "1"),
];

/// KEDA's `testHuaweiAuthenticationWithCloud`.
const AUTH: &[(&str, &str)] = &[
    ("IdentityEndpoint", "https://iam.example.com/v3"),
    ("ProjectID", "none"),
    ("DomainID", "none"),
    ("Region", "none"),
    ("Domain", "none"),
    ("Cloud", "none"),
    ("AccessKey", "none"),
    ("SecretKey", "none"),
];

fn parse_at(
    index: usize,
    metadata: &[(&str, &str)],
    auth: &[(&str, &str)],
) -> Result<CloudeyeConfig, String> {
    CloudeyeConfig::parse(&test_context("huawei-cloudeye", index, metadata, &[], auth))
        .map_err(|e| e.to_string())
}

fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<CloudeyeConfig, String> {
    parse_at(0, metadata, auth)
}

fn without(list: &[(&'static str, &'static str)], name: &str) -> Vec<(&'static str, &'static str)> {
    list.iter().copied().filter(|(k, _)| *k != name).collect()
}

fn with(
    list: &[(&'static str, &'static str)],
    name: &'static str,
    value: &'static str,
) -> Vec<(&'static str, &'static str)> {
    let mut out = without(list, name);
    out.push((name, value));
    out
}

/// KEDA's `testHuaweiCloudeyeMetadata` and `huaweiCloudeyeMetricIdentifiers`.
#[test]
fn parameters_follow_keda() {
    let c = parse(META, AUTH).unwrap();
    assert_eq!(c.metric_name, "s0-huawei-cloudeye-mb_l7_qps");
    assert_eq!(
        parse_at(1, META, AUTH).unwrap().metric_name,
        "s1-huawei-cloudeye-mb_l7_qps"
    );
    assert_eq!((c.target, c.activation), (100.0, 1.0));
    // Defaults: metricCollectionTime 300, metricFilter average, metricPeriod "300", Cloud
    // myhuaweicloud.com.
    assert_eq!(
        (c.collection_time, c.filter.as_str(), c.period.as_str()),
        (300, "average", "300")
    );
    let key = c.key.unwrap();
    assert_eq!(key.cloud, "none");
    assert_eq!(key.identity.as_str(), "https://iam.example.com/v3/");
    let no_cloud = parse(META, &without(AUTH, "Cloud")).unwrap();
    assert_eq!(no_cloud.key.unwrap().cloud, "myhuaweicloud.com");
    // "all parameter"
    let extra: &[(&str, &str)] = &[
        ("metricCollectionTime", "600"),
        ("metricFilter", "max"),
        ("metricPeriod", "1"),
    ];
    let all = [META, extra].concat();
    let c = parse(&all, AUTH).unwrap();
    assert_eq!(
        (c.collection_time, c.filter.as_str(), c.period.as_str()),
        (600, "max", "1")
    );
    // "using activationTargetMetricValue", and its default.
    let c = parse(&with(META, "activationTargetMetricValue", "5"), AUTH).unwrap();
    assert_eq!(c.activation, 5.0);
    let c = parse(&without(META, "activationTargetMetricValue"), AUTH).unwrap();
    assert_eq!(c.activation, 0.0);
    // "Empty structures" and each missing required parameter.
    assert!(parse(&[], AUTH).is_err());
    for name in [
        "namespace",
        "dimensionName",
        "dimensionValue",
        "metricName",
        "targetMetricValue",
    ] {
        let err = parse(&without(META, name), AUTH).unwrap_err();
        assert!(err.contains(&format!("\"{name}\"")), "{err}");
    }
    for name in [
        "IdentityEndpoint",
        "ProjectID",
        "DomainID",
        "Region",
        "Domain",
        "AccessKey",
        "SecretKey",
    ] {
        let err = parse(META, &without(AUTH, name)).unwrap_err();
        assert!(err.contains(&format!("\"{name}\"")), "{err}");
    }
    // "invalid activationTargetMetricValue"
    let err = parse(&with(META, "activationTargetMetricValue", "aaaaa"), AUTH).unwrap_err();
    assert!(err.contains("\"activationTargetMetricValue\""), "{err}");
    // minMetricValue is refused with KEDA's deprecation text.
    let err = parse(&with(META, "minMetricValue", "1.1"), AUTH).unwrap_err();
    assert!(
        err.contains("minMetricValue") && err.contains("activationTargetMetricValue"),
        "{err}"
    );
    // metricFilter is one of KEDA's enum.
    let err = parse(&with(META, "metricFilter", "variance"), AUTH).unwrap_err();
    assert!(err.contains("\"metricFilter\""), "{err}");
    // The auth parameters come from the TriggerAuthentication only.
    let access_key: &[(&str, &str)] = &[("AccessKey", "ak")];
    let in_metadata = [META, access_key].concat();
    assert!(
        parse(&in_metadata, &without(AUTH, "AccessKey"))
            .unwrap_err()
            .contains("\"AccessKey\"")
    );
    // An identity endpoint that is no URL builds the trigger; every read fails naming it.
    let c = parse(META, &with(AUTH, "IdentityEndpoint", "iam.example.com")).unwrap();
    assert!(
        c.client_key()
            .unwrap_err()
            .to_string()
            .contains("\"IdentityEndpoint\"")
    );
    // Secrets are never quoted: neither by a refusal of the metadata once every parameter was
    // read, nor by a read that fails on the TriggerAuthentication's identity endpoint.
    let secret = with(AUTH, "SecretKey", "s3cret-SK");
    let bad_filter = with(META, "metricFilter", "median");
    let err = parse(&bad_filter, &secret).unwrap_err();
    assert!(err.contains("\"metricFilter\""), "{err}");
    assert!(!err.contains("s3cret-SK"), "{err}");
    let bad_endpoint = with(&secret, "IdentityEndpoint", "iam.example.com");
    let err = parse(META, &bad_endpoint)
        .unwrap()
        .client_key()
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"IdentityEndpoint\""), "{err}");
    assert!(!err.contains("s3cret-SK"), "{err}");
}

#[test]
fn the_query_is_keda_s() {
    let c = parse(META, AUTH).unwrap();
    let now: jiff::Timestamp = "2026-01-01T12:00:42Z".parse().unwrap();
    let body: serde_json::Value = serde_json::from_str(&c.query(now)).unwrap();
    let to = 1_767_268_800_000_i64; // 12:00:00
    assert_eq!(
        body,
        serde_json::json!({
            "metrics": [{
                "namespace": "SYS.ELB",
                "dimensions": [{"name": "lbaas_instance_id", "value": "5e052238-0346-xxb0-86ea-92d9f33e29d2"}],
                "metric_name": "mb_l7_qps",
            }],
            "from": to - 300_000,
            "to": to,
            "period": "300",
            "filter": "average",
        })
    );
}

fn key(region: &str, cloud: &str) -> CloudeyeKey {
    CloudeyeKey {
        identity: url::Url::parse("https://iam.example.com/v3/").unwrap(),
        project_id: "p-1".into(),
        domain_id: "d-1".into(),
        region: region.into(),
        cloud: cloud.into(),
        access_key: Secret::new("ak"),
        secret_key: Secret::new("sk"),
        timeout: Duration::from_secs(3),
    }
}

fn endpoint(service: &str, interface: &str, url: &str) -> response::Endpoint {
    response::Endpoint {
        service_id: service.into(),
        interface: interface.into(),
        url: url.into(),
    }
}

#[test]
fn cloud_eye_s_endpoint_is_gophercloud_s() {
    let services = vec![
        ("s-ces".to_string(), "cesv1".to_string()),
        ("s-ecs".to_string(), "ecs".to_string()),
    ];
    let none = VendorEndpoints::default();
    let k = key("cn-north-4", "myhuaweicloud.com");
    // The one public cesv1 endpoint, its tenant made the project.
    let endpoints = vec![
        endpoint("s-ecs", "public", "https://ecs.x/v1/$(tenant_id)s"),
        endpoint(
            "s-ces",
            "internal",
            "https://ces-internal.x/V1.0/$(tenant_id)s",
        ),
        endpoint("s-ces", "public", "https://ces.x/V1.0/$(tenant_id)s"),
    ];
    assert_eq!(
        ces_url(&k, &services, &endpoints, &none).unwrap().as_str(),
        "https://ces.x/V1.0/p-1/"
    );
    // None, or two: the pattern on Region and Cloud.
    let pattern = "https://ces.cn-north-4.myhuaweicloud.com/V1.0/p-1/";
    assert_eq!(
        ces_url(&k, &services, &endpoints[..2], &none)
            .unwrap()
            .as_str(),
        pattern
    );
    let two = [
        endpoints.clone(),
        vec![endpoint(
            "s-ces",
            "public",
            "https://ces.y/V1.0/$(tenant_id)s",
        )],
    ]
    .concat();
    assert_eq!(
        ces_url(&k, &services, &two, &none).unwrap().as_str(),
        pattern
    );
    // Through the process's vendor endpoints (tests).
    let redirected = VendorEndpoints::default().with(
        "ces.cn-north-4.myhuaweicloud.com",
        url::Url::parse("http://127.0.0.1:9999").unwrap(),
    );
    assert_eq!(
        ces_url(&k, &services, &[], &redirected).unwrap().as_str(),
        "http://127.0.0.1:9999/V1.0/p-1/"
    );
    // Region and Cloud must make a host name.
    for (region, cloud, param) in [
        ("r/../x", "c.com", "Region"),
        ("r", "evil.com@x", "Cloud"),
        ("r", "c.com:1", "Cloud"),
    ] {
        let err = ces_url(&key(region, cloud), &services, &[], &none).unwrap_err();
        assert!(err.0.contains(&format!("\"{param}\"")), "{}", err.0);
    }
    let bad = vec![endpoint("s-ces", "public", "ces.x/V1.0")];
    assert!(
        ces_url(&k, &services, &bad, &none)
            .unwrap_err()
            .0
            .contains("IdentityEndpoint")
    );
}

#[test]
fn the_identity_endpoint_s_version_is_gophercloud_s() {
    let base = |s: &str| version_base(&url::Url::parse(s).unwrap()).to_string();
    assert_eq!(base("https://iam.x/v3/"), "https://iam.x/");
    assert_eq!(
        base("https://iam.x/identity/v2.0/"),
        "https://iam.x/identity/"
    );
    assert_eq!(base("https://iam.x/"), "https://iam.x/");
    let doc = br#"{"versions":{"values":[
        {"id":"v2.0","status":"deprecated","links":[{"rel":"self","href":"https://iam.x/v2.0"}]},
        {"id":"v3.0","status":"stable","links":[{"rel":"self","href":"https://iam.x/v3"}]}]}}"#;
    assert_eq!(
        response::choose_version(doc, "https://iam.x/").unwrap(),
        "https://iam.x/v3/"
    );
    // The version whose link is the identity endpoint wins, whatever its status.
    assert_eq!(
        response::choose_version(doc, "https://iam.x/v2.0/").unwrap(),
        "https://iam.x/v2.0/"
    );
    let none = br#"{"versions":{"values":[{"id":"v1.1","status":"stable","links":[]}]}}"#;
    assert!(response::choose_version(none, "https://iam.x/").is_err());
    let no_link = br#"{"versions":{"values":[{"id":"v3.0","status":"CURRENT","links":[]}]}}"#;
    assert!(
        response::choose_version(no_link, "https://iam.x/")
            .unwrap_err()
            .contains("no link")
    );
    assert!(response::choose_version(b"SECRETSECRET", "x").is_err());
}

#[test]
fn iam_lists_are_read_with_their_next_links() {
    let (services, next) = response::services_page(
        br#"{"services":[{"id":"s1","type":"cesv1","name":"ces","enabled":true}],
            "links":{"self":"https://iam.x/v3/services","next":"https://iam.x/v3/services?page=2","previous":null}}"#,
    )
    .unwrap();
    assert_eq!(services, vec![("s1".to_string(), "cesv1".to_string())]);
    assert_eq!(next.as_deref(), Some("https://iam.x/v3/services?page=2"));
    let (endpoints, next) = response::endpoints_page(
        br#"{"endpoints":[{"id":"e1","service_id":"s1","interface":"public","region":"r","url":"https://ces.x/V1.0/$(tenant_id)s"}],
            "links":{"self":"https://iam.x/v3/endpoints","next":null}}"#,
    )
    .unwrap();
    assert_eq!(endpoints.len(), 1);
    assert_eq!(next, None);
    for bad in [&b"{}"[..], b"[]", b"SECRETSECRET"] {
        let e = response::services_page(bad).unwrap_err();
        assert!(!e.contains("SECRETSECRET"), "{e}");
        assert!(response::endpoints_page(bad).is_err());
    }
}

#[test]
fn the_value_is_the_first_datapoint_s_filter() {
    let body = br#"{"metrics":[{"unit":"request/s","datapoints":[
        {"average":2.5,"timestamp":1484401920000},{"average":7,"timestamp":1484407920000}],
        "namespace":"SYS.ELB","dimensions":[{"name":"lbaas_instance_id","value":"x"}],"metric_name":"mb_l7_qps"}]}"#;
    assert_eq!(response::first_datapoint(body, "average"), Ok(2.5));
    assert!(
        response::first_datapoint(body, "max")
            .unwrap_err()
            .contains("\"max\"")
    );
    let empty = br#"{"metrics":[{"datapoints":[],"metric_name":"m"}]}"#;
    assert!(
        response::first_datapoint(empty, "average")
            .unwrap_err()
            .contains("no datapoint")
    );
    assert!(response::first_datapoint(br#"{"metrics":[]}"#, "average").is_err());
    let text = br#"{"metrics":[{"datapoints":[{"average":"SECRETSECRET"}]}]}"#;
    for bad in [&text[..], b"SECRETSECRET", b"{}"] {
        let e = response::first_datapoint(bad, "average").unwrap_err();
        assert!(!e.contains("SECRETSECRET"), "{e}");
    }
}

#[test]
fn error_answers_show_known_codes_in_our_words_never_the_message() {
    let answer = |status: u16, body: &str| HttpAnswer {
        status: StatusCode::from_u16(status).unwrap(),
        headers: HeaderMap::new(),
        body: Bytes::from(body.to_string()),
    };
    let text = status_failure(answer(
        401,
        r#"{"error_code":"APIGW.0301","error_msg":"Incorrect IAM authentication information: SECRET-TEXT","request_id":"r"}"#,
    ))
    .to_string();
    assert!(
        text.contains("APIGW.0301") && text.contains("401") && text.contains("SecretKey"),
        "{text}"
    );
    assert!(!text.contains("SECRET-TEXT"), "{text}");
    let text = status_failure(answer(
        429,
        r#"{"error_code":"APIGW.0308","error_msg":"The throttling threshold has been reached SECRET-TEXT"}"#,
    ))
    .to_string();
    assert!(text.contains("429") && text.contains("throttled"), "{text}");
    let text = status_failure(answer(
        400,
        r#"{"code":400,"message":"x","details":{"code":"ces.0014","details":"SECRET-TEXT"}}"#,
    ))
    .to_string();
    assert!(
        text.contains("ces.0014") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    let text = status_failure(answer(500, r#"{"error_code":"SECRET.CODE"}"#)).to_string();
    assert!(text.contains("500") && !text.contains("SECRET"), "{text}");
}

#[test]
fn an_iam_list_keeps_at_most_its_bound_of_entries_over_its_pages() {
    let mut all = Vec::new();
    append_bounded(&mut all, vec![0u8; MAX_LIST_ENTRIES - 1]).expect("under the bound");
    append_bounded(&mut all, vec![1]).expect("exactly the bound");
    let error = append_bounded(&mut all, vec![2]).expect_err("one past the bound");
    assert_eq!(
        error,
        format!("the list has more than {MAX_LIST_ENTRIES} entries")
    );
    assert_eq!(
        all.len(),
        MAX_LIST_ENTRIES,
        "nothing of the refused page kept"
    );
}

#[test]
fn a_collection_time_of_zero_or_less_is_refused_naming_it() {
    for bad in ["0", "-300"] {
        let err = parse(&with(META, "metricCollectionTime", bad), AUTH).unwrap_err();
        assert!(err.contains("\"metricCollectionTime\""), "{bad}: {err}");
        assert!(err.contains("above 0"), "{bad}: {err}");
    }
    assert_eq!(
        parse(&with(META, "metricCollectionTime", "60"), AUTH)
            .unwrap()
            .collection_time,
        60
    );
}

/// An IAM page of many tiny entries (`{},` is 3 bytes: an 8 MiB answer holds 2.8 million) is
/// refused at the list's bound while it is read, not made whole first.
#[test]
fn an_iam_page_past_the_list_bound_is_refused_while_it_is_read() {
    let page = |kind: &str, entries: usize| {
        let mut text = format!(r#"{{"{kind}":["#);
        text.push_str(&vec!["{}"; entries].join(","));
        text.push_str("]}");
        text.into_bytes()
    };
    let (services, _) =
        response::services_page(&page("services", MAX_LIST_ENTRIES)).expect("at the bound");
    assert_eq!(services.len(), MAX_LIST_ENTRIES);
    let error = response::services_page(&page("services", 3 * MAX_LIST_ENTRIES))
        .expect_err("past the bound");
    assert!(
        error.contains(&format!(
            "an array of more than {MAX_LIST_ENTRIES} elements"
        )),
        "{error}"
    );
    let error = response::endpoints_page(&page("endpoints", MAX_LIST_ENTRIES + 1))
        .expect_err("past the bound");
    assert!(error.contains("more than"), "{error}");
}

/// Of Cloud Eye's answer only the first metric's first datapoint is made: the rest may be long
/// and is dropped as it is read; a value that is not a number is not shown.
#[test]
fn only_the_first_datapoint_of_the_first_metric_is_made() {
    let mut body = String::from(r#"{"metrics":[{"datapoints":[{"average":4,"extra":[[[1]]]}"#);
    for _ in 0..50_000 {
        body.push_str(r#",{"average":1}"#);
    }
    body.push_str("]}");
    for _ in 0..50_000 {
        body.push_str(",{}");
    }
    body.push_str("]}");
    assert_eq!(
        response::first_datapoint(body.as_bytes(), "average"),
        Ok(4.0)
    );
    for (value, expected) in [
        ("null", "is not a number"),
        (r#"[1, 2]"#, "is not a number"),
        (r#"{"SECRETSECRET": 1}"#, "is not a number"),
        ("true", "is not a number"),
    ] {
        let body = format!(r#"{{"metrics":[{{"datapoints":[{{"sum":{value}}}]}}]}}"#);
        let error = response::first_datapoint(body.as_bytes(), "sum").expect_err(value);
        assert!(error.contains(expected), "{value}: {error}");
        assert!(!error.contains("SECRETSECRET"), "{error}");
    }
    let body = br#"{"metrics":[{"datapoints":[{"sum":-2}]}]}"#;
    assert_eq!(response::first_datapoint(body, "sum"), Ok(-2.0));
    assert!(
        response::first_datapoint(body, "average")
            .expect_err("no average")
            .contains("has no \"average\" value")
    );
}

#[test]
fn a_version_document_of_too_many_versions_is_refused() {
    let versions = vec![r#"{"id":"v3","status":"stable","links":[]}"#; 65].join(",");
    let doc = format!(r#"{{"versions":{{"values":[{versions}]}}}}"#);
    let error = response::choose_version(doc.as_bytes(), "https://iam.x/").expect_err("65");
    assert!(error.contains("more than 64"), "{error}");
}
