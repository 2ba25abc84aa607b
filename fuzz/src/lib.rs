//! What the fuzz targets share: the text form of a trigger for `scaler_metadata`, and the
//! checks every target runs on what the registry returns.

use std::sync::OnceLock;

use keda_scalers::{Registry, ScalableKind, ScalerContext, Secret};

/// The registry with every built-in scaler, built once.
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::builtin)
}

/// Every name (primary and aliases) of every parameter `trigger_type` declares.
fn param_names(registry: &Registry, trigger_type: &str) -> Vec<&'static str> {
    registry.get(trigger_type).map_or_else(Vec::new, |factory| {
        factory
            .params()
            .iter()
            .flat_map(|p| std::iter::once(p.name).chain(p.aliases.iter().copied()))
            .collect()
    })
}

/// Resolves `%N` (the Nth declared parameter name, modulo their number) at the start of `key`.
fn resolve_key(key: &str, names: &[&str]) -> String {
    let Some(rest) = key.strip_prefix('%') else {
        return key.to_string();
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    match (rest[..digits].parse::<usize>(), names.len()) {
        (Ok(n), len) if len > 0 => format!("{}{}", names[n % len], &rest[digits..]),
        _ => key.to_string(),
    }
}

/// A trigger in the fuzzer's text form, one item per line:
///
/// ```text
/// redis                  the type; `%N` is the Nth registered type
/// address=redis:6379     metadata; a key `%N` is the Nth declared parameter (`%NFromEnv` too)
/// auth.password=s3cret   an auth param (TriggerAuthentication)
/// env.REDIS_HOST=redis   a resolved environment variable of the scale target
/// !metricType=Value      the trigger's metricType
/// !name=queue            the trigger's name
/// !cached                useCachedMetrics
/// !source                the trigger feeds a scalingModifiers formula
/// !job                   the trigger is a ScaledJob's
/// ```
pub fn context_from_text(text: &str) -> ScalerContext {
    let registry = registry();
    let mut lines = text.split('\n');
    let first = lines.next().unwrap_or_default();
    let types: Vec<&str> = registry.types().collect();
    let trigger_type = match first.strip_prefix('%').map(str::parse::<usize>) {
        Some(Ok(n)) if !types.is_empty() => types[n % types.len()].to_string(),
        _ => first.to_string(),
    };
    let names = param_names(registry, &trigger_type);
    let mut ctx = ScalerContext::new(trigger_type, 0);
    for line in lines {
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        if let Some(flag) = key.strip_prefix('!') {
            match flag {
                "metricType" => ctx.metric_type = Some(value.to_string()),
                "name" => ctx.trigger_name = value.to_string(),
                "cached" => ctx.use_cached_metrics = true,
                "source" => ctx.as_metric_source = true,
                "job" => ctx.scalable_kind = ScalableKind::ScaledJob,
                _ => {}
            }
        } else if let Some(key) = key.strip_prefix("auth.") {
            ctx.auth_params
                .insert(resolve_key(key, &names), Secret::new(value));
        } else if let Some(key) = key.strip_prefix("env.") {
            ctx.resolved_env.insert(key.to_string(), value.to_string());
        } else {
            ctx.metadata
                .insert(resolve_key(key, &names), value.to_string());
        }
    }
    ctx
}

/// Runs the registry's parse-only check on `ctx` and checks what it returns: every built-in
/// type has a check, an error has a message, and no error shows an auth param's value (they
/// come from Secrets) unless that value is also written elsewhere in the trigger.
pub fn check_trigger(ctx: &ScalerContext) {
    let registry = registry();
    let known = registry.get(&ctx.trigger_type).is_some();
    let Some(result) = registry.check(ctx) else {
        panic!(
            "built-in type {:?} has no parse-only check",
            ctx.trigger_type
        );
    };
    let Err(error) = result else {
        return;
    };
    let message = error.to_string();
    assert!(!message.is_empty(), "an empty error for {ctx:?}");
    if !known {
        return;
    }
    for (param, secret) in &ctx.auth_params {
        let secret = secret.expose();
        if secret.len() < 8 || secret.trim() != secret {
            continue;
        }
        let written_elsewhere = ctx
            .metadata
            .iter()
            .chain(ctx.resolved_env.iter())
            .any(|(k, v)| k.contains(secret) || v.contains(secret))
            || ctx.auth_params.keys().any(|k| k.contains(secret))
            || ctx.trigger_type.contains(secret)
            || ctx.trigger_name.contains(secret)
            || ctx
                .metric_type
                .as_deref()
                .is_some_and(|m| m.contains(secret));
        assert!(
            written_elsewhere
                || !message.contains(secret)
                || fixed_text(registry, ctx, param, secret),
            "the error shows an auth param's value: {message}"
        );
    }
}

/// Whether `secret`, the value of auth param `param`, is in the error because it is a word of
/// the error's own text (an auth param `Utilization` against a cpu trigger's "metricType is
/// required: Utilization or AverageValue"): the error of the same context with that value
/// replaced still contains it.
fn fixed_text(registry: &Registry, ctx: &ScalerContext, param: &str, secret: &str) -> bool {
    let replacement = "\u{1}value replaced by the fuzz oracle\u{1}";
    if replacement.contains(secret) {
        return true;
    }
    let mut replaced = ctx.clone();
    replaced
        .auth_params
        .insert(param.to_string(), Secret::new(replacement));
    match registry.check(&replaced) {
        Some(Err(error)) => error.to_string().contains(secret),
        _ => false,
    }
}

/// Moves this process into a network namespace of its own whose only interface is loopback,
/// up, so nothing a target builds can reach beyond this machine's loopback (and not even that:
/// the namespace's loopback is its own). Call before any thread is started (a target's `init`):
/// threads started later inherit the namespace. Panics when the namespace cannot be made or a
/// connection outside loopback still succeeds, so a target never runs unconfined.
pub fn isolate_network() {
    // SAFETY: plain system calls on values owned here; `ifreq` is zeroed and then filled with a
    // NUL-terminated interface name shorter than IFNAMSIZ.
    #[allow(unsafe_code)]
    unsafe {
        // As root the namespace is enough; otherwise a user namespace of our own grants the
        // capability (which needs this process to be single-threaded still).
        if libc::unshare(libc::CLONE_NEWNET) != 0
            && libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0
        {
            panic!(
                "cannot make a network namespace ({}); refusing to run a target that connects",
                std::io::Error::last_os_error()
            );
        }
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        assert_eq!(
            libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr),
            0,
            "SIOCGIFFLAGS lo: {}",
            std::io::Error::last_os_error()
        );
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        assert_eq!(
            libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr),
            0,
            "SIOCSIFFLAGS lo: {}",
            std::io::Error::last_os_error()
        );
        libc::close(fd);
    }
    // The proof: an address outside loopback is unreachable, loopback is up.
    for outside in ["192.0.2.1:80", "10.0.0.1:53", "[2001:db8::1]:80"] {
        let address: std::net::SocketAddr = outside.parse().expect("an address");
        assert!(
            std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_millis(200))
                .is_err(),
            "{outside} is reachable from the fuzz target's network namespace"
        );
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("loopback is up");
    std::net::TcpStream::connect(listener.local_addr().expect("an address"))
        .expect("loopback answers");
}

