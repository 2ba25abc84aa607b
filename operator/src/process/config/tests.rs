use super::*;

fn parse(args: &[&str], env: &MapEnv) -> Result<Settings, ConfigError> {
    let mut argv = vec!["keda-operator"];
    argv.extend_from_slice(args);
    Settings::from_sources(argv, env)
}

fn addr(s: &str) -> Option<SocketAddr> {
    Some(s.parse().expect("socket address"))
}

#[test]
fn no_flags_and_no_environment_give_keda_s_defaults() {
    let settings = parse(&[], &MapEnv::default()).expect("defaults");
    assert_eq!(settings.metrics_addr, addr("0.0.0.0:8080"));
    assert_eq!(settings.probe_addr, addr("0.0.0.0:8081"));
    assert_eq!(settings.metrics_service_addr, addr("0.0.0.0:9666"));
    assert_eq!(settings.explain_addr, addr("0.0.0.0:8082"));
    assert_eq!(settings.leader_election, None);
    assert_eq!(settings.kube_api_qps, 20.0);
    assert_eq!(settings.kube_api_burst, 30);
    assert_eq!(
        settings.explain_review_budget,
        crate::serve::explain::auth::ReviewBudget {
            qps: 5.0,
            burst: 10
        }
    );
    assert_eq!(settings.watch_namespaces, WatchScope::All);
    assert_eq!(settings.pod_namespace, "keda");
    assert_eq!(settings.cluster_object_namespace, "keda");
    assert_eq!(settings.log_format, LogFormat::Text);
    assert_eq!(settings.log_filter, "info");
    assert_eq!(settings.http_default_timeout, Duration::from_millis(3000));
    assert_eq!(settings.scaled_object_max_reconciles, 5);
    assert_eq!(settings.scaled_job_max_reconciles, 1);
    assert_eq!(settings.watch_label_selector, None);
    assert!(!settings.restrict_secret_access);
    assert!(!settings.high_cardinality_metrics_labels);
    assert!(!settings.allow_hpa_ownership_transfer);
    assert!(!settings.check_unexpected_scalers_params);
}

#[test]
fn answer_bytes_per_namespace_default_to_the_scalers_budget_and_refuse_zero() {
    let settings = parse(&[], &MapEnv::default()).expect("defaults");
    assert_eq!(
        settings.answer_bytes_per_namespace,
        keda_scalers::answers::DEFAULT_ANSWER_BYTES_PER_NAMESPACE
    );
    let settings = parse(
        &["--answer-bytes-per-namespace", "1048576"],
        &MapEnv::default(),
    )
    .expect("a number of bytes");
    assert_eq!(settings.answer_bytes_per_namespace, 1 << 20);
    assert!(parse(&["--answer-bytes-per-namespace", "0"], &MapEnv::default()).is_err());
    assert!(
        parse(
            &["--answer-bytes-per-namespace", "64Mi"],
            &MapEnv::default()
        )
        .is_err()
    );
}

/// KEDA's `KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS` is on only for the exact value `enabled`
/// (`os.Getenv(...) == "enabled"`), and reaches the scalers the controllers build; another
/// value leaves it off, with a warning line.
#[test]
fn unexpected_scaler_params_are_checked_only_when_enabled() {
    let on = parse(
        &[],
        &MapEnv::new(&[("KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS", "enabled")]),
    )
    .expect("settings");
    assert!(on.check_unexpected_scalers_params);
    assert!(on.keda.warnings.is_empty(), "{:?}", on.keda.warnings);
    let config = crate::ControllerConfig::from_settings(
        &on,
        crate::process::telemetry::Metrics::new(),
        keda_scalers::pool::ClientPools::new(),
    );
    assert!(config.env.unexpected_params.is_checking());
    let off = parse(
        &[],
        &MapEnv::new(&[("KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS", "true")]),
    )
    .expect("settings");
    assert!(!off.check_unexpected_scalers_params);
    assert_eq!(
        off.keda.warnings,
        [
            "KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS=\"true\" has no effect: only the value \"enabled\" turns the check on, as in KEDA"
        ]
    );
    let config = crate::ControllerConfig::from_settings(
        &off,
        crate::process::telemetry::Metrics::new(),
        keda_scalers::pool::ClientPools::new(),
    );
    assert!(!config.env.unexpected_params.is_checking());
}

