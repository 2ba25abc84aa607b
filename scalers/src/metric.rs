//! Metric names, HPA metric targets and metric values, formatted exactly as KEDA formats them.

use k8s_openapi::api::autoscaling::v2::{
    ExternalMetricSource, MetricIdentifier, MetricSpec, MetricTarget,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// `MetricSpec.type` of an external metric.
pub const EXTERNAL_METRIC_TYPE: &str = "External";

/// How the HPA compares a metric with its target (`triggers[].metricType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum MetricTargetType {
    /// `desired = ceil(value / target)`: the value is the total, the target is per replica.
    #[default]
    AverageValue,
    /// `desired = ceil(current * value / target)`.
    Value,
    /// Percent of the pods' resource requests; cpu and memory only.
    Utilization,
}

impl MetricTargetType {
    /// The name Kubernetes uses in `MetricTarget.type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AverageValue => "AverageValue",
            Self::Value => "Value",
            Self::Utilization => "Utilization",
        }
    }

    /// Parses a trigger's `metricType` as KEDA does for every scaler except cpu/memory: absent or
    /// empty means `AverageValue`; `Utilization` is rejected.
    ///
    /// # Errors
    /// A message naming the rejected value.
    pub fn parse_external(value: Option<&str>) -> Result<Self, String> {
        match value.map(str::trim).unwrap_or("") {
            "" | "AverageValue" => Ok(Self::AverageValue),
            "Value" => Ok(Self::Value),
            "Utilization" => Err(
                "metricType \"Utilization\" is only supported by the cpu and memory scalers"
                    .to_string(),
            ),
            other => Err(format!(
                "metricType \"{other}\" is not supported; use AverageValue or Value"
            )),
        }
    }
}

/// KEDA's `NormalizeString`: replaces each of `/ . : % ( )` with `-`, keeps everything else.
pub fn normalize_metric_name(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '/' | '.' | ':' | '%' | '(' | ')' => '-',
            c => c,
        })
        .collect()
}

/// `s<index>-<name>`: the external metric name of trigger `index` (KEDA's
/// `GenerateMetricNameWithIndex`). `name` is used as given; normalize it first where KEDA does.
pub fn metric_name_with_index(index: usize, name: &str) -> String {
    format!("s{index}-{name}")
}

/// Formats `mantissa * 10^exponent` the way Kubernetes canonicalizes a `DecimalSI` quantity:
/// trailing zeros are folded into an exponent that is a multiple of 3 and printed as a suffix
/// (`m`, none, `k`, `M`, `G`, `T`, `P`, `E`). `exponent` must be `-3` or larger.
fn format_decimal_si(mut mantissa: i64, mut exponent: i32) -> String {
    if mantissa == 0 {
        return "0".to_string();
    }
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exponent += 1;
    }
    // Bring the exponent down to a multiple of 3. This only puts back zeros removed above, so it
    // cannot overflow.
    let adjust = exponent.rem_euclid(3);
    mantissa *= 10_i64.pow(adjust.unsigned_abs());
    exponent -= adjust;
    let suffix = match exponent {
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        _ => "E",
    };
    if exponent > 18 {
        // Unreachable for i64 inputs with exponent >= -3; keep the value exact anyway.
        return format!("{mantissa}e{exponent}");
    }
    format!("{mantissa}{suffix}")
}

/// Parses a Kubernetes quantity (`resource.ParseQuantity`) into an approximate `f64`
/// (`AsApproximateFloat64`): a decimal number (`5`, `-1.5`, `.5`) with an optional decimal SI
/// suffix (`n u m k M G T P E`), binary suffix (`Ki Mi Gi Ti Pi Ei`) or exponent (`e3`, `E-2`).
/// `None` when `s` is not a quantity (`NaN`, `1Gb`, `1 Gi`, empty). Values too large for an
/// `f64` come back infinite, never as a panic.
pub fn parse_quantity(s: &str) -> Option<f64> {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let number_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return None;
    }
    let magnitude: f64 = format!(
        "{}.{}",
        if whole.is_empty() { "0" } else { whole },
        fraction
    )
    .parse()
    .ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            // An exponent beyond i32 is beyond f64 as well: saturate instead of failing.
            let exponent: i32 = exponent.parse().unwrap_or(if exponent.starts_with('-') {
                i32::MIN
            } else {
                i32::MAX
            });
            10f64.powi(exponent)
        }
    };
    let value = magnitude * factor;
    Some(if s.starts_with('-') { -value } else { value })
}

/// An integer quantity (`resource.NewQuantity(v, DecimalSI)`), e.g. `5`, `1k`.
pub fn integer_quantity(value: i64) -> Quantity {
    Quantity(format_decimal_si(value, 0))
}

/// A milli-precision quantity (`resource.NewMilliQuantity(int64(v*1000), DecimalSI)`), e.g.
/// `1500m`, `2`. The fraction below one milli is truncated toward zero, as in Go.
pub fn milli_quantity(value: f64) -> Quantity {
    // Saturates at the i64 bounds and maps NaN to 0, which is what we want here.
    Quantity(format_decimal_si(
        keda_api::num::f64_to_i64_saturating(value * 1000.0),
        -3,
    ))
}

/// A metric value as KEDA reports it (`GenerateMetricInMili`): negative, NaN and infinite values
/// become `0`.
pub fn metric_value_quantity(value: f64) -> Quantity {
    if value.is_finite() && value > 0.0 {
        milli_quantity(value)
    } else {
        Quantity("0".to_string())
    }
}