/// The longest run of `input` (at least `min` bytes long) that `message` contains, if any: the
/// "no echo" oracle of the parsers of answers from event sources, whose content must not reach
/// an error (issue 30, finding 5). Runs of `allowed` (what the trigger itself wrote, such as a
/// query or a location, which may be named) do not count.
pub fn echoed<'a>(message: &'a str, input: &[u8], allowed: &str, min: usize) -> Option<&'a str> {
    let bytes = message.as_bytes();
    if bytes.len() < min || input.len() < min {
        return None;
    }
    let windows: std::collections::HashSet<&[u8]> = input.windows(min).collect();
    let mut longest: Option<&str> = None;
    let mut start = 0;
    while start + min <= bytes.len() {
        let window = &bytes[start..start + min];
        if windows.contains(window) && !contains(allowed.as_bytes(), window) {
            // Extend the run as far as the input holds it.
            let mut end = start + min;
            while end < bytes.len() && contains(input, &bytes[start..=end]) {
                end += 1;
            }
            let run = &message[floor(message, start)..floor(message, end)];
            if longest.is_none_or(|l| run.len() > l.len()) {
                longest = Some(run);
            }
            start = end;
        } else {
            start += 1;
        }
    }
    longest.filter(|run| run.trim().len() >= min / 2)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

fn floor(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}
