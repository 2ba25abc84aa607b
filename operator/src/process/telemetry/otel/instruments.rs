//! KEDA's OTel instruments (`pkg/metricscollector/opentelemetry.go`): which Prometheus family
//! becomes which instrument, with KEDA's names, units and attributes, and the translation of
//! one registry state into an OTLP export request.

use std::time::{SystemTime, UNIX_EPOCH};

use super::proto::collector::metrics::v1::ExportMetricsServiceRequest;
use super::proto::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use super::proto::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};
use super::proto::resource::v1::Resource;

use super::exposition::{Family, Sample, parse_exposition};
use super::settings::{SCOPE_NAME, Temporality};

/// What kind of OTel instrument, and so which OTLP data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// `Float64ObservableGauge`: Gauge of doubles.
    GaugeF64,
    /// `Int64ObservableGauge`: Gauge of integers.
    GaugeI64,
    /// `Int64Counter`: monotonic Sum of integers.
    Counter,
    /// `Int64UpDownCounter`: non-monotonic cumulative Sum of integers.
    UpDownCounter,
    /// `Float64Histogram`: explicit-bucket Histogram.
    Histogram,
}

/// How a Prometheus value becomes the OTel one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scale {
    Same,
    /// Seconds to whole milliseconds (KEDA's deprecated `...latency` gauges:
    /// `float64(d.Milliseconds())`).
    WholeMillis,
}

/// How the Prometheus labels become KEDA's OTel attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Attrs {
    /// The same names and values.
    Same,
    /// Per-scaler series: `namespace`, `scaledObject`, `scaler`, `scalerIndex`, `metric` for a
    /// ScaledObject; `namespace`, `scaledJob`, `scaler`, `triggerIndex`, `metric` for a
    /// ScaledJob (KEDA's `getScalerMeasurementOption`).
    Scaler,
    /// The scale loop: `namespace`, `type`, `name` (Prometheus says `resource`).
    Loop,
    /// `keda.scaler.empty.upstream.responses`: `isScaledObject` and `ignoreNullValues` are
    /// booleans, `resourceType` is not an attribute.
    EmptyUpstream,
    /// CloudEvents: `cloudeventsource` is `cloudEventSource`.
    CloudEvents,
}

/// One OTel instrument fed by one Prometheus family.
pub(super) struct Instrument {
    /// The Prometheus family (`# TYPE` name).
    pub(super) prom: &'static str,
    pub(super) name: &'static str,
    pub(super) description: &'static str,
    pub(super) unit: &'static str,
    pub(super) shape: Shape,
    pub(super) scale: Scale,
    pub(super) attrs: Attrs,
}

pub(super) const fn instrument(
    prom: &'static str,
    name: &'static str,
    description: &'static str,
    shape: Shape,
    attrs: Attrs,
) -> Instrument {
    Instrument {
        prom,
        name,
        description,
        unit: "",
        shape,
        scale: Scale::Same,
        attrs,
    }
}

