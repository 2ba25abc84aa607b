use super::*;
use crate::context::test_context;

const AUTH: &[(&str, &str)] = &[("personalAccessToken", "pat-s3cret\n")];

fn parse(metadata: &[(&str, &str)]) -> Result<PipelinesConfig, String> {
    let mut all = vec![("organizationURL", "https://dev.azure.com/contoso")];
    all.extend_from_slice(metadata);
    PipelinesConfig::parse(&test_context("azure-pipelines", 0, &all, &[], AUTH))
        .map_err(|e| e.to_string())
}

#[test]
fn keda_s_metadata_cases() {
    let config = parse(&[("poolID", "12")]).unwrap();
    assert_eq!(config.metric_name, "s0-azure-pipelines-12");
    assert_eq!(
        (config.target, config.activation, config.jobs_to_fetch),
        (1, 0, 250)
    );
    assert_eq!(config.matching, Matching::All);
    assert_eq!(
        config.jobs_request(12).unwrap().url.as_str(),
        "https://dev.azure.com/contoso/_apis/distributedtask/pools/12/jobrequests?$top=250"
    );
    let config = parse(&[("poolName", "linux pool"), ("parent", "template")]).unwrap();
    assert_eq!(config.metric_name, "s0-azure-pipelines-linux-pool");
    assert_eq!(config.matching, Matching::Parent("template".into()));
    assert_eq!(
        config.jobs_request(3).unwrap().url.as_str(),
        "https://dev.azure.com/contoso/_apis/distributedtask/pools/3/jobrequests"
    );
    let config = parse(&[("poolID", "3"), ("fetchUnfinishedJobsOnly", "true")]).unwrap();
    assert_eq!(
        config.jobs_request(3).unwrap().url.as_str(),
        "https://dev.azure.com/contoso/_apis/distributedtask/pools/3/jobrequests?completedRequestCount=0"
    );
    // The PAT goes in basic authentication with an empty user, its trailing newline trimmed.
    let key = config.client_key().unwrap();
    assert_eq!(
        key.auth
            .basic
            .as_ref()
            .map(|(u, p)| (u.as_str(), p.expose())),
        Some(("", "pat-s3cret"))
    );
    let rows: &[(&[(&str, &str)], &str)] = &[
        (&[], "no poolName or poolID given"),
        (
            &[
                ("poolID", "1"),
                ("jobsToFetch", "5"),
                ("fetchUnfinishedJobsOnly", "true"),
            ],
            "cannot specify both jobsToFetch and fetchUnfinishedJobsOnly at the same time",
        ),
        (
            &[("poolID", "1"), ("jobsToFetch", "5"), ("parent", "p")],
            "cannot specify both jobsToFetch and parent at the same time",
        ),
        (&[("poolID", "x")], "parameter \"poolID\""),
        (
            &[("poolID", "1"), ("requireAllDemands", "yes")],
            "parameter \"requireAllDemands\"",
        ),
        (
            &[
                ("poolID", "1"),
                ("organizationURL", "https://dev.azure.com/contoso/"),
            ],
            "failed to extract organization name from organizationURL",
        ),
    ];
    for (i, (metadata, error)) in rows.iter().enumerate() {
        let err = parse(metadata).expect_err("invalid");
        assert!(err.contains(error), "row {i}: {err}");
    }
    let err = PipelinesConfig::parse(&test_context(
        "azure-pipelines",
        0,
        &[
            ("organizationURL", "https://dev.azure.com/contoso"),
            ("poolID", "1"),
        ],
        &[],
        &[],
    ))
    .expect_err("no PAT")
    .to_string();
    assert!(
        err.contains("no personalAccessToken given")
            && err.contains("not supported for azure-pipelines yet"),
        "{err}"
    );
}