#[test]
fn hpa_ownership_transfer_is_an_opt_in_that_reaches_the_controller() {
    let settings =
        parse(&["--allow-hpa-ownership-transfer"], &MapEnv::default()).expect("settings");
    assert!(settings.allow_hpa_ownership_transfer);
    let config = crate::ControllerConfig::from_settings(
        &settings,
        crate::process::telemetry::Metrics::new(),
        keda_scalers::pool::ClientPools::new(),
    );
    assert!(config.allow_hpa_ownership_transfer);
}

#[test]
fn last_active_time_is_refreshed_only_when_asked_and_within_an_hour() {
    let defaults = parse(&[], &MapEnv::default()).expect("defaults");
    assert_eq!(defaults.last_active_time_refresh, None);
    let config = crate::ControllerConfig::from_settings(
        &defaults,
        crate::process::telemetry::Metrics::new(),
        keda_scalers::pool::ClientPools::new(),
    );
    assert_eq!(config.persist_interval, None);
    let off = parse(&["--last-active-time-refresh=0s"], &MapEnv::default()).expect("0s");
    assert_eq!(off.last_active_time_refresh, None);
    let every = parse(&["--last-active-time-refresh", "5m"], &MapEnv::default()).expect("settings");
    assert_eq!(
        every.last_active_time_refresh,
        Some(Duration::from_secs(300))
    );
    let config = crate::ControllerConfig::from_settings(
        &every,
        crate::process::telemetry::Metrics::new(),
        keda_scalers::pool::ClientPools::new(),
    );
    assert_eq!(
        config.persist_interval,
        Some(jiff::SignedDuration::from_mins(5))
    );
    for bad in ["2h", "61m", "often"] {
        let error =
            parse(&["--last-active-time-refresh", bad], &MapEnv::default()).expect_err("refused");
        assert!(error.to_string().contains("1h"), "{bad}: {error}");
    }
}

#[test]
fn high_cardinality_metrics_labels_take_keda_s_flag() {
    for (args, expected) in [
        (&["--enable-high-cardinality-metrics-labels"][..], true),
        (&["--enable-high-cardinality-metrics-labels=true"][..], true),
        (
            &["--enable-high-cardinality-metrics-labels=false"][..],
            false,
        ),
    ] {
        let settings = parse(args, &MapEnv::default()).expect("settings");
        assert_eq!(
            settings.high_cardinality_metrics_labels, expected,
            "{args:?}"
        );
    }
}

#[test]
fn keda_restrict_secret_access_reaches_the_resolver_of_the_controllers() {
    let env = MapEnv::new(&[
        (ENV_RESTRICT_SECRET_ACCESS, "true"),
        (ENV_CLUSTER_OBJECT_NAMESPACE, "keda-system"),
    ]);
    let settings = parse(&[], &env).expect("settings");
    assert!(settings.restrict_secret_access);
    let config = crate::ControllerConfig::from_settings(
        &settings,
        crate::process::telemetry::Metrics::new(),
        keda_scalers::pool::ClientPools::new(),
    );
    assert!(config.resolver.restrict_secret_access);
    assert_eq!(config.resolver.cluster_object_namespace, "keda-system");
    let settings =
        parse(&[], &MapEnv::new(&[(ENV_RESTRICT_SECRET_ACCESS, "yes")])).expect("settings");
    assert!(!settings.restrict_secret_access, "only true restricts");
}

#[test]
fn keda_s_tuning_variables_are_read_within_their_bounds() {
    let env = MapEnv::new(&[
        (ENV_HTTP_DEFAULT_TIMEOUT, "15000"),
        (ENV_SCALEDOBJECT_MAX_RECONCILES, "40"),
        (ENV_SCALEDJOB_MAX_RECONCILES, " 3 "),
        (ENV_WATCH_LABEL_SELECTOR, "team in (shop, pay), !legacy"),
        (ENV_WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH, "shared=true"),
    ]);
    let settings = parse(&[], &env).expect("settings");
    assert_eq!(settings.http_default_timeout, Duration::from_secs(15));
    assert_eq!(settings.scaled_object_max_reconciles, 40);
    assert_eq!(settings.scaled_job_max_reconciles, 3);
    assert_eq!(
        settings.watch_label_selector.as_deref(),
        Some("team in (shop, pay), !legacy")
    );
    let config = crate::ControllerConfig::from_settings(
        &settings,
        crate::process::telemetry::Metrics::new(),
        keda_scalers::pool::ClientPools::new(),
    );
    assert_eq!(config.env.http_timeout, Duration::from_secs(15));
    assert_eq!(config.max_concurrent_reconciles, 40);
    assert_eq!(config.scaled_job_max_concurrent_reconciles, 3);
    assert_eq!(
        config.label_selector.as_deref(),
        Some("team in (shop, pay), !legacy")
    );
    assert_eq!(
        config.resolver.auth_label_selector.as_deref(),
        Some("shared=true"),
        "WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH reaches the resolvers"
    );
    // KEDA reads `""` (two quotes, a common manifest slip) as unset.
    let settings = parse(
        &[],
        &MapEnv::new(&[(ENV_WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH, "\"\"")]),
    )
    .expect("settings");
    assert_eq!(settings.watch_label_selector_for_trigger_auth, None);
}