/// KEDA's `GetMetricTarget`: an integer target of the given type.
pub fn metric_target(target_type: MetricTargetType, value: i64) -> MetricTarget {
    target_with(target_type, integer_quantity(value))
}

/// KEDA's `GetMetricTargetMili`: a milli-precision target of the given type.
pub fn metric_target_milli(target_type: MetricTargetType, value: f64) -> MetricTarget {
    target_with(target_type, milli_quantity(value))
}

fn target_with(target_type: MetricTargetType, quantity: Quantity) -> MetricTarget {
    match target_type {
        MetricTargetType::Value => MetricTarget {
            type_: "Value".to_string(),
            value: Some(quantity),
            ..MetricTarget::default()
        },
        // Utilization never reaches an external metric (rejected at parse time); treat it as
        // AverageValue rather than emitting a spec the HPA would refuse.
        MetricTargetType::AverageValue | MetricTargetType::Utilization => MetricTarget {
            type_: "AverageValue".to_string(),
            average_value: Some(quantity),
            ..MetricTarget::default()
        },
    }
}

/// An `External` metric spec with the given name and target (no selector; the operator adds
/// `scaledobject.keda.sh/name` when it writes the HPA).
pub fn external_metric_spec(name: impl Into<String>, target: MetricTarget) -> MetricSpec {
    MetricSpec {
        type_: EXTERNAL_METRIC_TYPE.to_string(),
        external: Some(ExternalMetricSource {
            metric: MetricIdentifier {
                name: name.into(),
                selector: None,
            },
            target,
        }),
        ..MetricSpec::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_replaces_exactly_keda_characters() {
        assert_eq!(
            normalize_metric_name("a/b.c:d%e(f)g-h_i J*"),
            "a-b-c-d-e-f-g-h_i J*"
        );
    }

    #[test]
    fn quantities_parse_as_kubernetes_reads_them() {
        // (text, value)
        let rows = [
            ("64", 64.0),
            ("2.43", 2.43),
            ("1500m", 1.5),
            ("2Ki", 2048.0),
            ("1k", 1000.0),
            ("-1.5", -1.5),
            (".5", 0.5),
            ("5.", 5.0),
            ("+2M", 2e6),
            ("1e3", 1000.0),
            ("25E-1", 2.5),
            ("12E", 12e18),
            ("1Gi", 1073741824.0),
            ("100n", 1e-7),
        ];
        for (text, value) in rows {
            let got = parse_quantity(text).unwrap_or_else(|| panic!("{text} does not parse"));
            assert!(
                (got - value).abs() <= value.abs() * 1e-12,
                "{text}: {got} != {value}"
            );
        }
        for bad in [
            "", "NaN", "+Inf", "m", "1.2.3", "1Gb", "abc", "1e", "--1", "1 Gi", " 1",
        ] {
            assert_eq!(parse_quantity(bad), None, "{bad}");
        }
        assert_eq!(parse_quantity("1e99999999999"), Some(f64::INFINITY));
        assert_eq!(parse_quantity("1e-99999999999"), Some(0.0));
    }

    #[test]
    fn integer_quantities_use_kubernetes_canonical_form() {
        for (value, expected) in [
            (0, "0"),
            (5, "5"),
            (10, "10"),
            (100, "100"),
            (1000, "1k"),
            (1500, "1500"),
            (25000, "25k"),
            (3_000_000, "3M"),
            (-7, "-7"),
        ] {
            assert_eq!(integer_quantity(value).0, expected, "{value}");
        }
    }

    #[test]
    fn milli_quantities_use_kubernetes_canonical_form() {
        for (value, expected) in [
            (0.0, "0"),
            (1.0, "1"),
            (1.5, "1500m"),
            (0.001, "1m"),
            (0.0015, "1m"), // truncated, as Go's int64() conversion does
            (2.25, "2250m"),
            (12.0, "12"),
            (5000.0, "5k"),
            (0.1, "100m"),
        ] {
            assert_eq!(milli_quantity(value).0, expected, "{value}");
        }
    }

    #[test]
    fn metric_values_clamp_negative_nan_and_infinite_to_zero() {
        for value in [-1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(metric_value_quantity(value).0, "0", "{value}");
        }
        assert_eq!(metric_value_quantity(7.0).0, "7");
    }

    #[test]
    fn targets_put_the_quantity_in_the_field_of_their_type() {
        let t = metric_target(MetricTargetType::AverageValue, 5);
        assert_eq!(t.type_, "AverageValue");
        assert_eq!(t.average_value, Some(Quantity("5".into())));
        assert_eq!(t.value, None);
        let t = metric_target_milli(MetricTargetType::Value, 0.5);
        assert_eq!(t.type_, "Value");
        assert_eq!(t.value, Some(Quantity("500m".into())));
        assert_eq!(t.average_value, None);
    }

    #[test]
    fn external_metric_type_defaults_to_average_value_and_rejects_utilization() {
        assert_eq!(
            MetricTargetType::parse_external(None),
            Ok(MetricTargetType::AverageValue)
        );
        assert_eq!(
            MetricTargetType::parse_external(Some("Value")),
            Ok(MetricTargetType::Value)
        );
        assert!(MetricTargetType::parse_external(Some("Utilization")).is_err());
        assert!(MetricTargetType::parse_external(Some("value")).is_err());
    }
}
