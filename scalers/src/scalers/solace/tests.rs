use super::*;
use crate::context::test_context;

const BASE: &[(&str, &str)] = &[
    (
        "solaceSempBaseURL",
        "http://broker-a:8080, https://broker-b:943/",
    ),
    ("messageVpn", "default"),
    ("queueName", "orders/in"),
    ("messageCountTarget", "10"),
];
const AUTH: &[(&str, &str)] = &[("username", "admin"), ("password", "s3cret")];

fn parse(metadata: &[(&str, &str)]) -> Result<SolaceConfig, String> {
    SolaceConfig::parse(&test_context("solace-event-queue", 1, metadata, &[], AUTH))
        .map_err(|e| e.to_string())
}

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut m: Vec<(&str, &str)> = BASE.to_vec();
    for (k, v) in extra {
        m.retain(|(key, _)| key != k);
        m.push((k, v));
    }
    m
}

#[test]
fn metrics_targets_and_activation_are_kedas() {
    let c = parse(&with(&[
        ("messageSpoolUsageTarget", "2"),
        ("activationMessageSpoolUsageTarget", "1"),
        ("activationMessageCountTarget", "3"),
    ]))
    .unwrap();
    assert_eq!(c.brokers.len(), 2);
    assert_eq!(
        c.metrics,
        vec![
            SolaceMetric {
                figure: Figure::MsgCount,
                name: "s1-solace-orders-in-msgcount".into(),
                target: 10,
            },
            SolaceMetric {
                figure: Figure::MsgSpoolUsage,
                name: "s1-solace-orders-in-msgspoolusage".into(),
                target: 2 * 1024 * 1024,
            },
        ]
    );
    assert_eq!(
        c.activation,
        QueueFigures {
            msg_count: 3,
            msg_spool_usage: 1024 * 1024,
            msg_rx_rate: 0,
        }
    );
}

#[test]
fn errors_name_the_parameter() {
    let none: Vec<(&str, &str)> = BASE
        .iter()
        .copied()
        .filter(|(k, _)| *k != "messageCountTarget")
        .collect();
    for (metadata, named) in [
        (none, "no target value found"),
        (
            with(&[("messageCountTarget", "ten")]),
            "\"messageCountTarget\"",
        ),
        (
            with(&[("solaceSempBaseURL", "broker:8080")]),
            "\"solaceSempBaseURL\"",
        ),
        (
            BASE.iter()
                .copied()
                .filter(|(k, _)| *k != "queueName")
                .collect(),
            "\"queueName\"",
        ),
    ] {
        let err = parse(&metadata).unwrap_err();
        assert!(err.starts_with("trigger 1 (solace-event-queue): "), "{err}");
        assert!(err.contains(named), "{named}: {err}");
    }
    let err = SolaceConfig::parse(&test_context("solace-event-queue", 1, BASE, &[], &[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"username\""), "{err}");
}

#[test]
fn semp_urls_escape_the_names() {
    let base = url::Url::parse("https://broker:943/").unwrap();
    assert_eq!(
        semp_url(&base, "default", Some("orders/in")).as_str(),
        "https://broker:943/SEMP/v2/monitor/msgVpns/default/queues/orders%2Fin?select=msgs,msgSpoolUsage,averageRxMsgRate"
    );
    let base = url::Url::parse("http://broker:8080/proxy").unwrap();
    assert_eq!(
        semp_url(&base, "v?1", None).as_str(),
        "http://broker:8080/proxy/SEMP/v2/monitor/msgVpns/v%3F1?select=state"
    );
}

#[test]
fn answers_are_read_as_semp_documents_them() {
    assert_eq!(
        vpn_state(br#"{"data":{"state":"up"},"meta":{"responseCode":200}}"#).as_deref(),
        Ok("up")
    );
    assert!(
        vpn_state(br#"{"meta":{"responseCode":400,"error":{"description":"x"}}}"#)
            .unwrap_err()
            .contains("responseCode 400")
    );
    assert_eq!(
        queue_figures(
            br#"{"collections":{"msgs":{"count":7}},"data":{"msgSpoolUsage":4096,"averageRxMsgRate":3},"meta":{"responseCode":200}}"#
        ),
        Ok(QueueFigures {
            msg_count: 7,
            msg_spool_usage: 4096,
            msg_rx_rate: 3
        })
    );
    assert_eq!(
        queue_figures(br#"{"data":{},"meta":{"responseCode":200}}"#),
        Ok(QueueFigures::default())
    );
    assert!(queue_figures(b"<html>").is_err());
}