/// KEDA's instruments (`initMeters`), each with the Prometheus family it reads.
pub(super) const INSTRUMENTS: &[Instrument] = &[
    instrument(
        "keda_scaler_detail_errors",
        "keda.scaler.errors",
        "Number of scaler errors",
        Shape::Counter,
        Attrs::Scaler,
    ),
    instrument(
        "keda_scaled_object_errors",
        "keda.scaledobject.errors",
        "Number of scaled object errors",
        Shape::Counter,
        Attrs::Same,
    ),
    instrument(
        "keda_scaled_job_errors",
        "keda.scaledjob.errors",
        "Number of scaled job errors",
        Shape::Counter,
        Attrs::Same,
    ),
    instrument(
        "keda_trigger_registered_total",
        "keda.trigger.totals",
        "DEPRECATED - will be removed in 2.16 - use 'keda.trigger.registered.count' instead",
        Shape::UpDownCounter,
        Attrs::Same,
    ),
    instrument(
        "keda_trigger_registered_total",
        "keda.trigger.registered.count",
        "Total number of triggers per trigger type registered",
        Shape::UpDownCounter,
        Attrs::Same,
    ),
    instrument(
        "keda_resource_registered_total",
        "keda.resource.totals",
        "DEPRECATED - will be removed in 2.16 - use 'keda.resource.registered.count' instead",
        Shape::UpDownCounter,
        Attrs::Same,
    ),
    instrument(
        "keda_resource_registered_total",
        "keda.resource.registered.count",
        "Total number of KEDA custom resources per namespace for each custom resource type (CRD) registered",
        Shape::UpDownCounter,
        Attrs::Same,
    ),
    instrument(
        "keda_scaler_empty_upstream_responses",
        "keda.scaler.empty.upstream.responses",
        "Number of times a query returns an empty result",
        Shape::Counter,
        Attrs::EmptyUpstream,
    ),
    instrument(
        "keda_scaler_metrics_value",
        "keda.scaler.metrics.value",
        "The current value for each scaler's metric that would be used by the HPA in computing the target average",
        Shape::GaugeF64,
        Attrs::Scaler,
    ),
    Instrument {
        scale: Scale::WholeMillis,
        ..instrument(
            "keda_scaler_metrics_latency_seconds",
            "keda.scaler.metrics.latency",
            "DEPRECATED - use `keda.scaler.metrics.latency.seconds` instead",
            Shape::GaugeF64,
            Attrs::Scaler,
        )
    },
    Instrument {
        unit: "s",
        ..instrument(
            "keda_scaler_metrics_latency_seconds",
            "keda.scaler.metrics.latency.seconds",
            "The latency of retrieving current metric from each scaler",
            Shape::GaugeF64,
            Attrs::Scaler,
        )
    },
    Instrument {
        scale: Scale::WholeMillis,
        ..instrument(
            "keda_internal_scale_loop_latency_seconds",
            "keda.internal.scale.loop.latency",
            "DEPRECATED - use `keda.internal.scale.loop.latency.seconds` instead",
            Shape::GaugeF64,
            Attrs::Loop,
        )
    },
    Instrument {
        unit: "s",
        ..instrument(
            "keda_internal_scale_loop_latency_seconds",
            "keda.internal.scale.loop.latency.seconds",
            "Internal latency of ScaledObject/ScaledJob loop execution",
            Shape::GaugeF64,
            Attrs::Loop,
        )
    },
    instrument(
        "keda_scaler_active",
        "keda.scaler.active",
        "Indicates whether a scaler is active (1), or not (0)",
        Shape::GaugeF64,
        Attrs::Scaler,
    ),
    instrument(
        "keda_build_info",
        "keda.build.info",
        "A metric with a constant '1' value labeled by version, git_commit and goversion from which KEDA was built.",
        Shape::GaugeI64,
        Attrs::Same,
    ),
    instrument(
        "keda_cloudeventsource_events_emitted",
        "keda.cloudeventsource.events.emitted.count",
        "Measured the total number of emitted cloudevents. 'namespace': namespace of CloudEventSource 'cloudeventsource': name of CloudEventSource object. 'eventsink': destination of this emitted event 'state':indicated events emitted successfully or not",
        Shape::Counter,
        Attrs::CloudEvents,
    ),
    instrument(
        "keda_cloudeventsource_events_queued",
        "keda.cloudeventsource.events.queued",
        "Indicates how many events are still queue",
        Shape::GaugeF64,
        Attrs::Same,
    ),
    instrument(
        "keda_scaled_object_paused",
        "keda.scaled.object.paused",
        "Indicates whether a ScaledObject is paused",
        Shape::GaugeF64,
        Attrs::Same,
    ),
    instrument(
        "keda_scaler_http_requests",
        "keda.scaler.http.requests.count",
        "Total number of outbound HTTP requests issued during scaler metric collection, labeled by HTTP status code.",
        Shape::Counter,
        Attrs::Same,
    ),
    Instrument {
        unit: "s",
        ..instrument(
            "keda_scaler_http_request_duration_seconds",
            "keda.scaler.http.request.duration.seconds",
            "Duration in seconds of outbound HTTP requests issued during scaler metric collection.",
            Shape::Histogram,
            Attrs::Same,
        )
    },
];

/// The OTel attributes of one series, sorted by key as the Go SDK's attribute sets are.
pub(super) fn attributes(kind: Attrs, labels: &[(String, String)]) -> Vec<KeyValue> {
    let label = |name: &str| {
        labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    };
    let mut out: Vec<KeyValue> = match kind {
        Attrs::Same => labels.iter().map(|(k, v)| string_attribute(k, v)).collect(),
        Attrs::Scaler => {
            let (owner, index) = if label("type") == "scaledjob" {
                ("scaledJob", "triggerIndex")
            } else {
                ("scaledObject", "scalerIndex")
            };
            vec![
                string_attribute("namespace", label("namespace")),
                string_attribute(owner, label("scaledObject")),
                string_attribute("scaler", label("scaler")),
                string_attribute(index, label("triggerIndex")),
                string_attribute("metric", label("metric")),
            ]
        }
        Attrs::Loop => vec![
            string_attribute("namespace", label("namespace")),
            string_attribute("type", label("type")),
            string_attribute("name", label("resource")),
        ],
        Attrs::EmptyUpstream => vec![
            string_attribute("namespace", label("namespace")),
            string_attribute("scaledResource", label("scaledResource")),
            string_attribute("triggerName", label("triggerName")),
            string_attribute("metricName", label("metricName")),
            bool_attribute("isScaledObject", label("resourceType") == "ScaledObject"),
            bool_attribute("ignoreNullValues", label("ignoreNullValues") == "true"),
        ],
        Attrs::CloudEvents => labels
            .iter()
            .map(|(k, v)| {
                let key = if k == "cloudeventsource" {
                    "cloudEventSource"
                } else {
                    k.as_str()
                };
                string_attribute(key, v)
            })
            .collect(),
    };
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

pub(super) fn string_attribute(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_string())),
        }),
        ..KeyValue::default()
    }
}