#[test]
fn the_bound_service_account_token_expiry_is_a_go_duration_between_one_and_six_hours() {
    let expiry = |value: &str| {
        parse(
            &[],
            &MapEnv::new(&[(ENV_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY, value)]),
        )
        .map(|s| s.bound_service_account_token_expiry)
        .map_err(|e| e.to_string())
    };
    assert_eq!(expiry(""), Ok(Duration::from_secs(3600)));
    assert_eq!(expiry("2h30m"), Ok(Duration::from_secs(9000)));
    assert_eq!(expiry("6h"), Ok(Duration::from_secs(6 * 3600)));
    for bad in ["59m", "6h1s", "1e20", "soon"] {
        assert_eq!(
            expiry(bad),
            Err(format!(
                "KEDA_BOUND_SERVICE_ACCOUNT_TOKEN_EXPIRY={bad:?} must be a duration between 1h and 6h"
            ))
        );
    }
}

#[test]
fn tuning_variables_out_of_bounds_name_the_variable_and_the_bound() {
    for (name, value, expected) in [
        (
            ENV_HTTP_DEFAULT_TIMEOUT,
            "0",
            r#"KEDA_HTTP_DEFAULT_TIMEOUT="0" is not a whole number between 1 and 3600000"#,
        ),
        (
            ENV_HTTP_DEFAULT_TIMEOUT,
            "1e20",
            r#"KEDA_HTTP_DEFAULT_TIMEOUT="1e20" is not a whole number between 1 and 3600000"#,
        ),
        (
            ENV_SCALEDOBJECT_MAX_RECONCILES,
            "0",
            r#"KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES="0" is not a whole number between 1 and 1000"#,
        ),
        (
            ENV_SCALEDJOB_MAX_RECONCILES,
            "70000",
            r#"KEDA_SCALEDJOB_CTRL_MAX_RECONCILES="70000" is not a whole number between 1 and 1000"#,
        ),
        (
            ENV_WATCH_LABEL_SELECTOR,
            "team in ()",
            r#"WATCH_LABEL_SELECTOR="team in ()" is not a label selector: "#,
        ),
        (
            ENV_WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH,
            "a=b,",
            r#"WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH="a=b," is not a label selector: "#,
        ),
    ] {
        let error = parse(&[], &MapEnv::new(&[(name, value)])).expect_err(value);
        assert!(error.to_string().starts_with(expected), "{error}");
    }
}

#[test]
fn leader_election_uses_the_pod_name_namespace_and_default_durations() {
    let env = MapEnv::new(&[
        ("POD_NAMESPACE", "autoscaling"),
        ("POD_NAME", "keda-operator-7d9f"),
    ]);
    let settings = parse(&["--leader-elect"], &env).expect("settings");
    assert_eq!(
        settings.leader_election,
        Some(LeaseConfig::new(
            "operator.keda.sh",
            "autoscaling",
            "keda-operator-7d9f"
        ))
    );
}

#[test]
fn leader_elect_accepts_go_style_explicit_values() {
    let env = MapEnv::default();
    assert!(
        parse(&["--leader-elect=true"], &env)
            .expect("true")
            .leader_election
            .is_some()
    );
    assert!(
        parse(&["--leader-elect=false"], &env)
            .expect("false")
            .leader_election
            .is_none()
    );
}

#[test]
fn without_a_pod_name_the_identity_is_host_and_pid() {
    let env = MapEnv::new(&[("HOSTNAME", "laptop")]);
    let lease = parse(&["--leader-elect"], &env)
        .expect("settings")
        .leader_election
        .expect("enabled");
    assert_eq!(lease.identity, "laptop_4242");
}

