//! Rendering the objects: one plain line per object (non-TTY: printed when it changes) or a
//! full-screen frame (TTY: redrawn in place with ANSI escapes).

use jiff::SignedDuration;

use super::state::{ObjectView, TriggerView};

fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

fn replicas(n: Option<i32>) -> String {
    n.map_or_else(|| "?".to_string(), |n| n.to_string())
}

fn cooldown(left: Option<SignedDuration>) -> String {
    match left {
        Some(d) => format!("{}s", d.as_secs()),
        None => "-".to_string(),
    }
}

fn trigger_text(t: &TriggerView) -> String {
    let value = match (t.value, &t.error) {
        (Some(v), _) => number(v),
        (None, Some(_)) => "error".to_string(),
        (None, None) => "-".to_string(),
    };
    let target = match t.target {
        Some(v) if t.per_replica => format!("{}/replica", number(v)),
        Some(v) => number(v),
        None => "-".to_string(),
    };
    let active = match t.active {
        Some(true) => "active",
        Some(false) => "inactive",
        None => "unknown",
    };
    let mut text = format!(
        "{} {} value={value} target={target} activation={} {active}",
        t.trigger_type,
        t.metric.as_deref().unwrap_or("-"),
        number(t.activation)
    );
    if let Some(error) = &t.error {
        text.push_str(&format!(" ({error})"));
    }
    text
}

/// One line for the non-TTY mode.
pub fn plain_line(o: &ObjectView) -> String {
    let mut line = format!(
        "scaledobject {}/{} target={} replicas={} desired={} min={} max={} active={} cooldown={}",
        o.namespace,
        o.name,
        o.target,
        replicas(o.current),
        replicas(o.desired),
        o.min,
        o.max,
        if o.active { "yes" } else { "no" },
        cooldown(o.cooldown_left),
    );
    if o.paused {
        line.push_str(" paused");
    }
    if let Some((false, message)) = &o.ready {
        line.push_str(&format!(" not-ready=\"{message}\""));
    }
    for t in &o.triggers {
        line.push_str(" | ");
        line.push_str(&trigger_text(t));
    }
    line
}

const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const RED: &str = "\x1b[31m";
const RESET: &str = "\x1b[0m";

/// A full-screen frame for the TTY mode: cursor home, each line written over the previous
/// frame's (and cleared to its end), then the rest of the screen cleared: no flicker. Lines end
/// with `\r\n` because the terminal is in raw mode.
pub fn frame(header: &[String], objects: &[ObjectView]) -> String {
    let mut out = String::from("\x1b[H");
    let mut line = |s: String| {
        out.push_str(&s);
        out.push_str("\x1b[K\r\n");
    };
    for h in header {
        line(format!("{DIM}{h}{RESET}"));
    }
    line(String::new());
    if objects.is_empty() {
        line("no ScaledObject yet: kubectl apply -f <file> with the kubeconfig above".to_string());
    }
    for o in objects {
        let state = if o.paused {
            format!("{YELLOW}paused{RESET}")
        } else if o.active {
            format!("{GREEN}active{RESET}")
        } else {
            format!("{DIM}idle{RESET}")
        };
        line(format!(
            "{BOLD}{}/{}{RESET} -> {}  {state}",
            o.namespace, o.name, o.target
        ));
        line(format!(
            "  replicas {BOLD}{}{RESET} (desired {}, min {}, max {})  cooldown left {}{}",
            replicas(o.current),
            replicas(o.desired),
            o.min,
            o.max,
            cooldown(o.cooldown_left),
            o.hpa
                .map(|(n, why)| format!("  HPA: {n} ({why})"))
                .unwrap_or_default()
        ));
        if let Some((false, message)) = &o.ready {
            line(format!("  {RED}not ready: {message}{RESET}"));
        }
        for t in &o.triggers {
            let marker = match t.active {
                Some(true) => format!("{GREEN}*{RESET}"),
                Some(false) => " ".to_string(),
                None => "?".to_string(),
            };
            line(format!("  {marker} {}", trigger_text(t)));
        }
        line(String::new());
    }
    line(format!(
        "{DIM}q or Ctrl-C: quit and write the charts{RESET}"
    ));
    out.push_str("\x1b[J");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object() -> ObjectView {
        ObjectView {
            namespace: "default".into(),
            name: "worker".into(),
            target: "Deployment/worker".into(),
            triggers: vec![TriggerView {
                trigger_type: "redis".into(),
                metric: Some("s0-redis-jobs".into()),
                value: Some(12.0),
                error: None,
                target: Some(5.0),
                per_replica: true,
                activation: 0.0,
                active: Some(true),
            }],
            ready: Some((true, String::new())),
            active: true,
            desired: Some(3),
            current: Some(3),
            min: 0,
            max: 10,
            hpa: Some((3, "DesiredWithinRange")),
            cooldown_left: None,
            paused: false,
        }
    }

    #[test]
    fn a_plain_line_carries_replicas_and_each_trigger() {
        assert_eq!(
            plain_line(&object()),
            "scaledobject default/worker target=Deployment/worker replicas=3 desired=3 min=0 max=10 active=yes cooldown=- | redis s0-redis-jobs value=12 target=5/replica activation=0 active"
        );
    }

    #[test]
    fn a_frame_has_no_bare_newline() {
        let text = frame(&["kubeconfig: x".into()], &[object()]);
        assert!(!text.replace("\r\n", "").contains('\n'));
        assert!(text.contains("value=12 target=5/replica"));
    }
}