pub(super) fn bool_attribute(key: &str, value: bool) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::BoolValue(value)),
        }),
        ..KeyValue::default()
    }
}

/// An integer value as written (counters and integer gauges print integers); a float is
/// rounded toward zero.
pub(super) fn integer(sample: &Sample) -> i64 {
    sample.raw.parse::<i64>().unwrap_or_else(|_| {
        // Saturating conversion of a finite float; NaN becomes 0.
        #[allow(clippy::cast_possible_truncation)]
        let value = sample.value as i64;
        value
    })
}

/// Nanoseconds since the Unix epoch.
pub(super) fn unix_nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_nanos()).ok())
        .unwrap_or_default()
}

/// Series identity for delta temporality: instrument name and attributes.
pub(super) type SeriesKey = (&'static str, Vec<(String, String)>);

/// What a series sent last, for delta temporality.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Previous {
    Counter(i64),
    Histogram {
        count: u64,
        sum: f64,
        buckets: Vec<u64>,
    },
}

/// Turns the registry's text into KEDA's OTel metrics.
#[derive(Debug)]
pub struct Translator {
    temporality: Temporality,
    /// When the exporter started: the start of every cumulative series.
    start: SystemTime,
    /// When the last export was taken (the start of delta points).
    last: SystemTime,
    previous: std::collections::HashMap<SeriesKey, Previous>,
}

impl Translator {
    /// A translator whose cumulative series start at `start`.
    pub fn new(temporality: Temporality, start: SystemTime) -> Self {
        Self {
            temporality,
            start,
            last: start,
            previous: std::collections::HashMap::new(),
        }
    }

    /// KEDA's OTel metrics for the OpenMetrics `text`, taken at `now`. Instruments without a
    /// series are left out (an OTel SDK sends nothing for them either).
    pub fn translate(&mut self, text: &str, now: SystemTime) -> Vec<Metric> {
        let families = parse_exposition(text);
        let now_nanos = unix_nanos(now);
        let delta = self.temporality == Temporality::Delta;
        let start_nanos = unix_nanos(if delta { self.last } else { self.start });
        let cumulative_start = unix_nanos(self.start);
        let mut metrics = Vec::new();
        for instrument in INSTRUMENTS {
            let Some(family) = families.iter().find(|f| f.name == instrument.prom) else {
                continue;
            };
            let data = match instrument.shape {
                Shape::GaugeF64 | Shape::GaugeI64 => {
                    let points = family
                        .samples
                        .iter()
                        .map(|s| {
                            let value = match (instrument.shape, instrument.scale) {
                                (Shape::GaugeI64, _) => number_data_point::Value::AsInt(integer(s)),
                                (_, Scale::WholeMillis) => {
                                    number_data_point::Value::AsDouble((s.value * 1000.0).trunc())
                                }
                                (_, Scale::Same) => number_data_point::Value::AsDouble(s.value),
                            };
                            NumberDataPoint {
                                attributes: attributes(instrument.attrs, &s.labels),
                                time_unix_nano: now_nanos,
                                value: Some(value),
                                ..NumberDataPoint::default()
                            }
                        })
                        .collect::<Vec<_>>();
                    if points.is_empty() {
                        continue;
                    }
                    metric::Data::Gauge(Gauge {
                        data_points: points,
                    })
                }
                Shape::Counter | Shape::UpDownCounter => {
                    let monotonic = instrument.shape == Shape::Counter;
                    let delta_here = delta && monotonic;
                    let points = family
                        .samples
                        .iter()
                        .filter(|s| !monotonic || s.name == format!("{}_total", instrument.prom))
                        .map(|s| {
                            let mut value = integer(s);
                            let attrs = attributes(instrument.attrs, &s.labels);
                            if delta_here {
                                let key = (instrument.name, s.labels.clone());
                                let before =
                                    match self.previous.insert(key, Previous::Counter(value)) {
                                        Some(Previous::Counter(v)) if v <= value => v,
                                        _ => 0,
                                    };
                                value -= before;
                            }
                            NumberDataPoint {
                                attributes: attrs,
                                start_time_unix_nano: if delta_here {
                                    start_nanos
                                } else {
                                    cumulative_start
                                },
                                time_unix_nano: now_nanos,
                                value: Some(number_data_point::Value::AsInt(value)),
                                ..NumberDataPoint::default()
                            }
                        })
                        .collect::<Vec<_>>();
                    if points.is_empty() {
                        continue;
                    }
                    let temporality = if delta_here {
                        AggregationTemporality::Delta
                    } else {
                        AggregationTemporality::Cumulative
                    };
                    metric::Data::Sum(Sum {
                        data_points: points,
                        aggregation_temporality: temporality as i32,
                        is_monotonic: monotonic,
                    })
                }
                Shape::Histogram => {
                    let points = self.histogram_points(
                        instrument,
                        family,
                        (
                            if delta { start_nanos } else { cumulative_start },
                            now_nanos,
                        ),
                    );
                    if points.is_empty() {
                        continue;
                    }
                    let temporality = if delta {
                        AggregationTemporality::Delta
                    } else {
                        AggregationTemporality::Cumulative
                    };
                    metric::Data::Histogram(Histogram {
                        data_points: points,
                        aggregation_temporality: temporality as i32,
                    })
                }
            };
            metrics.push(Metric {
                name: instrument.name.to_string(),
                description: instrument.description.to_string(),
                unit: instrument.unit.to_string(),
                data: Some(data),
                ..Metric::default()
            });
        }
        self.last = now;
        metrics
    }