#[test]
fn lease_durations_come_from_keda_s_variables_in_go_format() {
    let env = MapEnv::new(&[
        (ENV_LEASE_DURATION, "1m30s"),
        (ENV_RENEW_DEADLINE, "20s"),
        (ENV_RETRY_PERIOD, "500ms"),
    ]);
    let lease = parse(&["--leader-elect", "--leader-election-id", "shard-a"], &env)
        .expect("settings")
        .leader_election
        .expect("enabled");
    assert_eq!(lease.name, "shard-a");
    assert_eq!(lease.lease_duration, Duration::from_secs(90));
    assert_eq!(lease.renew_deadline, Duration::from_secs(20));
    assert_eq!(lease.retry_period, Duration::from_millis(500));
}

#[test]
fn a_malformed_duration_names_the_variable_and_the_format() {
    let env = MapEnv::new(&[(ENV_RETRY_PERIOD, "soon")]);
    let error = parse(&["--leader-elect"], &env).expect_err("bad duration");
    assert_eq!(
        error.to_string(),
        r#"KEDA_OPERATOR_LEADER_ELECTION_RETRY_PERIOD="soon" is not a duration: use Go's format, for example 15s, 500ms or 1m30s"#
    );
}

#[test]
fn a_renew_deadline_longer_than_the_lease_is_refused() {
    let env = MapEnv::new(&[(ENV_LEASE_DURATION, "5s"), (ENV_RENEW_DEADLINE, "10s")]);
    let error = parse(&["--leader-elect"], &env).expect_err("inconsistent");
    assert!(
            error
                .to_string()
                .contains("KEDA_OPERATOR_LEADER_ELECTION_LEASE_DURATION must be greater than KEDA_OPERATOR_LEADER_ELECTION_RENEW_DEADLINE"),
            "{error}"
        );
}

#[test]
fn durations_are_ignored_when_leader_election_is_off() {
    let env = MapEnv::new(&[(ENV_RETRY_PERIOD, "soon")]);
    assert!(parse(&[], &env).is_ok());
}

#[test]
fn watch_namespace_is_a_comma_list_and_empty_means_all() {
    for (value, expected) in [
        ("", WatchScope::All),
        (" , ", WatchScope::All),
        ("team-a", WatchScope::Namespaces(vec!["team-a".into()])),
        (
            "team-b, team-a,team-b,",
            WatchScope::Namespaces(vec!["team-a".into(), "team-b".into()]),
        ),
    ] {
        let env = MapEnv::new(&[(ENV_WATCH_NAMESPACE, value)]);
        assert_eq!(
            parse(&[], &env).expect("settings").watch_namespaces,
            expected,
            "{value:?}"
        );
    }
}

