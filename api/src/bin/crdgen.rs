//! Prints the keda-rs CRDs as multi-document YAML, or writes one file per CRD with `--out DIR`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = match args.as_slice() {
        [] => None,
        [flag, dir] if flag == "--out" => Some(PathBuf::from(dir)),
        _ => {
            eprintln!("usage: crdgen [--out DIR]");
            return ExitCode::from(2);
        }
    };
    for crd in keda_api::crd::all() {
        let yaml = match keda_api::crd::to_yaml(&crd) {
            Ok(y) => y,
            Err(e) => {
                eprintln!("cannot serialize CRD {}: {e}", crd.spec.names.plural);
                return ExitCode::FAILURE;
            }
        };
        match &out {
            None => print!("{yaml}"),
            Some(dir) => {
                let path = dir.join(keda_api::crd::file_name(&crd));
                if let Err(e) = std::fs::write(&path, yaml) {
                    eprintln!("cannot write {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    ExitCode::SUCCESS
}
