//! What the administrator sets for every scaler's outgoing TLS and HTTP connections, once per
//! process, as KEDA's process-wide settings do: extra trusted CAs (`--ca-dir`, every PEM file
//! in each directory), `KEDA_HTTP_MIN_TLS_VERSION`, `KEDA_HTTP_TLS_CIPHER_LIST` (see
//! [`keda_tls::policy`] for the mapping onto rustls), `KEDA_HTTP_DISABLE_KEEP_ALIVE` and the
//! idle-pool flags. [`install`] sets it at start; until then (and in tests that do not set it)
//! the defaults apply.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// The most files read from one `--ca-dir` directory.
pub const MAX_CA_FILES: usize = 256;
/// The largest CA file read (1 MiB); larger ones are skipped.
pub const MAX_CA_FILE_BYTES: u64 = 1 << 20;

/// The process-wide client policy.
#[derive(Debug, Clone)]
pub struct ClientPolicy {
    /// CAs trusted besides the system's and a trigger's own `ca`.
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// Versions and suites.
    pub tls: keda_tls::TlsPolicy,
    /// `KEDA_HTTP_DISABLE_KEEP_ALIVE`: no idle connection is kept.
    pub disable_keep_alive: bool,
    /// Idle connections a pooled HTTP client keeps (capped by its in-flight limit).
    pub max_idle_per_host: usize,
    /// How long an idle connection stays.
    pub idle_timeout: Duration,
}

impl Default for ClientPolicy {
    fn default() -> Self {
        Self {
            extra_roots: Vec::new(),
            tls: keda_tls::TlsPolicy::default(),
            disable_keep_alive: false,
            max_idle_per_host: crate::http_client::MAX_IN_FLIGHT,
            idle_timeout: Duration::from_secs(90),
        }
    }
}

static POLICY: OnceLock<ClientPolicy> = OnceLock::new();

/// Sets the process-wide policy; only the first call counts (returns whether it did).
pub fn install(policy: ClientPolicy) -> bool {
    POLICY.set(policy).is_ok()
}

/// The process-wide policy, or the defaults.
pub fn current() -> &'static ClientPolicy {
    static DEFAULT: OnceLock<ClientPolicy> = OnceLock::new();
    POLICY
        .get()
        .unwrap_or_else(|| DEFAULT.get_or_init(ClientPolicy::default))
}

/// What reading `--ca-dir` directories found: the certificates, and one line per file skipped.
#[derive(Debug, Default)]
pub struct CaDirs {
    pub certs: Vec<CertificateDer<'static>>,
    pub skipped: Vec<String>,
}

/// Every PEM certificate in the regular files of `dirs` (not recursive), as KEDA's
/// `SetCACertDirs` reads them. A missing directory is skipped quietly (`/custom/ca` is the
/// default whether or not it is mounted); files beyond [`MAX_CA_FILES`] per directory, larger
/// than [`MAX_CA_FILE_BYTES`], or without a PEM certificate are skipped and named.
pub fn read_ca_dirs(dirs: &[impl AsRef<Path>]) -> CaDirs {
    let mut found = CaDirs::default();
    for dir in dirs {
        let dir = dir.as_ref();
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut paths: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        if paths.len() > MAX_CA_FILES {
            found.skipped.push(format!(
                "{}: only the first {MAX_CA_FILES} files are read",
                dir.display()
            ));
            paths.truncate(MAX_CA_FILES);
        }
        for path in paths {
            let too_large = std::fs::metadata(&path).map_or(true, |m| m.len() > MAX_CA_FILE_BYTES);
            if too_large {
                found.skipped.push(format!(
                    "{}: larger than {MAX_CA_FILE_BYTES} bytes",
                    path.display()
                ));
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                found
                    .skipped
                    .push(format!("{}: unreadable", path.display()));
                continue;
            };
            let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
                .filter_map(Result::ok)
                .collect();
            if certs.is_empty() {
                found
                    .skipped
                    .push(format!("{}: no PEM certificate", path.display()));
            }
            found.certs.extend(certs);
        }
    }
    found
}