#[test]
fn bind_addresses_accept_go_forms_and_zero_disables() {
    let settings = parse(
        &[
            "--metrics-bind-address",
            "127.0.0.1:9100",
            "--health-probe-bind-address=0",
            "--metrics-service-bind-address",
            "localhost:9667",
        ],
        &MapEnv::default(),
    )
    .expect("settings");
    assert_eq!(settings.metrics_addr, addr("127.0.0.1:9100"));
    assert_eq!(settings.probe_addr, None);
    assert_eq!(settings.metrics_service_addr, addr("127.0.0.1:9667"));
    let error =
        parse(&["--metrics-bind-address", "nowhere"], &MapEnv::default()).expect_err("bad address");
    assert!(
        error
            .to_string()
            .contains(r#""nowhere" is not a listen address: use :PORT, IP:PORT, or 0 to disable"#),
        "{error}"
    );
}

#[test]
fn certificate_files_are_checked_every_ten_seconds_unless_told_otherwise() {
    let env = MapEnv::default();
    let settings = parse(&[], &env).expect("settings");
    assert_eq!(settings.cert_reload_interval, Duration::from_secs(10));
    let settings = parse(&["--cert-reload-interval", "1m30s"], &env).expect("settings");
    assert_eq!(settings.cert_reload_interval, Duration::from_secs(90));
    let error = parse(&["--cert-reload-interval", "0s"], &env).expect_err("zero");
    assert!(
        error
            .to_string()
            .contains(r#""0s" is not a duration between 1ns and 1h"#),
        "{error}"
    );
}

#[test]
fn qps_burst_and_logging_flags_parse_including_keda_s_zap_names() {
    let settings = parse(
        &[
            "--kube-api-qps",
            "100",
            "--kube-api-burst",
            "150",
            "--zap-encoder",
            "json",
            "--zap-log-level",
            "debug",
        ],
        &MapEnv::default(),
    )
    .expect("settings");
    assert_eq!(settings.kube_api_qps, 100.0);
    assert_eq!(settings.kube_api_burst, 150);
    assert_eq!(settings.log_format, LogFormat::Json);
    assert_eq!(settings.log_filter, "debug");
}

#[test]
fn qps_and_durations_out_of_range_are_refused_naming_the_bound() {
    // A tiny QPS made the limiter's wait overflow `Duration::from_secs_f64` (a panic).
    for qps in ["1e-30", "0.001", "1e7", "NaN", "inf"] {
        let error = parse(&["--kube-api-qps", qps], &MapEnv::default()).expect_err(qps);
        assert!(
            error.to_string().contains("between 0.01 and 1000000"),
            "{qps}: {error}"
        );
    }
    for unlimited in ["0", "-1"] {
        let settings = parse(&["--kube-api-qps", unlimited], &MapEnv::default()).expect(unlimited);
        assert!(settings.kube_api_qps <= 0.0);
    }
    let error = parse(&["--cert-reload-interval", "2h"], &MapEnv::default()).expect_err("too long");
    assert!(error.to_string().contains("between 1ns and 1h"), "{error}");
    let env = MapEnv::new(&[(ENV_LEASE_DURATION, "100000h")]);
    let error = parse(&["--leader-elect"], &env).expect_err("too long");
    assert_eq!(
        error.to_string(),
        "KEDA_OPERATOR_LEADER_ELECTION_LEASE_DURATION=\"100000h\" is too long: at most 1h"
    );
}

#[test]
fn the_explain_review_budget_is_positive_and_bounded() {
    let settings = parse(
        &[
            "--explain-kube-api-qps",
            "0.5",
            "--explain-kube-api-burst",
            "3",
        ],
        &MapEnv::default(),
    )
    .expect("settings");
    assert_eq!(
        settings.explain_review_budget,
        crate::serve::explain::auth::ReviewBudget { qps: 0.5, burst: 3 }
    );
    for qps in ["0", "-1", "1e7", "NaN"] {
        let error = parse(&["--explain-kube-api-qps", qps], &MapEnv::default()).expect_err(qps);
        assert!(
            error.to_string().contains("--explain-kube-api-qps")
                && error.to_string().contains("between 0.01 and 1000000"),
            "{qps}: {error}"
        );
    }
    let error =
        parse(&["--explain-kube-api-burst", "0"], &MapEnv::default()).expect_err("no burst");
    assert!(
        error.to_string().contains("--explain-kube-api-burst"),
        "{error}"
    );
}

#[test]
fn rust_log_overrides_the_log_level_flag() {
    let env = MapEnv::new(&[("RUST_LOG", "kube=trace")]);
    let settings = parse(&["--log-level", "warn"], &env).expect("settings");
    assert_eq!(settings.log_filter, "kube=trace");
}

#[test]
fn the_cluster_object_namespace_prefers_the_variable_then_the_service_account() {
    let sa = MapEnv::new(&[("POD_NAMESPACE", "ops")])
        .with_file_contents(SERVICE_ACCOUNT_NAMESPACE_FILE, "keda-system\n");
    assert_eq!(
        parse(&[], &sa).expect("settings").cluster_object_namespace,
        "keda-system"
    );
    let explicit = MapEnv::new(&[(ENV_CLUSTER_OBJECT_NAMESPACE, "secrets")])
        .with_file_contents(SERVICE_ACCOUNT_NAMESPACE_FILE, "keda-system");
    assert_eq!(
        parse(&[], &explicit)
            .expect("settings")
            .cluster_object_namespace,
        "secrets"
    );
}

#[test]
fn the_filepath_auth_root_path_flag_sets_the_file_path_root() {
    assert_eq!(
        parse(&[], &MapEnv::default())
            .expect("settings")
            .file_path_auth_root,
        None
    );
    assert_eq!(
        parse(
            &["--filepath-auth-root-path", "/mnt/auth"],
            &MapEnv::default()
        )
        .expect("settings")
        .file_path_auth_root,
        Some(PathBuf::from("/mnt/auth"))
    );
}

#[test]
fn the_http_host_policy_comes_from_the_flag_or_the_variable_and_errors_name_the_file() {
    use keda_scalers::scalers::http::claims::HostPolicy;
    // Without a policy no namespace may claim a host; any host only when asked for.
    assert_eq!(
        parse(&[], &MapEnv::default())
            .expect("settings")
            .http_host_policy,
        HostPolicy::deny_all()
    );
    for (args, vars) in [
        (&["--http-any-host"][..], &[][..]),
        (&["--http-any-host=true"][..], &[][..]),
        (&[][..], &[(ENV_HTTP_ANY_HOST, "true")][..]),
    ] {
        assert_eq!(
            parse(args, &MapEnv::new(vars))
                .expect("settings")
                .http_host_policy,
            HostPolicy::allow_all(),
            "{args:?} {vars:?}"
        );
    }
    assert_eq!(
        parse(&[], &MapEnv::new(&[(ENV_HTTP_ANY_HOST, "false")]))
            .expect("settings")
            .http_host_policy,
        HostPolicy::deny_all()
    );
    let bad = parse(&[], &MapEnv::new(&[(ENV_HTTP_ANY_HOST, "yes")]))
        .expect_err("not a bool")
        .to_string();
    assert!(bad.contains("KEDA_HTTP_ANY_HOST=\"yes\""), "{bad}");
    let both = MapEnv::default().with_file_contents("/policy/hosts.yaml", "{}");
    let both = parse(
        &[
            "--http-host-policy",
            "/policy/hosts.yaml",
            "--http-any-host",
        ],
        &both,
    )
    .expect_err("both")
    .to_string();
    assert!(
        both.contains("--http-host-policy /policy/hosts.yaml and --http-any-host"),
        "{both}"
    );
    let env =
        MapEnv::default().with_file_contents("/policy/hosts.yaml", "shop: [shop.example.com]");
    let settings = parse(&["--http-host-policy", "/policy/hosts.yaml"], &env).expect("settings");
    assert!(settings.http_host_policy.allows("shop", "shop.example.com"));
    assert!(!settings.http_host_policy.allows("blog", "shop.example.com"));
    let by_env = MapEnv::new(&[(ENV_HTTP_HOST_POLICY, "/policy/hosts.yaml")])
        .with_file_contents("/policy/hosts.yaml", "shop: [shop.example.com]");
    assert_eq!(
        parse(&[], &by_env).expect("settings").http_host_policy,
        settings.http_host_policy
    );
    let missing = parse(&["--http-host-policy", "/nowhere.yaml"], &MapEnv::default())
        .expect_err("missing file")
        .to_string();
    assert!(
        missing.contains("--http-host-policy /nowhere.yaml"),
        "{missing}"
    );
    let bad = MapEnv::default().with_file_contents("/p.yaml", "shop: [\"a b\"]");
    let bad = parse(&["--http-host-policy", "/p.yaml"], &bad)
        .expect_err("bad pattern")
        .to_string();
    assert!(
        bad.contains("--http-host-policy /p.yaml") && bad.contains("\"a b\""),
        "{bad}"
    );
}

#[test]
fn help_documents_every_flag_and_environment_variable() {
    let error = parse(&["--help"], &MapEnv::default()).expect_err("help is an early exit");
    let ConfigError::Flags(help) = error else {
        panic!("help is a clap early exit");
    };
    assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
    let text = help.to_string();
    for item in [
        "--metrics-bind-address",
        "--health-probe-bind-address",
        "--metrics-service-bind-address",
        "--leader-elect",
        "--leader-election-id",
        "--kube-api-qps",
        "--kube-api-burst",
        "--explain-kube-api-qps",
        "--explain-kube-api-burst",
        "--log-format",
        "--log-level",
        "--http-host-policy",
        "--allow-hpa-ownership-transfer",
        "--last-active-time-refresh",
        ENV_HTTP_HOST_POLICY,
        "--http-any-host",
        ENV_HTTP_ANY_HOST,
        ENV_WATCH_NAMESPACE,
        ENV_POD_NAMESPACE,
        ENV_POD_NAME,
        ENV_CLUSTER_OBJECT_NAMESPACE,
        ENV_LEASE_DURATION,
        ENV_RENEW_DEADLINE,
        ENV_RETRY_PERIOD,
        "KUBECONFIG",
    ] {
        assert!(
            text.contains(item),
            "--help does not mention {item}:\n{text}"
        );
    }
}
