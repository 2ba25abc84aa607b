//! Every trigger type's metadata parser, through the registry's parse-only check
//! (`Registry::check`): the input chooses the type, the metadata, auth params, resolved
//! environment and trigger flags (text form: `keda_rs_fuzz::context_from_text`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    keda_rs_fuzz::check_trigger(&keda_rs_fuzz::context_from_text(&text));
});