    /// The histogram's points: Prometheus' cumulative `_bucket{le}` counts become OTel's
    /// per-bucket counts over the finite bounds (the `+Inf` bucket last).
    fn histogram_points(
        &mut self,
        instrument: &Instrument,
        family: &Family,
        (start, now): (u64, u64),
    ) -> Vec<HistogramDataPoint> {
        struct Series {
            labels: Vec<(String, String)>,
            buckets: Vec<(f64, u64)>,
            sum: f64,
            count: u64,
        }
        let mut series: Vec<Series> = Vec::new();
        let bucket = format!("{}_bucket", family.name);
        let sum = format!("{}_sum", family.name);
        let count = format!("{}_count", family.name);
        for s in &family.samples {
            let mut labels = s.labels.clone();
            let le = labels
                .iter()
                .position(|(k, _)| k == "le")
                .map(|i| labels.remove(i).1);
            let index = match series.iter().position(|x| x.labels == labels) {
                Some(i) => i,
                None => {
                    series.push(Series {
                        labels,
                        buckets: Vec::new(),
                        sum: 0.0,
                        count: 0,
                    });
                    series.len() - 1
                }
            };
            let entry = &mut series[index];
            let whole = u64::try_from(integer(s)).unwrap_or_default();
            if s.name == bucket {
                let bound = match le.as_deref() {
                    Some("+Inf") | None => f64::INFINITY,
                    Some(v) => v.parse().unwrap_or(f64::INFINITY),
                };
                entry.buckets.push((bound, whole));
            } else if s.name == sum {
                entry.sum = s.value;
            } else if s.name == count {
                entry.count = whole;
            }
        }
        let delta = self.temporality == Temporality::Delta;
        series
            .into_iter()
            .map(|mut s| {
                s.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
                let bounds: Vec<f64> = s
                    .buckets
                    .iter()
                    .map(|(b, _)| *b)
                    .filter(|b| b.is_finite())
                    .collect();
                let mut counts = Vec::with_capacity(s.buckets.len());
                let mut below = 0;
                for (_, cumulative) in &s.buckets {
                    counts.push(cumulative.saturating_sub(below));
                    below = *cumulative;
                }
                let (mut count, mut sum) = (s.count, s.sum);
                if delta {
                    let key = (instrument.name, s.labels.clone());
                    let now_state = Previous::Histogram {
                        count,
                        sum,
                        buckets: counts.clone(),
                    };
                    if let Some(Previous::Histogram {
                        count: c,
                        sum: su,
                        buckets,
                    }) = self.previous.insert(key, now_state)
                        && c <= count
                        && buckets.len() == counts.len()
                    {
                        count -= c;
                        sum -= su;
                        for (now, before) in counts.iter_mut().zip(buckets) {
                            *now = now.saturating_sub(before);
                        }
                    }
                }
                HistogramDataPoint {
                    attributes: attributes(instrument.attrs, &s.labels),
                    start_time_unix_nano: start,
                    time_unix_nano: now,
                    count,
                    sum: Some(sum),
                    bucket_counts: counts,
                    explicit_bounds: bounds,
                    ..HistogramDataPoint::default()
                }
            })
            .collect()
    }
}

/// The export request for `metrics` under `resource`.
pub fn export_request(
    resource: &[(String, String)],
    metrics: Vec<Metric>,
) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: resource
                    .iter()
                    .map(|(k, v)| string_attribute(k, v))
                    .collect(),
                ..Resource::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: SCOPE_NAME.to_string(),
                    ..InstrumentationScope::default()
                }),
                metrics,
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    }
}
